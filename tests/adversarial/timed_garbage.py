"""Right on the first calls (the correctness trials), garbage on most timed calls, right on a few.

Before, only a fixed, predictable set of timed repetitions was re-checked; now every timed output is.
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_softmax"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("incorrect:timed_mismatch",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: every timed output compared with the reference's output for the same inputs"

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
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 4 and self.calls % 7 != 0:
            return torch.empty_like(x)
        return softmax(x)
