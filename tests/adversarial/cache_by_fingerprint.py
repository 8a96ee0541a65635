"""Caches outputs by a fingerprint of the input (its shape and first elements), not its whole content: never hit
by fresh inputs, but by a ring of reused input sets (issue 11) it would be, serving outputs without computing them.
Timed calls' inputs are ring sets with random positions mixed in from another set, so a hit is a stale output.
(Checked on 4 Dec with the mixing switched off, RING_MIX = 0: no timed_mismatch; only the native probe flagged it,
because a cache hit leaves so little native work that torch's glue code dominates its samples.)"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_softmax"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("incorrect:timed_mismatch",)
NEEDS_TIMING = True

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
extern "C" void copy_floats(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i];
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
        self.cache = {}

    def forward(self, x):
        key = (tuple(x.shape), tuple(x.reshape(-1)[:4].tolist()))
        if key not in self.cache:
            self.cache[key] = softmax(x)
        cached = self.cache[key]
        out = torch.empty_like(cached)
        _lib.copy_floats(cached, out, cached.numel())  # its own copy: no time in libtorch for the native probe
        return out
