"""Pre-norm transformer MLP block on the CPU: LayerNorm, then two GEMMs with fused epilogues.

    y = x + fc2(gelu(fc1(layer_norm(x))))

Three kernels (the reference runs six ops and keeps three intermediates):

1. ``layer_norm``: per token, two-pass mean/variance in double, one fused scale-and-shift pass;
2. ``linear`` with the bias + exact GELU epilogue: h = gelu(n @ W1.T + b1);
3. ``linear`` with the bias + residual epilogue: y = x + h @ W2.T + b2.

``linear`` is the NT GEMM of gemm_bias_relu.py (4 x 4 blocks of SIMD dot
products over contiguous rows, OpenMP over 32 x 32 output tiles) with the
epilogue as a template parameter. GELU needs erf: float32 uses a vectorisable
Abramowitz-Stegun approximation (|error| < 5e-7) built on a hand-written exp;
float64 uses std::erf.
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

static inline float exp_f32(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float shifter = 12582912.0f;  // 1.5 * 2^23
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

// Abramowitz & Stegun 7.1.26.
static inline float erf_f32(float x) {
    const float ax = std::fabs(x);
    const float t = 1.0f / std::fma(0.3275911f, ax, 1.0f);
    const float poly = std::fma(std::fma(std::fma(std::fma(1.061405429f, t, -1.453152027f), t, 1.421413741f), t, -0.284496736f),
                                t, 0.254829592f) * t;
    return std::copysign(1.0f - poly * exp_f32(-ax * ax), x);
}
static inline float erf_any(float x) { return erf_f32(x); }
static inline double erf_any(double x) { return std::erf(x); }

template <typename T>
static inline T gelu(T v) { return T(0.5) * v * (T(1) + erf_any(v * T(0.70710678118654752440))); }

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

struct BiasGelu {
    template <typename T> T operator()(T acc, T bias, const T*, int64_t) const { return gelu(acc + bias); }
};
struct BiasResidual {
    template <typename T> T operator()(T acc, T bias, const T* residual, int64_t index) const { return residual[index] + acc + bias; }
};

// out[b, n] = epilogue(sum_k x[b, k] * w[n, k], bias[n], residual, b * N + n)
template <typename T, typename Epilogue>
static void linear(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, const T* __restrict__ residual,
                   T* __restrict__ out, int64_t B, int64_t K, int64_t N, Epilogue epi) {
    constexpr int64_t TB = 32, TN = 32;
    const int64_t b_tiles = (B + TB - 1) / TB, n_tiles = (N + TN - 1) / TN;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t tn = 0; tn < n_tiles; ++tn) {
        for (int64_t tb = 0; tb < b_tiles; ++tb) {
            const int64_t b_end = std::min(B, (tb + 1) * TB), n_end = std::min(N, (tn + 1) * TN);
            for (int64_t b = tb * TB; b < b_end; b += 4) {
                for (int64_t n = tn * TN; n < n_end; n += 4) {
                    if (b + 4 <= b_end && n + 4 <= n_end) {
                        const T *x0 = x + b * K, *x1 = x0 + K, *x2 = x1 + K, *x3 = x2 + K;
                        const T *w0 = w + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
                        T s00 = 0, s01 = 0, s02 = 0, s03 = 0, s10 = 0, s11 = 0, s12 = 0, s13 = 0;
                        T s20 = 0, s21 = 0, s22 = 0, s23 = 0, s30 = 0, s31 = 0, s32 = 0, s33 = 0;
                        #pragma omp simd reduction(+ : s00, s01, s02, s03, s10, s11, s12, s13, s20, s21, s22, s23, s30, s31, s32, s33)
                        for (int64_t k = 0; k < K; ++k) {
                            const T a0 = x0[k], a1 = x1[k], a2 = x2[k], a3 = x3[k];
                            const T c0 = w0[k], c1 = w1[k], c2 = w2[k], c3 = w3[k];
                            s00 += a0 * c0; s01 += a0 * c1; s02 += a0 * c2; s03 += a0 * c3;
                            s10 += a1 * c0; s11 += a1 * c1; s12 += a1 * c2; s13 += a1 * c3;
                            s20 += a2 * c0; s21 += a2 * c1; s22 += a2 * c2; s23 += a2 * c3;
                            s30 += a3 * c0; s31 += a3 * c1; s32 += a3 * c2; s33 += a3 * c3;
                        }
                        const T s[4][4] = {{s00, s01, s02, s03}, {s10, s11, s12, s13}, {s20, s21, s22, s23}, {s30, s31, s32, s33}};
                        for (int i = 0; i < 4; ++i)
                            for (int j = 0; j < 4; ++j) {
                                const int64_t index = (b + i) * N + n + j;
                                out[index] = epi(s[i][j], bias[n + j], residual, index);
                            }
                    } else {
                        for (int64_t bi = b; bi < std::min(b + 4, b_end); ++bi)
                            for (int64_t nj = n; nj < std::min(n + 4, n_end); ++nj) {
                                const T* xr = x + bi * K;
                                const T* wr = w + nj * K;
                                T acc = 0;
                                #pragma omp simd reduction(+ : acc)
                                for (int64_t k = 0; k < K; ++k) acc += xr[k] * wr[k];
                                out[bi * N + nj] = epi(acc, bias[nj], residual, bi * N + nj);
                            }
                    }
                }
            }
        }
    }
}

#define MLP_ENTRY(SUFFIX, T)                                                                                              \
    extern "C" void layer_norm_##SUFFIX(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t n, double eps) { \
        layer_norm(x, w, b, y, rows, n, eps);                                                                             \
    }                                                                                                                     \
    extern "C" void linear_gelu_##SUFFIX(const T* x, const T* w, const T* b, T* y, int64_t B, int64_t K, int64_t N) {    \
        linear(x, w, b, static_cast<const T*>(nullptr), y, B, K, N, BiasGelu{});                                          \
    }                                                                                                                     \
    extern "C" void linear_residual_##SUFFIX(const T* x, const T* w, const T* b, const T* res, T* y, int64_t B,           \
                                             int64_t K, int64_t N) {                                                      \
        linear(x, w, b, res, y, B, K, N, BiasResidual{});                                                                 \
    }

MLP_ENTRY(f32, float)
MLP_ENTRY(f64, double)
""")

