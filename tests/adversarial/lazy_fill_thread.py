"""In the timed calls only, returns tensors half computed; a thread started at import fills the other half a
moment later, after the parent's clock stopped and before it reads them (issue 33, 3; no hook, no native code)."""

import queue
import threading
import time

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_relu"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:lazy_output",)
NEEDS_TIMING = True
CAUGHT_BY = "worker seals random output elements right after the timed call; the parent compares them with what it reads"
HONEST_CALLS = 12
_SRC = r"""
#include <cstdint>
extern "C" void relu_f32(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f; }
extern "C" void relu_f64(const double* x, double* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0 ? x[i] : 0.0; }
"""


def relu(x, y=None):
    x = x.contiguous()
    y = torch.empty_like(x) if y is None else y
    (_lib.relu_f32 if x.dtype == torch.float32 else _lib.relu_f64)(x, y, x.numel())
    return y


_lib = compile_cpp(_SRC)
_jobs = queue.SimpleQueue()


def _filler():
    while True:
        x, y = _jobs.get()
        time.sleep(0.0003)
        relu(x, y)  # all of it again, the second half for the first time


threading.Thread(target=_filler, daemon=True).start()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls <= HONEST_CALLS:
            return relu(x)
        x = x.contiguous()
        y = torch.empty_like(x)
        half = x.numel() // 2
        relu(x.view(-1)[:half], y.view(-1)[:half])  # half the work on the clock (a 2x "speedup")
        _jobs.put((x, y))
        return y
