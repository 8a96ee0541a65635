"""Builds torch's own Softmax module in __init__ (allowed) and calls it in forward (not allowed)."""

import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("cheat_detected:reference_call",)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Softmax(dim=-1)

    def forward(self, x):
        return self.inner(x)