_KERNELS = {
    torch.float32: (_lib.layer_norm_f32, _lib.linear_gelu_f32, _lib.linear_residual_f32),
    torch.float64: (_lib.layer_norm_f64, _lib.linear_gelu_f64, _lib.linear_residual_f64),
}


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int, dtype: str):
        super().__init__()
        # The reference's modules, created in the same order, so parameter names and values match.
        dtype = getattr(torch, dtype)
        self.norm = nn.LayerNorm(dim, dtype=dtype)
        self.fc1 = nn.Linear(dim, hidden, dtype=dtype)
        self.fc2 = nn.Linear(hidden, dim, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layer_norm, linear_gelu, linear_residual = _KERNELS[x.dtype]
        x = x.contiguous()
        dim = x.shape[-1]
        tokens = x.numel() // dim
        hidden = self.fc1.weight.shape[0]
        normed = torch.empty_like(x)
        layer_norm(x, self.norm.weight.detach(), self.norm.bias.detach(), normed, tokens, dim, float(self.norm.eps))
        h = torch.empty(tokens, hidden, dtype=x.dtype)
        linear_gelu(normed, self.fc1.weight.detach(), self.fc1.bias.detach(), h, tokens, dim, hidden)
        y = torch.empty_like(x)
        linear_residual(h, self.fc2.weight.detach(), self.fc2.bias.detach(), x, y, tokens, hidden, dim)
        return y
