"""relu(x @ W.T + b) on the CPU in one pass: a GEMM with the bias and ReLU fused into its epilogue.

nn.Linear stores W as (out_features, in_features), so both x and W are
contiguous along the reduction dimension K: every output is a dot product of
two contiguous rows. Outputs are computed in 4 x 4 blocks (four rows of x
against four rows of W): sixteen SIMD dot products share eight loads per step
of k. OpenMP spreads blocks of 32 W rows x 32 x rows over the threads, so a
block of W stays in L2 while the rows of x stream past it. The bias add and
the ReLU happen when each output is written, so the output is touched once
(the reference makes three passes: matmul, add, relu).
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <algorithm>
#include <cstdint>

// out[b, n] = relu(sum_k x[b, k] * w[n, k] + bias[n])
template <typename T>
static void linear_bias_relu(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                             T* __restrict__ out, int64_t B, int64_t K, int64_t N) {
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
                                const T v = s[i][j] + bias[n + j];
                                out[(b + i) * N + n + j] = v > T(0) ? v : T(0);
                            }
                    } else {  // edge of the output: one dot product at a time
                        for (int64_t bi = b; bi < std::min(b + 4, b_end); ++bi)
                            for (int64_t nj = n; nj < std::min(n + 4, n_end); ++nj) {
                                const T* xr = x + bi * K;
                                const T* wr = w + nj * K;
                                T acc = 0;
                                #pragma omp simd reduction(+ : acc)
                                for (int64_t k = 0; k < K; ++k) acc += xr[k] * wr[k];
                                const T v = acc + bias[nj];
                                out[bi * N + nj] = v > T(0) ? v : T(0);
                            }
                    }
                }
            }
        }
    }
}

extern "C" void gemm_bias_relu_f32(const float* x, const float* w, const float* b, float* y, int64_t B, int64_t K, int64_t N) {
    linear_bias_relu(x, w, b, y, B, K, N);
}
extern "C" void gemm_bias_relu_f64(const double* x, const double* w, const double* b, double* y, int64_t B, int64_t K, int64_t N) {
    linear_bias_relu(x, w, b, y, B, K, N);
}
""")

_KERNELS = {torch.float32: _lib.gemm_bias_relu_f32, torch.float64: _lib.gemm_bias_relu_f64}


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, dtype: str):
        super().__init__()
        # Parameters created exactly as the reference creates them (same names, shapes, order, seed).
        dtype = getattr(torch, dtype)
        self.gemm = nn.Linear(in_features, out_features, bias=False, dtype=dtype)
        self.bias = nn.Parameter(torch.randn(out_features, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.gemm.weight.detach().contiguous()
        b = self.bias.detach().contiguous()
        y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype)
        _KERNELS[x.dtype](x, w, b, y, x.shape[0], x.shape[1], w.shape[0])
        return y
