"""A one-pass native check of ``harness.compare``'s tolerance rule, for the outputs that pass.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from harness.compare import Precise, Verdict, compare_layouts, compare_outputs, flatten, tolerance

_SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__F16C__)
#include <immintrin.h>
#endif
static inline float bf16(uint16_t v) { uint32_t b = uint32_t(v) << 16; float f; std::memcpy(&f, &b, 4); return f; }
static inline float f16(uint16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;
    if (e == 0) { if (m == 0) b = s; else { e = 127 - 15 + 1; while (!(m & 0x400)) { m <<= 1; --e; } m &= 0x3ff; b = s | (e << 23) | (m << 13); } }
    else if (e == 31) b = s | 0x7f800000u | (m << 13);
    else b = s | ((e + 127 - 15) << 23) | (m << 13);
    float f; std::memcpy(&f, &b, 4); return f;
#endif
}
static inline int verdict(double ss, double worst, double finite, int64_t n, double atol);
// One pass over both tensors: the reference's sum of squares (for its RMS) and the largest excess
// |c - r| - rtol |r| together; the output passes when every value is finite and that excess is at most
// atol * RMS(ref). A NaN or infinity anywhere makes the sums non-finite, which the checks below see.
// `simd`: the reductions vectorised too (float32 and bfloat16 ~5x, float64 ~1.7x faster per pass here: without it
// the max reduction stayed scalar; a NaN that a vector max drops is still seen by `finite`).
template <typename T, typename L>
static int check(const T* c, const T* r, int64_t n, double rtol, double atol, int threads, L load) {
    double ss = 0.0, worst = -INFINITY, finite = 0.0;
    #pragma omp parallel for simd num_threads(threads) reduction(+:ss, finite) reduction(max:worst) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        double x = load(c[i]), y = load(r[i]);
        ss += y * y;
        finite += (x - x) + (y - y);  // 0 for finite values, NaN once any value is not finite
        double e = std::fabs(x - y) - rtol * std::fabs(y);
        worst = e > worst ? e : worst;
    }
    return verdict(ss, worst, finite, n, atol);
}
static inline int verdict(double ss, double worst, double finite, int64_t n, double atol) {
    if (!std::isfinite(ss) || finite != 0.0) return 2;
    double floor_ = atol * std::sqrt(ss / double(n > 0 ? n : 1));
    return worst > floor_ ? 1 : 0;
}
extern "C" int kope_check_f64(const double* c, const double* r, int64_t n, double rtol, double atol, int threads) {
    return check(c, r, n, rtol, atol, threads, [](double v) { return v; });
}
extern "C" int kope_check_f32(const float* c, const float* r, int64_t n, double rtol, double atol, int threads) {
    return check(c, r, n, rtol, atol, threads, [](float v) { return double(v); });
}
extern "C" int kope_check_bf16(const uint16_t* c, const uint16_t* r, int64_t n, double rtol, double atol, int threads) {
    return check(c, r, n, rtol, atol, threads, [](uint16_t v) { return double(bf16(v)); });
}
extern "C" int kope_check_f16(const uint16_t* c, const uint16_t* r, int64_t n, double rtol, double atol, int threads) {
#if defined(__F16C__) && defined(__AVX__)
    // blocks converted 8 values at a time (vcvtph2ps), then the same vectorised pass over the floats: the scalar
    // conversion per value kept the whole loop scalar (~6x slower than float32)
    const int64_t block = 1024, blocks = (n + block - 1) / block;
    double ss = 0.0, worst = -INFINITY, finite = 0.0;
    #pragma omp parallel for num_threads(threads) reduction(+:ss, finite) reduction(max:worst) schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        alignas(32) float cf[block], rf[block];
        const int64_t at = b * block, len = n - at < block ? n - at : block;
        int64_t i = 0;
        for (; i + 8 <= len; i += 8) {
            _mm256_store_ps(cf + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + at + i))));
            _mm256_store_ps(rf + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + at + i))));
        }
        for (; i < len; ++i) { cf[i] = f16(c[at + i]); rf[i] = f16(r[at + i]); }
        #pragma omp simd reduction(+:ss, finite) reduction(max:worst)
        for (int64_t j = 0; j < len; ++j) {
            double x = cf[j], y = rf[j];
            ss += y * y;
            finite += (x - x) + (y - y);
            double e = std::fabs(x - y) - rtol * std::fabs(y);
            worst = e > worst ? e : worst;
        }
    }
    return verdict(ss, worst, finite, n, atol);
#else
    return check(c, r, n, rtol, atol, threads, [](uint16_t v) { return double(f16(v)); });
#endif
}
// Integers and booleans must be equal: the same bytes (a non-canonical boolean byte is "not pass" here and left to
// the full comparison). Blocks of 64 KiB compared in parallel; 1 when any block differs.
extern "C" int kope_same_bytes(const void* cv, const void* rv, int64_t nbytes, int threads) {
    const unsigned char *c = static_cast<const unsigned char*>(cv), *r = static_cast<const unsigned char*>(rv);
    const int64_t block = 1 << 16, blocks = (nbytes + block - 1) / block;
    int differ = 0;
    #pragma omp parallel for num_threads(threads) reduction(|:differ) schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
        int64_t at = b * block, len = nbytes - at < block ? nbytes - at : block;
        differ |= std::memcmp(c + at, r + at, size_t(len)) != 0;
    }
    return differ;
}
"""

_FUNCTIONS = {
    torch.float64: "kope_check_f64",
    torch.float32: "kope_check_f32",
    torch.bfloat16: "kope_check_bf16",
    torch.float16: "kope_check_f16",
}
# compared exactly (``harness.compare`` allows no tolerance for them): byte for byte
_EXACT = {torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool}


