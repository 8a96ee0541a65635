"""Calls the reference op through a name built at run time (invisible to the static checks)."""

import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("cheat_detected:reference_call",)


class ModelNew(nn.Module):
    def forward(self, x):
        name = "soft" + "max"
        return getattr(x, name)(-1)
