"""Row-wise softmax on the CPU: three vectorised passes per row, rows spread over threads.

1. the row maximum (SIMD max reduction);
2. e = exp(x - max) written to the output, summed on the way in SIMD lanes
   (hand-written, vectorisable exps: ~1e-7 relative error for float32, ~1e-16
   for float64; std::exp does not vectorise without -ffast-math);
3. the output scaled by 1 / sum.

Rows are independent, so they are the parallel dimension; when there are
fewer rows than threads the passes inside a row are parallelised instead.
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <omp.h>

// exp for float32 without -ffast-math: exp(x) = 2^n * exp(r), |r| <= ln2/2, Cephes polynomial.
static inline float exp_f32(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float shifter = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
    float n = std::fma(x, 1.44269504088896341f, shifter) - shifter;
    float r = std::fma(n, -0.693359375f, x);
    r = std::fma(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = std::fma(p, r, 1.3981999507e-3f);
    p = std::fma(p, r, 8.3334519073e-3f);
    p = std::fma(p, r, 4.1665795894e-2f);
    p = std::fma(p, r, 1.6666665459e-1f);
    p = std::fma(p, r, 5.0000001201e-1f);
    p = std::fma(p, r * r, r) + 1.0f;
    int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
// exp for float64: the same reduction with Cephes' rational approximation (~1e-16 relative).
static inline double exp_f64(double x) {
    x = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
    const double shifter = 6755399441055744.0;  // 1.5 * 2^52
    double n = std::fma(x, 1.4426950408889634, shifter) - shifter;
    double r = std::fma(n, -6.93145751953125e-1, x);
    r = std::fma(n, -1.42860682030941723212e-6, r);
    const double rr = r * r;
    const double px = r * std::fma(std::fma(1.26177193074810590878e-4, rr, 3.02994407707441961300e-2), rr, 9.99999999999999999910e-1);
    const double qx = std::fma(std::fma(std::fma(3.00198505138664455042e-6, rr, 2.52448340349684104192e-3), rr,
                                        2.27265548208155028766e-1), rr, 2.0);
    const double e = 1.0 + 2.0 * px / (qx - px);
    int64_t bits = (static_cast<int64_t>(n) + 1023) << 52;
    double scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return e * scale;
}
static inline double exp_any(double x) { return exp_f64(x); }
static inline float exp_any(float x) { return exp_f32(x); }

// One row on the calling thread.
template <typename T>
static void softmax_row(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    T m = x[0];
    #pragma omp simd reduction(max : m)
    for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
    T sum = 0;  // per-lane partial sums: the rounding error stays ~sqrt(n / lanes) ulp
    #pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; ++i) {
        T e = exp_any(x[i] - m);
        y[i] = e;
        sum += e;
    }
    const T inv = T(1) / sum;
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

// One long row shared by all threads (used when there are fewer rows than threads).
template <typename T>
static void softmax_row_parallel(const T* __restrict__ x, T* __restrict__ y, int64_t n) {
    T m = x[0];
    #pragma omp parallel for simd reduction(max : m) schedule(static)
    for (int64_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
    double sum = 0.0;
    #pragma omp parallel for simd reduction(+ : sum) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        T e = exp_any(x[i] - m);
        y[i] = e;
        sum += e;
    }
    const T inv = static_cast<T>(1.0 / sum);
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] *= inv;
}

template <typename T>
static void softmax(const T* x, T* y, int64_t rows, int64_t n) {
    if (rows >= 2 * omp_get_max_threads()) {
        #pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < rows; ++r) softmax_row(x + r * n, y + r * n, n);
    } else {
        for (int64_t r = 0; r < rows; ++r) softmax_row_parallel(x + r * n, y + r * n, n);
    }
}

extern "C" void softmax_f32(const float* x, float* y, int64_t rows, int64_t n) { softmax(x, y, rows, n); }
extern "C" void softmax_f64(const double* x, double* y, int64_t rows, int64_t n) { softmax(x, y, rows, n); }
""")

_KERNELS = {torch.float32: _lib.softmax_f32, torch.float64: _lib.softmax_f64}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        _KERNELS[x.dtype](x, y, x.numel() // n, n)
        return y
