"""Returns a tensor subclass whose values are only computed when someone looks at them."""

import torch
import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:tensor_subclass",)


class Lazy(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x).as_subclass(Lazy)
