"""C++ building blocks shared by the cpu templates of the elementwise, reduction and normalization families.

More on it: docs/templates.md, "Template notes", templates/cpu/_cpp_blocks.
"""

from __future__ import annotations

HEADERS = r"""#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
"""

DTYPES = r"""
// Storage type S (what the tensor holds) and compute type C (what the kernel computes in).
struct F32 { using S = float;  using C = float;  static C load(S v) { return v; } static S store(C v) { return v; } };
struct F64 { using S = double; using C = double; static C load(S v) { return v; } static S store(C v) { return v; } };
struct BF16 {  // bfloat16: the upper half of a float32
    using S = uint16_t; using C = float;
    static C load(S v) { uint32_t u = uint32_t(v) << 16; float f; std::memcpy(&f, &u, 4); return f; }
    static S store(C f) {
        uint32_t u; std::memcpy(&u, &f, 4);
        const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;   // round to nearest even
        return S((u & 0x7fffffffu) > 0x7f800000u ? ((u >> 16) | 0x40u) : rounded);  // NaN stays NaN
    }
};
struct F16 {  // IEEE half precision, converted with integer bit operations (GCC does not vectorise _Float16 casts)
    using S = uint16_t; using C = float;
    static C load(S v) {
        const uint32_t em = uint32_t(v & 0x7fffu) << 13, sign = uint32_t(v & 0x8000u) << 16;
        float f; std::memcpy(&f, &em, 4);
        f *= 0x1p112f;                                   // re-bias the exponent (normals and subnormals)
        uint32_t u; std::memcpy(&u, &f, 4);
        u = (em >= (0x7c00u << 13) ? (em | 0x7f800000u) : u) | sign;  // Inf/NaN keep all-ones exponents
        std::memcpy(&f, &u, 4);
        return f;
    }
    static S store(C f) {  // round to nearest even
        uint32_t u; std::memcpy(&u, &f, 4);
        const uint32_t sign = (u >> 16) & 0x8000u;
        u &= 0x7fffffffu;
        float small; std::memcpy(&small, &u, 4);
        small += 0.5f;                                   // subnormal halves: the FPU rounds into the low bits
        uint32_t sub; std::memcpy(&sub, &small, 4);
        sub -= 0x3f000000u;
        const uint32_t normal = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;   // re-bias by -112 << 23, round
        const uint32_t special = u > 0x7f800000u ? 0x7e00u : 0x7c00u;         // NaN or Inf (also overflow)
        const uint32_t h = u >= 0x47800000u ? special : (u < 0x38800000u ? sub : normal);
        return S(h | sign);
    }
};
"""

# entry-point suffix -> (trait, C type of the tensor pointer, torch dtype name)
DTYPE_ENTRIES = {
    "f32": ("F32", "float", "float32"),
    "f64": ("F64", "double", "float64"),
    "bf16": ("BF16", "uint16_t", "bfloat16"),
    "f16": ("F16", "uint16_t", "float16"),
}

_LIBM = r"""
// math=libm: the C library's functions (about 1 ulp; one call per element, so loops using them stay scalar).
struct Math {
    static float exp(float x) { return std::exp(x); }
    static double exp(double x) { return std::exp(x); }
    static float expm1(float x) { return std::expm1(x); }
    static double expm1(double x) { return std::expm1(x); }
    static float erf(float x) { return std::erf(x); }
    static double erf(double x) { return std::erf(x); }
    static float tanh(float x) { return std::tanh(x); }
    static double tanh(double x) { return std::tanh(x); }
    static float log(float x) { return std::log(x); }
    static double log(double x) { return std::log(x); }
};
"""

