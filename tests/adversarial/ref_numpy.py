"""Computes the softmax with numpy (its own compiled loops, or BLAS for matmuls) instead of a kernel of its own."""

import numpy as np
import torch
import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("cheat_detected:reference_call",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: native samples of the worker's threads (perf events) land in numpy's loops"


class ModelNew(nn.Module):
    def forward(self, x):
        a = x.numpy()
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        s = e / e.sum(axis=-1, keepdims=True)
        return torch.from_numpy(np.ascontiguousarray(s, dtype=np.float32))
