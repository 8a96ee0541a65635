"""A one-pass native check of ``harness.compare``'s tolerance rule, for the outputs that pass.

``compare_tensor`` makes several passes over both tensors (conversions, the RMS, finiteness,
the error, the bound), which made comparing the dominant cost of an evaluation (profile:
~2.3 s per seed for relu's 9 cases) and would make checking *every* timed output
unaffordable. This module decides the common case in one OpenMP pass over the data: for
float64/float32/float16/bfloat16 tensors of equal shape and dtype on the CPU whose reference
is finite, an output passes when every element is finite and

    |cand - ref| <= atol * RMS(ref) + rtol * |ref|

with ``atol``/``rtol`` from ``harness.compare.TOLERANCES`` (the same rule). Whenever it says
anything but "pass" (a mismatch, a non-finite value, another dtype, a structure it does not
handle) the caller runs ``compare_outputs``, which finds the first bad element and words the
message, so the verdicts are ``compare_outputs``'s own.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from harness.compare import PASS, Verdict, compare_outputs, flatten, tolerance

_SOURCE = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
static inline float bf16(uint16_t v) { uint32_t b = uint32_t(v) << 16; float f; std::memcpy(&f, &b, 4); return f; }
static inline float f16(uint16_t h) {
    uint32_t s = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, b;
    if (e == 0) { if (m == 0) b = s; else { e = 127 - 15 + 1; while (!(m & 0x400)) { m <<= 1; --e; } m &= 0x3ff; b = s | (e << 23) | (m << 13); } }
    else if (e == 31) b = s | 0x7f800000u | (m << 13);
    else b = s | ((e + 127 - 15) << 23) | (m << 13);
    float f; std::memcpy(&f, &b, 4); return f;
}
template <typename T, typename L>
static int check(const T* c, const T* r, int64_t n, double rtol, double atol, L load) {
    double ss = 0.0; int bad_ref = 0;
    #pragma omp parallel for reduction(+:ss) reduction(|:bad_ref) schedule(static)
    for (int64_t i = 0; i < n; ++i) { double x = load(r[i]); if (!std::isfinite(x)) bad_ref |= 1; else ss += x * x; }
    if (bad_ref) return 2;
    double floor_ = atol * std::sqrt(ss / double(n > 0 ? n : 1));
    int bad = 0;
    #pragma omp parallel for reduction(|:bad) schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        double x = load(c[i]), y = load(r[i]);
        if (!std::isfinite(x) || std::fabs(x - y) > rtol * std::fabs(y) + floor_) bad |= 1;
    }
    return bad;
}
extern "C" int kope_check_f64(const double* c, const double* r, int64_t n, double rtol, double atol) {
    return check(c, r, n, rtol, atol, [](double v) { return v; });
}
extern "C" int kope_check_f32(const float* c, const float* r, int64_t n, double rtol, double atol) {
    return check(c, r, n, rtol, atol, [](float v) { return double(v); });
}
extern "C" int kope_check_bf16(const uint16_t* c, const uint16_t* r, int64_t n, double rtol, double atol) {
    return check(c, r, n, rtol, atol, [](uint16_t v) { return double(bf16(v)); });
}
extern "C" int kope_check_f16(const uint16_t* c, const uint16_t* r, int64_t n, double rtol, double atol) {
    return check(c, r, n, rtol, atol, [](uint16_t v) { return double(f16(v)); });
}
"""

_FUNCTIONS = {
    torch.float64: "kope_check_f64",
    torch.float32: "kope_check_f32",
    torch.bfloat16: "kope_check_bf16",
    torch.float16: "kope_check_f16",
}


@functools.cache
def _library() -> Any:
    from harness import cpu

    try:
        if cpu._REMOTE is None:
            library, _, expanded, _ = cpu._library(_SOURCE, [], None, sandboxed=_sandbox_usable())
            return cpu.CppLibrary(library, "", cpu.extern_c_functions(expanded), True)
        return cpu.compile_cpp(_SOURCE)
    except Exception:  # noqa: BLE001 - no compiler here: every comparison takes the full path
        return None


def _sandbox_usable() -> bool:
    from harness.sandbox import sandbox_status

    return sandbox_status().available


def _tensor_passes(cand: Any, ref: Any) -> bool:
    if not (type(cand) is torch.Tensor and type(ref) is torch.Tensor):
        return False
    if cand.dtype != ref.dtype or cand.shape != ref.shape or ref.dtype not in _FUNCTIONS:
        return False
    if cand.device.type != "cpu" or ref.device.type != "cpu" or ref.numel() == 0:
        return ref.numel() == 0 and cand.numel() == 0 and cand.dtype == ref.dtype
    lib = _library()
    if lib is None:
        return False
    c, r = cand.contiguous(), ref.contiguous()
    rtol, atol = tolerance(ref.dtype)
    return getattr(lib, _FUNCTIONS[ref.dtype])(c, r, ref.numel(), float(rtol), float(atol)) == 0


def compare_fast(cand: Any, ref: Any, *, device: str | None = None, cand_devices: list[str] | None = None) -> Verdict:
    """``compare_outputs``'s verdict, in one native pass when the outputs pass."""
    cand_flat, ref_flat = flatten(cand), flatten(ref)
    if len(cand_flat) == len(ref_flat) and (
        not cand_devices or all(d.split(":")[0] == (device or "cpu").split(":")[0] for d in cand_devices)
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
            return PASS
    return compare_outputs(cand, ref, device=device, cand_devices=cand_devices)


def _same_structure(a: Any, b: Any) -> bool:
    if isinstance(b, (tuple, list)):
        return isinstance(a, (tuple, list)) and len(a) == len(b) and all(_same_structure(x, y) for x, y in zip(a, b))
    return isinstance(a, torch.Tensor) == isinstance(b, torch.Tensor)
