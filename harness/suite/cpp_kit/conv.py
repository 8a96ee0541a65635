"""2-D convolution (NCHW, groups 1) in C++: direct, explicit im2col + GEMM, or implicit GEMM.

More on it: docs/templates.md, "Template notes", cpp_kit/conv.
"""

from __future__ import annotations

from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.candidate import CASTS, entry_macro
from harness.suite.cpp_kit.prelude import PRELUDE, isa_define

ALGORITHMS = {"direct": 0, "im2col": 1, "implicit_gemm": 2}
ALGORITHM_DOC = (
    "'direct' loops over taps (SIMD along output rows, MR output channels per task); 'im2col' "
    "writes the patch matrix then runs the GEMM; 'implicit_gemm' gathers patches while packing "
    "the GEMM's B panels"
)


def defines(algorithm: str) -> str:
    return f"#define KOPE_CONV_ALGO {ALGORITHMS[algorithm]}  // algorithm={algorithm}\n"


CONV = r"""
// ==== convolution ===========================================================================
template <class T> struct ConvArgs {
    const T* x; const T* w; const T* bias; T* y;   // bias may be null
    i64 N, C, H, W, O, KH, KW, SH, SW, PH, PW, OH, OW;
    int relu;
};

template <class T> static inline typename AccOf<T>::type bias_act(const ConvArgs<T>& a, i64 o, typename AccOf<T>::type v) {
    typedef typename AccOf<T>::type Acc;
    if (a.bias != nullptr) v += to_acc(a.bias[o]);
    return a.relu && v < Acc(0) ? Acc(0) : v;
}

// ---- direct ----------------------------------------------------------------------------------
// acc[r * OW + ow] += sum over (c, kh, kw) of w[o0 + r, c, kh, kw] * x[n, c, oh*SH - PH + kh, ow*SW - PW + kw]
// for ow in [ow_a, ow_b) and r < on (bounds handled per tap).
template <class T, class Acc>
static void direct_generic(const ConvArgs<T>& a, i64 n, i64 o0, int on, i64 oh, i64 ow_a, i64 ow_b, Acc* acc) {
    const i64 taps = a.KH * a.KW;
    for (i64 c = 0; c < a.C; ++c)
        for (i64 kh = 0; kh < a.KH; ++kh) {
            const i64 ih = oh * a.SH - a.PH + kh;
            if (ih < 0 || ih >= a.H) continue;
            const T* row = a.x + ((n * a.C + c) * a.H + ih) * a.W;
            for (i64 kw = 0; kw < a.KW; ++kw) {
                const i64 shift = kw - a.PW;                 // input column = ow * SW + shift
                const i64 lo = std::max(ow_a, shift >= 0 ? 0 : cdiv(-shift, a.SW));
                const i64 hi = std::min(ow_b, a.W - 1 - shift < 0 ? 0 : (a.W - 1 - shift) / a.SW + 1);
                for (int r = 0; r < on; ++r) {
                    const Acc wv = to_acc(a.w[((o0 + r) * a.C + c) * taps + kh * a.KW + kw]);
                    Acc* ar = acc + r * a.OW;
                    if (a.SW == 1) {
                        const T* src = row + shift;
                        #pragma omp simd
                        for (i64 ow = lo; ow < hi; ++ow) ar[ow] += wv * to_acc(src[ow]);
                    } else {
                        #pragma omp simd
                        for (i64 ow = lo; ow < hi; ++ow) ar[ow] += wv * to_acc(row[ow * a.SW + shift]);
                    }
                }
            }
        }
}

#if KOPE_VEC_BITS
// Interior outputs (every tap in bounds), unit stride, a full block of MR channels:
// MR x NV vectors of outputs stay in registers across all taps. Returns the first ow not done.
template <class T, class Acc>
static i64 direct_vec(const ConvArgs<T>& a, i64 n, i64 o0, i64 oh, Acc* acc) {
    typedef Vec<Acc> V;
    constexpr int L = V::L, CH = NV * L;
    const i64 taps = a.KH * a.KW, wstride = a.C * taps;
    const i64 first = a.PW, end = std::min(a.OW, a.W - a.KW + 1 + a.PW);
    i64 ow0 = first;
    for (; ow0 + CH <= end; ow0 += CH) {
        typename V::R c[MR][NV];
        for (int r = 0; r < MR; ++r)
            for (int u = 0; u < NV; ++u) c[r][u] = V::zero();
        for (i64 ci = 0; ci < a.C; ++ci)
            for (i64 kh = 0; kh < a.KH; ++kh) {
                const i64 ih = oh * a.SH - a.PH + kh;
                if (ih < 0 || ih >= a.H) continue;
                const T* row = a.x + ((n * a.C + ci) * a.H + ih) * a.W + ow0 - a.PW;
                const T* wp = a.w + (o0 * a.C + ci) * taps + kh * a.KW;
                for (i64 kw = 0; kw < a.KW; ++kw) {
                    typename V::R in[NV];
                    #pragma GCC unroll 4
                    for (int u = 0; u < NV; ++u) in[u] = V::load(row + kw + u * L);
                    #pragma GCC unroll 16
                    for (int r = 0; r < MR; ++r) {
                        const typename V::R wv = V::set1(to_acc(wp[r * wstride + kw]));
                        #pragma GCC unroll 4
                        for (int u = 0; u < NV; ++u) c[r][u] = V::fma(wv, in[u], c[r][u]);
                    }
                }
            }
        for (int r = 0; r < MR; ++r)
            for (int u = 0; u < NV; ++u) V::store(acc + r * a.OW + ow0 + u * L, c[r][u]);
    }
    return ow0;
}
#endif

template <class T>
static void conv_direct(const ConvArgs<T>& a) {
    typedef typename AccOf<T>::type Acc;
    const i64 blocks = cdiv(a.O, MR);
    #pragma omp parallel for schedule(static)
    for (i64 t = 0; t < a.N * blocks * a.OH; ++t) {
        const i64 n = t / (blocks * a.OH), o0 = (t / a.OH) % blocks * MR, oh = t % a.OH;
        const int on = int(std::min<i64>(MR, a.O - o0));
        Acc* acc = scratch<Acc, 2>(size_t(MR * a.OW));
        std::fill(acc, acc + MR * a.OW, Acc(0));
        i64 done = 0;
#if KOPE_VEC_BITS
        if (a.SW == 1 && on == MR && a.PW < a.OW) {
            direct_generic(a, n, o0, on, oh, 0, a.PW, acc);
            done = direct_vec(a, n, o0, oh, acc);
        }
#endif
        direct_generic(a, n, o0, on, oh, done, a.OW, acc);
        for (int r = 0; r < on; ++r) {
            const Acc* ar = acc + r * a.OW;
            T* out = a.y + ((n * a.O + o0 + r) * a.OH + oh) * a.OW;
            #pragma omp simd
            for (i64 ow = 0; ow < a.OW; ++ow) put(out + ow, bias_act(a, o0 + r, ar[ow]));
        }
    }
}

// ---- GEMM-based: y[n] (O x OH*OW) = w (O x C*KH*KW) @ patches[n] (C*KH*KW x OH*OW) ---------------
// Implicit im2col: the B loader gathers patch values from the input while packing panels.
template <class T> struct Im2colB {
    typedef T In;
    typedef typename AccOf<T>::type Acc;
    static constexpr bool strided = false;
    const ConvArgs<T>& a;
    void pack(i64 b, i64 p0, i64 kc, i64 j0, int nr, Acc* dst) const {
        constexpr int NR = Geo<Acc>::NR;
        i64 ih0[NR], iw0[NR];
        for (int j = 0; j < nr; ++j) {
            const i64 q = j0 + j, oh = q / a.OW, ow = q % a.OW;
            ih0[j] = oh * a.SH - a.PH;
            iw0[j] = ow * a.SW - a.PW;
        }
        const i64 taps = a.KH * a.KW;
        const bool one_row = j0 / a.OW == (j0 + nr - 1) / a.OW;   // the panel's outputs share an output row
        for (i64 k = 0; k < kc; ++k) {
            const i64 p = p0 + k, c = p / taps, kh = p % taps / a.KW, kw = p % a.KW;
            const T* plane = a.x + (b * a.C + c) * a.H * a.W;
            Acc* d = dst + k * NR;
            const i64 first = iw0[0] + kw, last = iw0[nr - 1] + kw;
            if (one_row && (ih0[0] + kh < 0 || ih0[0] + kh >= a.H)) {
                std::fill(d, d + nr, Acc(0));                          // a padding row
            } else if (one_row && first >= 0 && last < a.W) {          // an in-bounds run of one input row
                const T* src = plane + (ih0[0] + kh) * a.W + first;
                if (a.SW == 1) {
                    #pragma omp simd
                    for (int j = 0; j < nr; ++j) d[j] = to_acc(src[j]);
                } else {
                    for (int j = 0; j < nr; ++j) d[j] = to_acc(src[j * a.SW]);
                }
            } else {
                for (int j = 0; j < nr; ++j) {
                    const i64 ih = ih0[j] + kh, iw = iw0[j] + kw;
                    d[j] = (ih >= 0 && ih < a.H && iw >= 0 && iw < a.W) ? to_acc(plane[ih * a.W + iw]) : Acc(0);
                }
            }
            for (int j = nr; j < NR; ++j) d[j] = Acc(0);
        }
    }
};

// Explicit im2col of image n: col[(c*KH + kh)*KW + kw, oh*OW + ow].
template <class T>
static void im2col(const ConvArgs<T>& a, i64 n, T* col) {
    const i64 rows = a.C * a.KH * a.KW, cols = a.OH * a.OW;
    T zero;
    put(&zero, typename AccOf<T>::type(0));
    #pragma omp parallel for schedule(static)
    for (i64 p = 0; p < rows; ++p) {
        const i64 c = p / (a.KH * a.KW), kh = p / a.KW % a.KH, kw = p % a.KW;
        const T* plane = a.x + (n * a.C + c) * a.H * a.W;
        T* out = col + p * cols;
        for (i64 oh = 0; oh < a.OH; ++oh) {
            const i64 ih = oh * a.SH - a.PH + kh;
            T* o = out + oh * a.OW;
            if (ih < 0 || ih >= a.H) {
                std::fill(o, o + a.OW, zero);
                continue;
            }
            const T* row = plane + ih * a.W;
            for (i64 ow = 0; ow < a.OW; ++ow) {
                const i64 iw = ow * a.SW - a.PW + kw;
                o[ow] = (iw >= 0 && iw < a.W) ? row[iw] : zero;
            }
        }
    }
}

// Epilogue: row i of C is output channel i, column j the output position.
template <class T> struct ConvRows {
    typedef typename AccOf<T>::type Acc;
    static constexpr bool rows_hook = false;
    const ConvArgs<T>& a;
    T* y;                     // this call's first image
    Acc* accumulator;
    void row(i64 b, i64 i, i64 j0, const Acc* v, i64 n) const {
        T* out = y + (b * a.O + i) * a.OH * a.OW + j0;
        #pragma omp simd
        for (i64 j = 0; j < n; ++j) put(out + j, bias_act(a, i, v[j]));
    }
    void rows_done(i64, i64, i64) const {}
};

template <class T>
static void conv_gemm(const ConvArgs<T>& a, bool fused) {
    const i64 K = a.C * a.KH * a.KW, P = a.OH * a.OW;
    StridedA<T> A{{a.w, K, 1, 0}};
    if (a.KH == 1 && a.KW == 1 && a.SH == 1 && a.SW == 1 && a.PH == 0 && a.PW == 0) {
        StridedB<T> B{{a.x, P, 1, a.C * P}};   // 1x1: the input planes are the patch matrix
        ConvRows<T> epi{a, a.y, acc_alias(a.y)};
        gemm(a.N, a.O, P, K, A, B, epi, fused);
        return;
    }
#if KOPE_CONV_ALGO == 1
    std::vector<T> col(static_cast<size_t>(K * P));
    for (i64 n = 0; n < a.N; ++n) {
        im2col(a, n, col.data());
        StridedB<T> B{{col.data(), P, 1, 0}};
        T* y = a.y + n * a.O * P;
        ConvRows<T> epi{a, y, acc_alias(y)};
        gemm(1, a.O, P, K, A, B, epi, fused);
    }
#else
    Im2colB<T> B{a};
    ConvRows<T> epi{a, a.y, acc_alias(a.y)};
    gemm(a.N, a.O, P, K, A, B, epi, fused);
#endif
}

// y = act(conv(x, w) + bias); with fused false the bias and activation are a second pass over y.
template <class T>
static void conv2d(ConvArgs<T> a, bool fused) {
    const T* bias = a.bias;
    const int relu = a.relu;
    if (!fused) a.bias = nullptr, a.relu = 0;
#if KOPE_CONV_ALGO == 0
    conv_direct(a);
#else
    conv_gemm(a, fused);
#endif
    if (!fused && (bias != nullptr || relu)) {
        a.bias = bias;
        a.relu = relu;
        const i64 P = a.OH * a.OW;
        #pragma omp parallel for schedule(static)
        for (i64 t = 0; t < a.N * a.O; ++t) {
            T* out = a.y + t * P;
            #pragma omp simd
            for (i64 j = 0; j < P; ++j) put(out + j, bias_act(a, t % a.O, to_acc(out[j])));
        }
    }
}
"""

