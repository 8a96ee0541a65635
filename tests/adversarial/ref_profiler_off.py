"""Stops the dispatcher's profiler (the harness's op observer, RecordFunction) inside forward, then calls the reference
op with torch's dispatch modes switched off, so neither the dispatch recorder nor the observer sees it."""

import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:monkey_patch",)
CAUGHT_BY = "worker: the op observer's own ops before and after forward, and its state (monkey_patch)"
CAUGHT_MESSAGE = "op observer"

_softmax = getattr(torch, "soft" + "max")
_autograd = getattr(torch._C, "_autograd")


class ModelNew(nn.Module):
    def forward(self, x):
        try:
            getattr(_autograd, "_disable_" + "profiler")()
        except RuntimeError:
            pass
        with _disable_current_modes():
            return _softmax(x, -1)
