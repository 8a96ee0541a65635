"""nn.Conv2d (NCHW, bias, zero padding, any stride) on the CPU: a direct convolution.

One OpenMP task per (image, output channel). The output plane starts as the
bias; then for every input channel and kernel tap the shifted input rows are
multiplied by one weight and accumulated into the output rows (SIMD along
the output width; unit stride when stride == 1). The valid column range of
each tap is computed once, so padding costs no branches in the inner loop.
The output plane (at most a few tens of KB) stays in cache throughout.
"""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <algorithm>
#include <cstdint>

template <typename T>
static void conv2d(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ y,
                   int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t KH, int64_t KW,
                   int64_t S, int64_t P, int64_t OH, int64_t OW) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t o = 0; o < O; ++o) {
            T* out = y + (n * O + o) * OH * OW;
            std::fill(out, out + OH * OW, bias[o]);
            for (int64_t c = 0; c < C; ++c) {
                const T* in = x + (n * C + c) * H * W;
                for (int64_t kh = 0; kh < KH; ++kh) {
                    for (int64_t kw = 0; kw < KW; ++kw) {
                        const T wv = w[((o * C + c) * KH + kh) * KW + kw];
                        const int64_t shift = kw - P;  // input column = ow * S + shift
                        const int64_t lo = shift >= 0 ? 0 : (-shift + S - 1) / S;
                        const int64_t hi = W - 1 - shift < 0 ? 0 : std::min(OW, (W - 1 - shift) / S + 1);
                        for (int64_t oh = 0; oh < OH; ++oh) {
                            const int64_t ih = oh * S - P + kh;
                            if (ih < 0 || ih >= H) continue;
                            const T* row = in + ih * W + shift;
                            T* orow = out + oh * OW;
                            if (S == 1) {
                                #pragma omp simd
                                for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * row[ow];
                            } else {
                                #pragma omp simd
                                for (int64_t ow = lo; ow < hi; ++ow) orow[ow] += wv * row[ow * S];
                            }
                        }
                    }
                }
            }
        }
    }
}

extern "C" void conv2d_f32(const float* x, const float* w, const float* b, float* y, int64_t N, int64_t C, int64_t H,
                           int64_t W, int64_t O, int64_t KH, int64_t KW, int64_t S, int64_t P, int64_t OH, int64_t OW) {
    conv2d(x, w, b, y, N, C, H, W, O, KH, KW, S, P, OH, OW);
}
extern "C" void conv2d_f64(const double* x, const double* w, const double* b, double* y, int64_t N, int64_t C, int64_t H,
                           int64_t W, int64_t O, int64_t KH, int64_t KW, int64_t S, int64_t P, int64_t OH, int64_t OW) {
    conv2d(x, w, b, y, N, C, H, W, O, KH, KW, S, P, OH, OW);
}
""")

_KERNELS = {torch.float32: _lib.conv2d_f32, torch.float64: _lib.conv2d_f64}


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, padding: int, dtype: str):
        super().__init__()
        # The same parameters as the reference (created the same way, so the harness's seed gives the same values).
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=padding, bias=True,
                              dtype=getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.conv.weight.detach().contiguous()
        bias = self.conv.bias.detach().contiguous()
        n, c, h, w = x.shape
        o, _, kh, kw = weight.shape
        s, p = self.conv.stride[0], self.conv.padding[0]
        oh, ow = (h + 2 * p - kh) // s + 1, (w + 2 * p - kw) // s + 1
        y = torch.empty(n, o, oh, ow, dtype=x.dtype)
        _KERNELS[x.dtype](x, weight, bias, y, n, c, h, w, o, kh, kw, s, p, oh, ow)
        return y