ENTRY = entry_macro(
    "conv2d",
    "const PT* x, const PT* w, const PT* bias, PT* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, "
    "int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PH, int64_t PW, int64_t OH, int64_t OW, int relu, "
    "int fused",
    """
ConvArgs<T> a{cptr<T>(x), cptr<T>(w), cptr<T>(bias), wptr<T>(y), N, C, H, W, O, KH, KW, SH, SW, PH, PW, OH, OW, relu};
conv2d(a, fused != 0);
""",
)


def source(settings: dict) -> str:
    """The C++ of a convolution candidate: knobs algorithm, micro_kernel, isa and (optional) tiles (default
    auto); the GEMM algorithms split the work with the core's 'grid' (whole images per thread when there are
    at least as many images as threads).

    Entry point ``conv2d_<f32|f64|bf16>(x, w, bias, y, N, C, H, W, O, KH, KW, SH, SW, PH, PW, OH, OW, relu,
    fused)``: y = act(conv(x, w) + bias), act = ReLU when relu is 1; bias may be None.
    """
    return (
        isa_define(settings["isa"])
        + defines(settings["algorithm"])
        + core.defines(settings["micro_kernel"], settings.get("tiles", "auto"), True, "grid")
        + PRELUDE
        + core.GEMM
        + CONV
        + CASTS
        + ENTRY
    )