_POLY = r"""
// math=poly: branch-free polynomial approximations that vectorise inside `omp simd` loops.
// exp: x = n*ln2 + r, |r| <= ln2/2, exp(r) by a Cephes polynomial (float, ~1e-7 relative) or
// Pade form (double, ~2e-16 relative), times 2^n built in the exponent bits.
static inline float poly_exp(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    const float shifter = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
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
static inline double poly_exp(double x) {
    x = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
    const double shifter = 6755399441055744.0;  // 1.5 * 2^52
    const double n = std::fma(x, 1.4426950408889634, shifter) - shifter;
    double r = std::fma(n, -6.93145751953125e-1, x);
    r = std::fma(n, -1.42860682030941723212e-6, r);
    const double rr = r * r;
    const double px = r * std::fma(std::fma(1.26177193074810590878e-4, rr, 3.02994407707441961300e-2), rr,
                                   9.99999999999999999910e-1);
    const double qx = std::fma(std::fma(std::fma(3.00198505138664455042e-6, rr, 2.52448340349684104192e-3), rr,
                                        2.27265548208155028766e-1), rr, 2.0);
    const double e = 1.0 + 2.0 * px / (qx - px);
    const int64_t bits = (static_cast<int64_t>(n) + 1023) << 52;
    double scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return e * scale;
}
struct Math {
    static float exp(float x) { return poly_exp(x); }
    static double exp(double x) { return poly_exp(x); }
    // expm1: a Taylor polynomial near 0 (where exp(x) - 1 would cancel), exp(x) - 1 elsewhere.
    static float expm1(float x) {
        float t = 1.0f / 40320.0f;
        t = std::fma(t, x, 1.0f / 5040.0f); t = std::fma(t, x, 1.0f / 720.0f); t = std::fma(t, x, 1.0f / 120.0f);
        t = std::fma(t, x, 1.0f / 24.0f); t = std::fma(t, x, 1.0f / 6.0f); t = std::fma(t, x, 0.5f); t = std::fma(t, x, 1.0f);
        const float near0 = t * x;
        return std::fabs(x) < 0.5f ? near0 : poly_exp(x) - 1.0f;
    }
    static double expm1(double x) { return poly_exp(x) - 1.0; }  // absolute error ~2e-16
    // erf (float): Abramowitz-Stegun 7.1.26, |error| < 1.5e-7; double keeps libm (no vectorisable form here).
    static float erf(float x) {
        const float ax = std::fabs(x);
        const float t = 1.0f / std::fma(0.3275911f, ax, 1.0f);
        const float p = std::fma(std::fma(std::fma(std::fma(1.061405429f, t, -1.453152027f), t, 1.421413741f), t,
                                          -0.284496736f), t, 0.254829592f) * t;
        return std::copysign(1.0f - p * poly_exp(-ax * ax), x);
    }
    static double erf(double x) { return std::erf(x); }
    // tanh: Cephes' odd polynomial for |x| < 0.625, else 1 - 2 / (exp(2|x|) + 1).
    static float tanh(float x) {
        const float ax = std::fabs(x), z = x * x;
        float p = -5.70498872745e-3f;
        p = std::fma(p, z, 2.06390887954e-2f); p = std::fma(p, z, -5.37397155531e-2f);
        p = std::fma(p, z, 1.33314422036e-1f); p = std::fma(p, z, -3.33332819422e-1f);
        const float small = std::fma(p * z, x, x);
        const float large = std::copysign(1.0f - 2.0f / (poly_exp(2.0f * ax) + 1.0f), x);
        return ax < 0.625f ? small : large;
    }
    static double tanh(double x) {  // absolute error ~3e-16
        return std::copysign(1.0 - 2.0 / (poly_exp(2.0 * std::fabs(x)) + 1.0), x);
    }
    static float log(float x) { return std::log(x); }    // used once per row, not per element
    static double log(double x) { return std::log(x); }
};
"""


def math_struct(kind: str) -> str:
    if kind not in ("libm", "poly"):
        raise ValueError(f"math must be libm or poly, got {kind!r}")
    return _LIBM if kind == "libm" else _POLY


