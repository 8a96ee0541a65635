"""Returns zeros: softmax values are tiny (1e-3), so a loose absolute tolerance would pass this."""

import torch
import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("incorrect:mismatch",)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
