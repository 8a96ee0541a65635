"""Writes every result into one preallocated buffer and returns it (no allocation, no page faults)."""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_softmax"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("cheat_detected:output_reuses_buffer", "incorrect:mismatch", "incorrect:timed_mismatch")
NEEDS_TIMING = True
CAUGHT_BY = "candidate worker reports outputs sharing storage across calls; the parent compares with the reference"

_lib = compile_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float m = xr[0];
        for (int64_t i = 1; i < n; ++i) m = xr[i] > m ? xr[i] : m;
        double s = 0;
        for (int64_t i = 0; i < n; ++i) { yr[i] = std::exp(xr[i] - m); s += yr[i]; }
        for (int64_t i = 0; i < n; ++i) yr[i] = float(yr[i] / s);
    }
}
""")


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _lib.softmax_rows(x, y, x.shape[0], x.shape[1])
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.out = None

    def forward(self, x):
        x = x.contiguous()
        if self.out is None or self.out.shape != x.shape:
            self.out = torch.empty_like(x)
        _lib.softmax_rows(x, self.out, x.shape[0], x.shape[1])
        return self.out