@functools.cache
def _library() -> Any:
    from harness import cpu

    try:
        if cpu._REMOTE is None:
            library, _, expanded, _ = cpu._library(_SOURCE, [], None, sandboxed=_sandbox_usable())
            return cpu.CppLibrary(library, "", cpu.extern_c_functions(expanded), True)
        return cpu.compile_cpp(_SOURCE)
    except Exception:  # no compiler here: every comparison takes the full path
        return None


def _sandbox_usable() -> bool:
    from harness.sandbox import sandbox_status

    return sandbox_status().available


def _tensor_passes(cand: Any, ref: Any) -> bool:
    if not (type(cand) is torch.Tensor and type(ref) is torch.Tensor):
        return False
    if cand.dtype != ref.dtype or cand.shape != ref.shape or not (ref.dtype in _FUNCTIONS or ref.dtype in _EXACT):
        return False
    if cand.device.type != "cpu" or ref.device.type != "cpu" or ref.numel() == 0:
        return ref.numel() == 0 and cand.numel() == 0 and cand.dtype == ref.dtype
    lib = _library()
    if lib is None:
        return False
    c, r = cand.contiguous(), ref.contiguous()  # the same tensors (no copy) when they are contiguous, as read
    threads = _threads()
    if ref.dtype in _EXACT:
        return lib.kope_same_bytes(c, r, ref.numel() * ref.element_size(), threads) == 0
    rtol, atol = tolerance(ref.dtype)
    return getattr(lib, _FUNCTIONS[ref.dtype])(c, r, ref.numel(), float(rtol), float(atol), threads) == 0


@functools.cache
def _threads() -> int:
    """Threads of one check: the cores but two. The parent compares a timed unit's outputs while both workers build
    the next unit's inputs (``harness.case_timer``); a static OpenMP loop over all the cores then waits for its
    thread that a worker keeps off its core, spinning (2 cores, relu cases 0 and 7, 3 evaluations each: 9-15 ms per
    compared output with two threads, 2.7-3.5 ms with one; the parent's CPU time 0.81-1.04 s against 0.53-0.73 s)."""
    from harness.hardware import available_cores

    return max(1, available_cores() - 2)


def compare_fast(
    cand: Any,
    ref: Any,
    *,
    device: str | None = None,
    cand_devices: list[str] | None = None,
    cand_strides: list[list[int] | None] | None = None,
    ref_strides: list[list[int] | None] | None = None,
    inputs: list[Any] | None = None,
    index_outputs: list[dict[str, Any]] | None = None,
    precise: Precise | None = None,
) -> Verdict:
    """``compare_outputs``'s verdict, in one native pass when the outputs pass (``precise``: ibid.)."""
    cand_flat, ref_flat = flatten(cand), flatten(ref)
    if (
        not (index_outputs and inputs is not None)
        and len(cand_flat) == len(ref_flat)
        and (not cand_devices or all(d.split(":")[0] == (device or "cpu").split(":")[0] for d in cand_devices))
    ):
        ok = True
        for c, r in zip(cand_flat, ref_flat):
            if isinstance(r, torch.Tensor):
                if not _tensor_passes(c, r):
                    ok = False
                    break
            elif not (type(c) is type(r) and (c == r or (isinstance(r, float) and math.isclose(c, r, rel_tol=1e-6)))):
                ok = False
                break
        if ok and _same_structure(cand, ref):
            return compare_layouts(cand_flat, cand_strides, ref_strides)
    return compare_outputs(
        cand,
        ref,
        device=device,
        cand_devices=cand_devices,
        cand_strides=cand_strides,
        ref_strides=ref_strides,
        inputs=inputs,
        index_outputs=index_outputs,
        precise=precise,
    )


def compare_encoded(
    cand_desc: Any,
    cand_tensors: list[torch.Tensor],
    ref_trial: dict,
    ref_tensors: list[torch.Tensor],
    device: str,
    sampled: list[list[torch.Tensor]] | None = None,
    precise: Precise | None = None,
) -> Verdict:
    """A candidate output as its worker encoded it against a reference trial or timed item (output, layout,
    index outputs); ``sampled``: the values compared are these (candidate's, reference's) elements of the tensors
    (``harness.remote_memory.gather``), the layouts still those of the whole tensors; ``precise``: the reference's
    outputs in float64, the same elements (``harness.compare``'s tolerance rule, asked for on a mismatch only)."""
    from harness.worker_common import decode

    devices: list[str] = []
    cand_strides: list[list[int] | None] | None = []
    ref_strides: list[list[int] | None] | None = []
    cand = decode(cand_desc, cand_tensors, devices, cand_strides)
    ref = decode(ref_trial["output"], ref_tensors, None, ref_strides)
    if sampled is not None:
        layout = compare_layouts(flatten(cand), cand_strides, ref_strides)
        if not layout.ok:
            return layout
        cand, ref = decode(cand_desc, sampled[0]), decode(ref_trial["output"], sampled[1])
        cand_strides = ref_strides = None
    inputs = decode(ref_trial["inputs"], ref_tensors) if "inputs" in ref_trial else None
    return compare_fast(
        cand,
        ref,
        device=device,
        cand_devices=devices,
        cand_strides=cand_strides,
        ref_strides=ref_strides,
        inputs=inputs,
        index_outputs=ref_trial.get("index_outputs"),
        precise=precise,
    )


def _same_structure(a: Any, b: Any) -> bool:
    if isinstance(b, (tuple, list)):
        return isinstance(a, (tuple, list)) and len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    return isinstance(a, torch.Tensor) == isinstance(b, torch.Tensor)
