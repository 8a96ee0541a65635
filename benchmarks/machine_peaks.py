"""Measured peak FLOP/s and memory bandwidth of this machine, for roofline figures in the benchmarks.

* ``peak_flops(dtype)``: every thread runs independent chains of fused multiply-adds on SIMD registers
  (12 accumulators: enough to hide the FMA latency of two FMA pipes, few enough to stay in AVX2's 16
  registers with the two operands) for a fixed count; FLOP/s
  = 2 x lanes x FMAs / seconds, the best of a few runs.
* ``bandwidth()``: a read-mostly triad ``a[i] = b[i] + s * c[i]`` over buffers 8x the last-level cache,
  OpenMP over all threads; bytes/s counts the three streams (two reads, one write), the best of a few runs.
* ``roofline_ms(flops, bytes, peaks)``: the time the faster of the two limits allows.

Measured here rather than taken from datasheets: a VM's clock and memory are what they are. (The harness's
physical-limit check measures its own; this module is the benchmarks' copy until that lands.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from harness.cpu import compile_cpp

_SOURCE = r"""
#include <cstdint>
#include <omp.h>
#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 VF; typedef __m512d VD;
#define LANES_F 16
#define LANES_D 8
static inline VF fma_f(VF a, VF b, VF c) { return _mm512_fmadd_ps(a, b, c); }
static inline VD fma_d(VD a, VD b, VD c) { return _mm512_fmadd_pd(a, b, c); }
static inline VF set_f(float x) { return _mm512_set1_ps(x); }
static inline VD set_d(double x) { return _mm512_set1_pd(x); }
static inline float sum_f(VF v) { return _mm512_reduce_add_ps(v); }
static inline double sum_d(VD v) { return _mm512_reduce_add_pd(v); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 VF; typedef __m256d VD;
#define LANES_F 8
#define LANES_D 4
static inline VF fma_f(VF a, VF b, VF c) { return _mm256_fmadd_ps(a, b, c); }
static inline VD fma_d(VD a, VD b, VD c) { return _mm256_fmadd_pd(a, b, c); }
static inline VF set_f(float x) { return _mm256_set1_ps(x); }
static inline VD set_d(double x) { return _mm256_set1_pd(x); }
static inline float sum_f(VF v) { float t[8]; _mm256_storeu_ps(t, v); float s = 0; for (int i = 0; i < 8; ++i) s += t[i]; return s; }
static inline double sum_d(VD v) { double t[4]; _mm256_storeu_pd(t, v); return t[0] + t[1] + t[2] + t[3]; }
#else
typedef float VF; typedef double VD;
#define LANES_F 1
#define LANES_D 1
static inline VF fma_f(VF a, VF b, VF c) { return a * b + c; }
static inline VD fma_d(VD a, VD b, VD c) { return a * b + c; }
static inline VF set_f(float x) { return x; }
static inline VD set_d(double x) { return x; }
static inline float sum_f(VF v) { return v; }
static inline double sum_d(VD v) { return v; }
#endif

extern "C" int lanes(int dbl) { return dbl ? LANES_D : LANES_F; }

// 12 independent FMA chains per thread, `iters` steps each; out[t] keeps the result alive.
#define FMA_LOOP(V, SET, FMA, SUM, T)                                                    \
    _Pragma("omp parallel") {                                                            \
        V acc[12];                                                                       \
        for (int i = 0; i < 12; ++i) acc[i] = SET(T(1) + T(i) * T(1e-3));                \
        const V m = SET(T(0.999999)), a = SET(T(1e-7));                                  \
        for (int64_t it = 0; it < iters; ++it) {                                         \
            _Pragma("GCC unroll 12")                                                     \
            for (int i = 0; i < 12; ++i) acc[i] = FMA(acc[i], m, a);                     \
        }                                                                                \
        T s = 0;                                                                         \
        for (int i = 0; i < 12; ++i) s += SUM(acc[i]);                                   \
        out[omp_get_thread_num()] = double(s);                                           \
    }

extern "C" void fma_f32(int64_t iters, double* out) { FMA_LOOP(VF, set_f, fma_f, sum_f, float) }
extern "C" void fma_f64(int64_t iters, double* out) { FMA_LOOP(VD, set_d, fma_d, sum_d, double) }

extern "C" void triad(float* a, const float* b, const float* c, int64_t n, float s) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
"""


@dataclass(frozen=True)
class Peaks:
    threads: int
    f32_gflops: float
    f64_gflops: float
    bandwidth_gbs: float

    def gflops(self, dtype: str) -> float:
        return self.f64_gflops if dtype == "float64" else self.f32_gflops

    def line(self) -> str:
        return (
            f"roofline of this machine ({self.threads} threads, measured): float32 {self.f32_gflops:.0f} GFLOP/s, "
            f"float64 {self.f64_gflops:.0f} GFLOP/s, memory {self.bandwidth_gbs:.1f} GB/s (triad)"
        )


def _lib():
    return compile_cpp(_SOURCE)


def peak_flops(dtype: str = "float32", iters: int = 20_000_000, runs: int = 3) -> float:
    """GFLOP/s of all threads together (the best of ``runs``)."""
    import torch

    from harness.cpu import threads

    lib = _lib()
    out = torch.zeros(max(threads(), 256), dtype=torch.float64)
    fn = lib.fma_f64 if dtype == "float64" else lib.fma_f32
    lanes = lib.lanes(1 if dtype == "float64" else 0)
    fn(1000, out)
    best = 0.0
    for _ in range(runs):
        started = time.perf_counter()
        fn(iters, out)
        seconds = time.perf_counter() - started
        best = max(best, 2 * lanes * 12 * iters * threads() / seconds / 1e9)
    return best


def bandwidth(last_level_cache: int | None = None, runs: int = 5) -> float:
    """GB/s of a float32 triad over buffers 8x the last-level cache (at least 64 MiB each)."""
    import torch

    from harness.hardware import cache_sizes

    llc = last_level_cache or max(cache_sizes().values(), default=32 << 20)
    n = max(8 * llc, 64 << 20) // 4
    lib = _lib()
    a, b, c = torch.empty(n), torch.rand(n), torch.rand(n)
    lib.triad(a, b, c, n, 0.5)
    best = 0.0
    for _ in range(runs):
        started = time.perf_counter()
        lib.triad(a, b, c, n, 0.5)
        best = max(best, 3 * 4 * n / (time.perf_counter() - started) / 1e9)
    return best


def measure() -> Peaks:
    from harness.cpu import threads

    return Peaks(threads(), peak_flops("float32"), peak_flops("float64"), bandwidth())


def roofline_ms(flops: float, nbytes: float, peaks: Peaks, dtype: str = "float32") -> float:
    """The least time the measured peaks allow for ``flops`` operations moving ``nbytes`` to/from memory."""
    return max(flops / (peaks.gflops(dtype) * 1e9), nbytes / (peaks.bandwidth_gbs * 1e9)) * 1e3
