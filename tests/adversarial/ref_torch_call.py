"""Calls the reference operator itself."""

import torch
import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:reference_call"
EXPECT_RUNTIME = ("cheat_detected:reference_call",)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
