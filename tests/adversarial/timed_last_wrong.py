"""Right in the correctness trials; in the timed calls only the last element of each output is wrong (a vectorised
kernel that skips its tail when timed).

The parent's sampled check of a timed output always reads its first and last blocks (docs/harness-workers.md,
"Sampled checks of timed outputs").
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "wide_relu"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("incorrect:timed_mismatch",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: the first and last blocks of every timed output compared with the reference's"
HONEST_CALLS = 12  # the correctness trials (and their warm-up) see an honest kernel
_SRC = r"""
#include <cstdint>
template <typename T> static void relu(const T* x, T* y, int64_t n, int64_t every, int64_t last) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
    for (int64_t i = 0; every > 0 && i < n; i += every) y[i] += T(1);  // wrong by 1
    if (last && n > 0) y[n - 1] = T(-1);
}
extern "C" void relu_f32(const float* x, float* y, int64_t n, int64_t every, int64_t last) { relu(x, y, n, every, last); }
extern "C" void relu_f64(const double* x, double* y, int64_t n, int64_t every, int64_t last) { relu(x, y, n, every, last); }
"""
_lib = compile_cpp(_SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        timed = self.calls > HONEST_CALLS
        x = x.contiguous()
        y = torch.empty_like(x)
        (_lib.relu_f32 if x.dtype == torch.float32 else _lib.relu_f64)(x, y, x.numel(), 0, int(timed))
        return y
