"""Right in the correctness trials; in the timed calls every 20th element of each output (5 %) is wrong.

The parent checks a timed output of this size by blocks it draws after the call returned (docs/harness-workers.md,
"Sampled checks of timed outputs"): a 5 % share escapes 1375 drawn elements with probability 0.95^1375 < 1e-30.
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "wide_relu"
EXPECT_STATIC = None
EXPECT_RUNTIME = ("incorrect:timed_mismatch",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: random blocks of every timed output, drawn after the call, compared with the reference's"
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
        (_lib.relu_f32 if x.dtype == torch.float32 else _lib.relu_f64)(x, y, x.numel(), 20 if timed else 0, 0)
        return y
