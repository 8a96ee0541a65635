"""LayerNorm over the last dimension on the CPU: one thread per row block, two vectorised passes.

Per row: the mean, then the variance of (x - mean) (two passes: a one-pass
E[x^2] - E[x]^2 loses everything when the mean is large, which one case
tests), both accumulated in double; then y = (x - mean) * rstd * weight + bias
in one fused SIMD loop. The eps comes from the module, like nn.LayerNorm's.
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <cmath>
#include <cstdint>
#include <omp.h>

template <typename T>
static void layer_norm(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                       int64_t rows, int64_t n, double eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const T* xr = x + r * n;
        T* yr = y + r * n;
        double sum = 0.0;
        #pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; ++i) sum += xr[i];
        const double mean = sum / n;
        double sq = 0.0;
        #pragma omp simd reduction(+ : sq)
        for (int64_t i = 0; i < n; ++i) {
            const double d = xr[i] - mean;
            sq += d * d;
        }
        const T rstd = static_cast<T>(1.0 / std::sqrt(sq / n + eps));
        const T m = static_cast<T>(mean);
        #pragma omp simd
        for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) * rstd * w[i] + b[i];
    }
}

extern "C" void layer_norm_f32(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t n, double eps) {
    layer_norm(x, w, b, y, rows, n, eps);
}
extern "C" void layer_norm_f64(const double* x, const double* w, const double* b, double* y, int64_t rows, int64_t n, double eps) {
    layer_norm(x, w, b, y, rows, n, eps);
}
""")

_KERNELS = {torch.float32: _lib.layer_norm_f32, torch.float64: _lib.layer_norm_f64}


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float, dtype: str):
        super().__init__()
        # The same module as the reference's, created the same way, so the parameters match.
        self.norm = nn.LayerNorm(hidden, eps=eps, dtype=getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.norm.weight.detach().contiguous()
        b = self.norm.bias.detach().contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        _KERNELS[x.dtype](x, w, b, y, x.numel() // n, n, float(self.norm.eps))
        return y
