"""For a copy operator, returns the caller's tensor itself instead of a copy."""

import torch.nn as nn

TASK = "tiny_copy"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("cheat_detected:output_aliases_input",)


class ModelNew(nn.Module):
    def forward(self, x):
        return x
