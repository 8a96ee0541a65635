"""Comparing a candidate's outputs with the reference's, outside the candidate's process.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-9, 1e-9),
    torch.float32: (1e-4, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}


# docs/harness.md, "The reference's own accuracy": where a float32/float16/bfloat16 output misses the rule above,
# the reference is recomputed in float64 and an element passes when its error against that result is at most
# PRECISE_FACTOR x the low-precision reference's own error there (or its RMS over the output, if larger),
# plus the rule above's allowance. A long reduction whose result cancellation made small (matvec, k = 8388608:
# torch's own float32 result off by ~3e-4 of it, twice the rule's allowance) is judged by the reference's accuracy.
PRECISE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
PRECISE_FACTOR = 2.0
PRECISE_RULE = "float64-reference"
# the flattened float64 reference outputs, as compared (the same elements), computed only when asked for
Precise = Callable[[], list[Any]]


@dataclass
class Verdict:
    ok: bool
    kind: str | None = None  # e.g. "incorrect:mismatch"
    message: str | None = None  # the first problem, for a person
    rule: str | None = None  # on a pass: the rule that accepted it where the default one did not (PRECISE_RULE)


PASS = Verdict(True)
_CHUNK = 1 << 20


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCES.get(dtype, (0.0, 0.0))


def compare_outputs(
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
    """Compare nested outputs (tensor, or tuple/list of tensors and scalars).

    ``cand_strides``/``ref_strides``: each flattened output's strides as its worker saw them (the
    tensors themselves arrive contiguous); ``inputs`` and ``index_outputs``: the reference's inputs
    and the task's resolved index declaration (``harness.index_check``); ``precise``: the reference's
    flattened outputs in float64, asked for only when a low-precision output misses the default rule."""
    cand_flat, ref_flat = flatten(cand), flatten(ref)
    rule: str | None = None
    computed: list[list[Any]] = []

    def precise_output(i: int) -> Any:
        if not computed:
            computed.append(precise() if precise is not None else [])
        return computed[0][i] if i < len(computed[0]) else None

    if _shape_of(cand) != _shape_of(ref):
        return Verdict(
            False, "incorrect:structure", f"output structure differs: expected {_describe(ref)}, got {_describe(cand)}"
        )
    index_positions = {spec["output"] for spec in index_outputs or []} if inputs is not None else set()
    for i, (c, r) in enumerate(zip(cand_flat, ref_flat)):
        label = "output" if len(ref_flat) == 1 else f"output[{i}]"
        if isinstance(r, torch.Tensor):
            dev = cand_devices[i] if cand_devices and i < len(cand_devices) else None
            verdict = compare_tensor(
                c,
                r,
                label=label,
                expected_device=device,
                cand_device=dev,
                values=i not in index_positions,
                precise=None if precise is None else functools.partial(precise_output, i),
            )
            rule = verdict.rule if verdict.ok and verdict.rule else rule
            if verdict.ok and isinstance(c, torch.Tensor):
                verdict = compare_layout(c.shape, _at(cand_strides, i), _at(ref_strides, i), label)
        else:
            verdict = (
                PASS
                if _scalar_equal(c, r)
                else Verdict(False, "incorrect:mismatch", f"{label}: expected {r!r}, got {c!r}")
            )
        if not verdict.ok:
            return verdict
    if index_positions:
        from harness.index_check import check

        found = check(cand_flat, ref_flat, flatten(inputs), index_outputs or [])
        if found:
            return Verdict(False, *found)
    return Verdict(True, rule=rule) if rule else PASS


def compare_layouts(
    cand_flat: list[Any], cand_strides: list[list[int] | None] | None, ref_strides: list[list[int] | None] | None
) -> Verdict:
    """``compare_layout`` for every tensor of a flattened candidate output (the first refusal); for outputs
    whose values are known to pass (``harness.fast_compare``)."""
    for i, c in enumerate(cand_flat):
        if isinstance(c, torch.Tensor):
            label = "output" if len(cand_flat) == 1 else f"output[{i}]"
            verdict = compare_layout(c.shape, _at(cand_strides, i), _at(ref_strides, i), label)
            if not verdict.ok:
                return verdict
    return PASS


def _at(items: list[Any] | None, i: int) -> Any:
    return items[i] if items and i < len(items) else None


def _significant(shape: Any, stride: list[int]) -> list[tuple[int, int]]:
    return [(int(n), int(s)) for n, s in zip(shape, stride) if int(n) != 1]


def contiguous_strides(shape: Any) -> list[int]:
    strides, step = [], 1
    for n in reversed(list(shape)):
        strides.append(step)
        step *= max(1, int(n))
    return strides[::-1]


def compare_layout(shape: Any, cand: list[int] | None, ref: list[int] | None, label: str = "output") -> Verdict:
    """The candidate output's strides equal the reference's, or it is contiguous (size-1 dimensions ignored)."""
    if cand is None or ref is None or len(cand) != len(shape) or len(ref) != len(shape):
        return PASS  # a worker that does not report strides: nothing to compare
    if any(int(n) == 0 for n in shape):
        return PASS
    mine = _significant(shape, cand)
    if mine == _significant(shape, ref) or mine == _significant(shape, contiguous_strides(shape)):
        return PASS
    overlap = any(s == 0 for _, s in mine)
    what = "overlaps itself (a stride of 0: one value stands for many)" if overlap else "is not contiguous"
    return Verdict(
        False,
        "incorrect:stride",
        f"{label}: strides {list(cand)} for shape {list(shape)}: the output {what}; the reference's strides are "
        f"{list(ref)} (return a contiguous tensor or the reference's layout)",
    )


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for item in value for x in flatten(item)]
    return [value]


def _shape_of(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return tuple(_shape_of(v) for v in value)
    return "tensor" if isinstance(value, torch.Tensor) else "scalar"


def _describe(value: Any) -> str:
    shape = _shape_of(value)
    return "a tensor" if shape == "tensor" else f"{shape}"


def _scalar_equal(c: Any, r: Any) -> bool:
    if isinstance(r, float) and isinstance(c, (int, float)):
        return abs(c - r) <= 1e-6 * max(1.0, abs(r))
    return c == r


def compare_tensor(
    cand: Any,
    ref: torch.Tensor,
    *,
    label: str = "output",
    expected_device: str | None = None,
    cand_device: str | None = None,
    values: bool = True,
    precise: Callable[[], Any] | None = None,
) -> Verdict:
    """One tensor against the reference's; ``values=False`` checks only structure, shape, dtype and device;
    ``precise``: the reference's output computed in float64, asked for when a float32/float16/bfloat16 output
    misses the default rule (``precise_verdict``)."""
    if not isinstance(cand, torch.Tensor):
        return Verdict(False, "incorrect:structure", f"{label}: expected a tensor, got {type(cand).__name__}")
    if tuple(cand.shape) != tuple(ref.shape):
        return Verdict(False, "incorrect:shape", f"{label}: expected shape {tuple(ref.shape)}, got {tuple(cand.shape)}")
    if cand.dtype != ref.dtype:
        return Verdict(False, "incorrect:dtype", f"{label}: expected dtype {_name(ref.dtype)}, got {_name(cand.dtype)}")
    if (
        expected_device is not None
        and cand_device is not None
        and cand_device.split(":")[0] != expected_device.split(":")[0]
    ):
        return Verdict(
            False, "incorrect:device", f"{label}: expected a tensor on {expected_device}, got one on {cand_device}"
        )
    if ref.numel() == 0 or not values:
        return PASS
    if not (ref.is_floating_point() or ref.is_complex()):
        bad = cand != ref
        if bool(bad.any()):
            return _mismatch(label, bad, cand, ref, "exact equality")
        return PASS
    low_precision = ref.dtype in PRECISE_DTYPES  # real only: a complex output keeps the default rule
    if ref.is_complex():  # real and imaginary parts, each under its part's tolerance (.to(float) drops the imaginary)
        cand, ref = torch.view_as_real(cand.resolve_conj()), torch.view_as_real(ref.resolve_conj())
        label = f"{label} (as real, imaginary pairs)"
    work = torch.float64 if ref.dtype == torch.float64 else torch.float32
    c, r = cand.to(work), ref.to(work)
    rtol, atol = tolerance(ref.dtype)
    scale = float(torch.linalg.vector_norm(r, dtype=torch.float64)) / math.sqrt(r.numel())
    ref_finite: torch.Tensor | None = None
    if not math.isfinite(scale):  # the reference holds NaN/Inf: the candidate must match them, then compare the rest
        ref_finite = torch.isfinite(r)
        same = (c == r) | (torch.isnan(c) & torch.isnan(r))
        bad_special = ~ref_finite & ~same
        if bool(bad_special.any()):
            idx = _first(bad_special)
            return Verdict(
                False,
                "incorrect:mismatch",
                f"{label}: at {list(idx)} the reference is {r[idx].item()!r}, got {c[idx].item()!r}",
            )
        c, r = torch.where(ref_finite, c, 0), torch.where(ref_finite, r, 0)
        scale = float(torch.linalg.vector_norm(r, dtype=torch.float64)) / math.sqrt(r.numel())
    floor = atol * scale
    flat_c, flat_r = c.reshape(-1), r.reshape(-1)
    for start in range(0, flat_r.numel(), _CHUNK):  # one pass in cache-sized chunks
        cc, rr = flat_c[start : start + _CHUNK], flat_r[start : start + _CHUNK]
        if not bool(torch.isfinite(cc).all()):
            nonfinite = ~torch.isfinite(c)
            idx = _first(nonfinite)
            return Verdict(
                False,
                "incorrect:nonfinite",
                f"{label}: {int(nonfinite.sum())} NaN/Inf value(s) where the reference is finite; first at {list(idx)}: "
                f"got {c[idx].item()!r}, expected {r[idx].item()!r}",
            )
        err = (cc - rr).abs_()
        if bool((err > rr.abs().mul_(rtol).add_(floor)).any()):
            err = (c - r).abs()
            bad = err > r.abs() * rtol + floor
            rule = f"rtol={rtol:g}, atol={atol:g} x RMS(ref)={scale:.3g}"
            if precise is not None and low_precision:
                return precise_verdict(label, c, r, precise(), rtol, floor, rule, err, bad, ref_finite)
            return _mismatch(label, bad, c, r, rule, err=err)
    return PASS


def precise_verdict(
    label: str,
    c: torch.Tensor,
    r: torch.Tensor,
    exact: Any,
    rtol: float,
    floor: float,
    rule: str,
    err: torch.Tensor,
    bad: torch.Tensor,
    ref_finite: torch.Tensor | None = None,
) -> Verdict:
    """A low-precision output that missed the default rule, judged against the reference recomputed in float64
    (``exact``): element i passes when |c - p| <= rtol |r| + floor + PRECISE_FACTOR x max(|r - p|, RMS(r - p)),
    p the float64 result and r the low-precision reference (docs/harness.md, "The reference's own accuracy").
    ``c`` and ``r`` as ``compare_tensor`` compared them (non-finite reference elements, already matched, zeroed
    in both), ``err`` and ``bad`` its errors and the elements outside the default rule."""
    if not isinstance(exact, torch.Tensor) or tuple(exact.shape) != tuple(r.shape) or not bool(torch.isfinite(c).all()):
        return _mismatch(label, bad, c, r, rule, err=err)
    p = exact.to(torch.float64)
    if ref_finite is not None:
        p = torch.where(ref_finite, p, 0)
    if not bool(torch.isfinite(p).all()):  # float64 and float32 disagree on what is finite: judged as before
        return _mismatch(label, bad, c, r, rule, err=err)
    c64, r64 = c.to(torch.float64), r.to(torch.float64)
    own = (r64 - p).abs()
    rms = float(torch.linalg.vector_norm(own)) / math.sqrt(own.numel())
    allowed = r64.abs() * rtol + floor + PRECISE_FACTOR * own.clamp(min=rms)
    off = (c64 - p).abs()
    worse = off > allowed
    if not bool(worse.any()):
        return Verdict(True, rule=PRECISE_RULE)
    idx = _first(worse)
    return Verdict(
        False,
        "incorrect:mismatch",
        f"{label}: {int(bad.sum())}/{bad.numel()} element(s) outside tolerance ({rule}), {int(worse.sum())} of "
        f"them also outside the reference's own accuracy ({PRECISE_FACTOR:g}x its error against the reference "
        f"recomputed in float64); first at {list(idx)}: got {c[idx].item()!r}, expected {r[idx].item()!r} "
        f"(float64: {p[idx].item()!r}); max abs error {float(err.max()):.3g}",
    )


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    flat = int(torch.nonzero(mask.reshape(-1), as_tuple=False)[0, 0])
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), mask.shape)) if mask.dim() else ()


def _mismatch(
    label: str, bad: torch.Tensor, cand: torch.Tensor, ref: torch.Tensor, rule: str, *, err: torch.Tensor | None = None
) -> Verdict:
    idx = _first(bad)
    count, total = int(bad.sum()), bad.numel()
    text = (
        f"{label}: {count}/{total} element(s) outside tolerance ({rule}); first at {list(idx)}: "
        f"got {cand[idx].item()!r}, expected {ref[idx].item()!r}"
    )
    if err is not None:
        text += f"; max abs error {float(err.max()):.3g}"
    return Verdict(False, "incorrect:mismatch", text)


def degenerate_reason(ref: Any) -> str | None:
    """Why a reference output is too easy to match by accident (None when it is fine)."""
    for i, r in enumerate(flatten(ref)):
        if not isinstance(r, torch.Tensor) or not r.is_floating_point() or r.numel() == 0:
            continue
        if not bool(torch.isfinite(r).all()):
            return f"output[{i}] has NaN/Inf values"
        lo, hi = torch.aminmax(r)
        if r.numel() > 1 and bool(lo == hi):
            return f"output[{i}] is constant ({float(hi)!r})"
        if float(lo) == 0.0 and float(hi) == 0.0:
            return f"output[{i}] is all zeros"
    return None
