"""The C++ prelude every compute template starts with: element types, math, SIMD vectors.

More on it: docs/templates.md, "Template notes", cpp_kit/prelude.
"""

from __future__ import annotations

ISA_BITS = {"omp_simd": 0, "avx2": 256, "avx512": 512}
ISA_DOC = (
    "instruction set of the inner loops: 'omp_simd' leaves vectorisation to the compiler "
    "(#pragma omp simd, 256-bit on this GCC), 'avx2'/'avx512' use intrinsics; a setting the "
    "CPU lacks falls back to the next one down"
)
# -ffp-contract=fast: let the compiler fuse a*b+c into FMA in the omp_simd code too. The kits compile at
# compile_cpp's -O3, although GCC 12 spends 14-23 s on each rendered kernel there (3-7 s at -O2): -O2 was
# tried on 4 Dec and made conv2d's implicit GEMM 15% slower (benchmarks/gemm_core.py --operator conv2d on the
# 2-core AMD EPYC: 0.91x PyTorch at -O3, 0.76x and 0.78x at -O2, 0.75x at -O2 -fvect-cost-model=dynamic).
FLAGS = ["-ffp-contract=fast"]


def isa_define(isa: str) -> str:
    return f"#define KOPE_ISA {ISA_BITS[isa]}  // isa={isa}\n"