STREAM_COPY = r"""
// Copy `bytes` to dst with non-temporal (streaming) stores: the written lines bypass the caches and
// skip the read-for-ownership a normal store costs. Needs a store fence before others read dst.
static inline void stream_copy(void* dst, const void* src, int64_t bytes) {
    char* d = static_cast<char*>(dst);
    const char* s = static_cast<const char*>(src);
#if defined(__AVX512F__) || defined(__AVX__)
#if defined(__AVX512F__)
    constexpr int64_t V = 64;
#else
    constexpr int64_t V = 32;
#endif
    int64_t head = (V - static_cast<int64_t>(reinterpret_cast<uintptr_t>(d) & (V - 1))) & (V - 1);
    head = head < bytes ? head : bytes;
    std::memcpy(d, s, head);
    d += head; s += head; bytes -= head;
    for (; bytes >= V; bytes -= V, d += V, s += V) {
#if defined(__AVX512F__)
        _mm512_stream_si512(reinterpret_cast<__m512i*>(d), _mm512_loadu_si512(s));
#else
        _mm256_stream_si256(reinterpret_cast<__m256i*>(d), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
#endif
    }
#endif
    std::memcpy(d, s, bytes);
}
static inline void store_fence() {
#if defined(__AVX512F__) || defined(__AVX__)
    _mm_sfence();
#endif
}
"""


def vector_pragma(width: int) -> str:
    """The source line asking for a preferred SIMD width. 512 applies only where the compiler targets AVX-512
    (``-march=native`` on a CPU that has it); elsewhere the guard drops it, so the code falls back cleanly to
    the widest vectors the CPU has (and compiles on non-x86 compilers, which do not know the option)."""
    if width not in (256, 512):
        raise ValueError(f"vector_width must be 256 or 512, got {width!r}")
    if width == 256:
        return "// vector_width=256: the compiler's default preference on this target\n"
    return (
        "// vector_width=512: prefer 512-bit (zmm) vectors where the CPU has AVX-512\n"
        '#if defined(__x86_64__) && defined(__AVX512F__)\n#pragma GCC target("prefer-vector-width=512")\n#endif\n'
    )


def describe(template: str, operator: str, settings: dict, lines: list[str]) -> str:
    """The candidate's docstring: what it is, the settings, and what each setting does here."""
    shown = ", ".join(f"{k}={v}" for k, v in settings.items())
    body = "\n".join(f"* {line}" for line in lines)
    return (
        f'"""{operator} on the CPU, rendered by the `{template}` kernel template.\n\nSettings: {shown}\n\n{body}\n"""'
    )


def candidate(doc: str, source: str, vector_width: int, tables: str, model: str) -> str:
    """A complete candidate file: docstring, compile_cpp of the source (with the vector-width preference
    after its includes), kernel tables, ModelNew."""
    if not source.startswith(HEADERS):
        raise ValueError("a template's C++ source must start with HEADERS")
    source = HEADERS + vector_pragma(vector_width) + source[len(HEADERS) :]
    return (
        f"{doc}\n\nimport torch\nimport torch.nn as nn\n\nfrom harness.cpu import compile_cpp\n\n"
        f'_lib = compile_cpp(r"""\n{source.strip()}\n""")\n\n{tables.strip()}\n\n\n{model.strip()}\n'
    )


def kernel_table(name: str, entry: str, suffixes: list[str]) -> str:
    """``name = {torch.float32: _lib.<entry>_f32, ...}`` for the given dtype suffixes."""
    items = ", ".join(f"torch.{DTYPE_ENTRIES[s][2]}: _lib.{entry}_{s}" for s in suffixes)
    return f"{name} = {{{items}}}"


def omp_schedule(schedule: str) -> str:
    if schedule not in ("static", "dynamic", "guided"):
        raise ValueError(f"schedule must be static, dynamic or guided, got {schedule!r}")
    return f"schedule({schedule})"
