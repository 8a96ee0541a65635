"""The libtorch time an honest kernel's call cannot avoid on this machine (outputs allocated, inputs made contiguous).

docs/harness-workers.md, "Reference calls below Python" (the per-call dispatch allowance and its numbers).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

CPU_MS = 150.0  # the calibration's length in the reference worker's CPU time (its scrubs included)
MIN_SAMPLES = 20  # fewer calibration samples than this measure nothing: the floor below applies alone
MARGIN = 4.0  # the allowance is this many times the measured cost (load, caches, a temporary or two)
FLOOR_NS = 8_000  # per output tensor a call, at least
TTL_S = 600.0  # a calibration older than this is taken again (the machine's load changes)


@dataclass(frozen=True)
class Calibration:
    ns_per_output: float  # libtorch CPU time per output tensor of a call, as sampled
    samples: int  # libtorch samples the calibration took (its precision)
    calls: int
    taken: float  # time.monotonic() when it was taken


_cache: dict[Any, Calibration] = {}


def calibrate(key: Any, pid: int, period_ns: int, ask: Callable[[Any], Any]) -> Calibration:
    """Calibrate in the reference worker ``pid`` (``ask`` sends it a request and returns its reply), its libtorch
    time sampled from outside with perf events; the result is stored under ``key``."""
    from harness import ipc, native_probe

    sampler = native_probe.Sampler(pid, period_ns, enabled=False)
    try:
        sampler.enable()
        try:
            reply = ipc.expect(ask(ipc.Calibrate(cpu_ms=CPU_MS)), ipc.Calibrated)
        finally:
            sampler.disable()
        took = sampler.profile()
    finally:
        sampler.close()
    return store(key, took.reference_samples, period_ns, reply.calls, reply.outputs)


def cached(key: Any) -> Calibration | None:
    """This process's calibration for ``key`` (target and thread settings), unless missing or stale."""
    found = _cache.get(key)
    if found is None or time.monotonic() - found.taken > TTL_S:
        return None
    return found


def store(key: Any, libtorch_samples: int, period_ns: int, calls: int, outputs: int) -> Calibration:
    """Keeps what one calibration measured: ``libtorch_samples`` of ``period_ns`` over ``calls`` calls of
    ``outputs`` output tensors each."""
    per_output = libtorch_samples * period_ns / max(1, calls) / max(1, outputs)
    found = Calibration(per_output, libtorch_samples, calls, time.monotonic())
    _cache[key] = found
    return found


def forget() -> None:
    """Drops every cached calibration (tests)."""
    _cache.clear()


def allowance_ns(calibration: Calibration | None, outputs: int) -> float:
    """The libtorch CPU time per call allowed to an honest kernel with ``outputs`` output tensors a call."""
    measured = calibration.ns_per_output if calibration is not None and calibration.samples >= MIN_SAMPLES else 0.0
    return max(1, outputs) * max(FLOOR_NS, MARGIN * measured)


def count_tensors(encoded: Any) -> int:
    """Output tensors in one call's output as a worker describes it (``harness.worker_common.encode``)."""
    if isinstance(encoded, dict):
        if "t" in encoded:
            return 1
        return sum(count_tensors(v) for v in encoded.get("seq", []))
    return 0
