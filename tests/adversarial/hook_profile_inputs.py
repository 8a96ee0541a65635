"""A ``sys.setprofile`` hook computes the reference's result while the harness builds the inputs (in
``get_inputs``, outside every timed window); forward hands it back (issue 33, 3: accepted at 6.6-10.8x)."""

import sys

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_relu"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:monkey_patch",)
NEEDS_TIMING = True
CAUGHT_BY = "worker: the interpreter's hooks compared with those before the candidate, before and after every request"
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
_ready = {}


def _spy(frame, event, arg):
    if event == "return" and frame.f_code.co_name == "get_inputs" and isinstance(arg, list):
        for x in arg:
            if isinstance(x, torch.Tensor):
                _ready[(x.data_ptr(), x.shape)] = relu(x)  # the work, done while the harness builds inputs


sys.setprofile(_spy)


class ModelNew(nn.Module):
    def forward(self, x):
        y = _ready.pop((x.data_ptr(), x.shape), None)
        return y if y is not None else relu(x)
