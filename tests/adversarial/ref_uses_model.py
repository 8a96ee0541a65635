"""Copies the reference Model into the candidate file and calls it."""

import torch
import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:reference_call"
EXPECT_RUNTIME = ("cheat_detected:reference_call",)


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ref = Model()

    def forward(self, x):
        return self.ref(x)