PRELUDE = r"""
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

typedef int64_t i64;
static inline i64 cdiv(i64 a, i64 b) { return (a + b - 1) / b; }

// ---- element types ------------------------------------------------------------------------
struct bf16 { uint16_t bits; };                 // bfloat16 storage
template <class T> struct AccOf { typedef T type; };
template <> struct AccOf<bf16> { typedef float type; };

static inline float to_acc(float x) { return x; }
static inline double to_acc(double x) { return x; }
static inline float to_acc(bf16 x) {
    uint32_t u = uint32_t(x.bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
static inline void put(float* p, float v) { *p = v; }
static inline void put(double* p, double v) { *p = v; }
static inline void put(bf16* p, float v) {      // round to nearest even; NaN stays NaN
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    p->bits = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0u : rounded);
}

// v rounded to T's precision and widened again (an intermediate the reference keeps in T).
template <class T> static inline typename AccOf<T>::type rounded(typename AccOf<T>::type v) {
    if constexpr (std::is_same<T, bf16>::value) {
        bf16 h;
        put(&h, v);
        return to_acc(h);
    } else {
        return v;
    }
}

// The output itself can hold partial sums when it has the accumulator's type.
template <class T> static inline typename AccOf<T>::type* acc_alias(T* p) {
    if constexpr (std::is_same<T, typename AccOf<T>::type>::value) return p;
    else return nullptr;
}

// Per-thread scratch memory, grown on demand and reused across calls (SLOT tells buffers apart), aligned
// to 64 bytes (a cache line: packed GEMM panels are read with aligned vector loads).
// Slots: GEMM core 0, 1 (packing), 7, 8, 9, 15; convolution 2; windows 3-5; row kernels 6;
// blocks 10-14; attention 16-21.
template <class T, int SLOT>
static T* scratch(size_t n) {
    static thread_local std::vector<T> buf;
    const size_t pad = 64 / sizeof(T) + 1;
    if (buf.size() < n + pad) buf.resize(n + pad);
    const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
    return reinterpret_cast<T*>((p + 63) & ~uintptr_t(63));
}

// ---- math: vectorisable float versions, libm for double -------------------------------------
static inline float fexp(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float shifter = 12582912.0f;  // 1.5 * 2^23: rounds x * log2(e) to an integer
    const float n = std::fma(x, 1.44269504088896341f, shifter) - shifter;
    float r = std::fma(n, -0.693359375f, x);
    r = std::fma(n, 2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = std::fma(p, r, 1.3981999507e-3f);
    p = std::fma(p, r, 8.3334519073e-3f);
    p = std::fma(p, r, 4.1665795894e-2f);
    p = std::fma(p, r, 1.6666665459e-1f);
    p = std::fma(p, r, 5.0000001201e-1f);
    p = std::fma(p, r * r, r) + 1.0f;
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
static inline double fexp(double x) { return std::exp(x); }

static inline float ferf(float x) {            // Abramowitz & Stegun 7.1.26, |error| < 1.5e-7
    const float ax = std::fabs(x);
    const float t = 1.0f / std::fma(0.3275911f, ax, 1.0f);
    const float poly = std::fma(std::fma(std::fma(std::fma(1.061405429f, t, -1.453152027f), t, 1.421413741f), t,
                                         -0.284496736f), t, 0.254829592f) * t;
    return std::copysign(1.0f - poly * fexp(-ax * ax), x);
}
static inline double ferf(double x) { return std::erf(x); }

static inline float ftanh(float x) {           // sign(x) * (1 - e^-2|x|) / (1 + e^-2|x|)
    const float t = fexp(-2.0f * std::fabs(x));
    return std::copysign((1.0f - t) / (1.0f + t), x);
}
static inline double ftanh(double x) { return std::tanh(x); }

template <class T> static inline T fsigmoid(T x) { return T(1) / (T(1) + fexp(-x)); }
template <class T> static inline T fgelu(T x) { return T(0.5) * x * (T(1) + ferf(x * T(0.70710678118654752440))); }
template <class T> static inline T fsilu(T x) { return x * fsigmoid(x); }

// ---- SIMD vectors ---------------------------------------------------------------------------
#if KOPE_ISA >= 512 && defined(__AVX512F__)
#define KOPE_VEC_BITS 512
#elif KOPE_ISA >= 256 && defined(__AVX2__) && defined(__FMA__)
#define KOPE_VEC_BITS 256
#else
#define KOPE_VEC_BITS 0
#endif

template <class T> struct Vec;
#if KOPE_VEC_BITS == 512
template <> struct Vec<float> {
    typedef __m512 R;
    static constexpr int L = 16;
    static R zero() { return _mm512_setzero_ps(); }
    static R set1(float x) { return _mm512_set1_ps(x); }
    static R load(const float* p) { return _mm512_loadu_ps(p); }
    static R load(const bf16* p) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static void store(float* p, R v) { _mm512_storeu_ps(p, v); }
    static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
    static R add(R a, R b) { return _mm512_add_ps(a, b); }
    static float sum(R v) { return _mm512_reduce_add_ps(v); }
};
template <> struct Vec<double> {
    typedef __m512d R;
    static constexpr int L = 8;
    static R zero() { return _mm512_setzero_pd(); }
    static R set1(double x) { return _mm512_set1_pd(x); }
    static R load(const double* p) { return _mm512_loadu_pd(p); }
    static void store(double* p, R v) { _mm512_storeu_pd(p, v); }
    static R fma(R a, R b, R c) { return _mm512_fmadd_pd(a, b, c); }
    static R add(R a, R b) { return _mm512_add_pd(a, b); }
    static double sum(R v) { return _mm512_reduce_add_pd(v); }
};
#elif KOPE_VEC_BITS == 256
template <> struct Vec<float> {
    typedef __m256 R;
    static constexpr int L = 8;
    static R zero() { return _mm256_setzero_ps(); }
    static R set1(float x) { return _mm256_set1_ps(x); }
    static R load(const float* p) { return _mm256_loadu_ps(p); }
    static R load(const bf16* p) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
    static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
    static R add(R a, R b) { return _mm256_add_ps(a, b); }
    static float sum(R v) {
        alignas(32) float t[8];
        _mm256_store_ps(t, v);
        return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
    }
};
template <> struct Vec<double> {
    typedef __m256d R;
    static constexpr int L = 4;
    static R zero() { return _mm256_setzero_pd(); }
    static R set1(double x) { return _mm256_set1_pd(x); }
    static R load(const double* p) { return _mm256_loadu_pd(p); }
    static void store(double* p, R v) { _mm256_storeu_pd(p, v); }
    static R fma(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
    static R add(R a, R b) { return _mm256_add_pd(a, b); }
    static double sum(R v) {
        alignas(32) double t[4];
        _mm256_store_pd(t, v);
        return (t[0] + t[1]) + (t[2] + t[3]);
    }
};
#endif
"""
