"""The libtorch time an honest kernel's call cannot avoid on this machine: its outputs allocated, its inputs made
contiguous (``torch.empty_like``, ``.contiguous()``: a few us of dispatch a call, more on a loaded machine).

The native probe's absolute budget (``harness.case_timer``) lets a candidate spend half as much time in libtorch as
the reference's own calls did, plus this allowance per call. Without it the budget could not apply to a small
reference (a 4097-element relu's op costs ~3 us, no more than that dispatch: honest kernels were flagged there),
and a cheat that calls the reference op and dilutes its share by spinning in its own code got through on every
reference under 50 us a call. Measured in the trusted reference worker (``ipc.Calibrate``: the last unit's inputs
made contiguous and its outputs allocated again, nothing else), sampled from outside by the same perf events and
period as the timed units, once per process and target (again after ``TTL_S``), per output tensor of a call.
docs/harness-workers.md, "Reference calls below Python".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

# The calibration's length in the reference worker's CPU time (its scrubs included): ~50 libtorch samples at the
# timed units' period, ~0.45 us a call here. The same period as the timed units (harness.case_timer.PROBE_PERIOD_NS):
# each sample's interrupt disturbs the caches too, so a shorter one measures something else (at 10 us a sample the
# same calls spent 10.8 us each in libtorch, on this VM)
CPU_MS = 150.0
MIN_SAMPLES = 20  # fewer calibration samples than this measure nothing: the floor below applies alone
# The allowance is this many times the measured cost: load from other processes stretches an op's CPU time (caches,
# a shared core), and the calibration is cached while the load changes; an honest kernel may also allocate a
# temporary or two beside its outputs
MARGIN = 4.0
# per output tensor a call, at least: honest kernels spent 0.4-2.8 us a call in libtorch on tiny_relu and
# tiny_softmax here (on a loaded machine); a cheat calling tiny_softmax's 64x1000 op (45-60 us) exceeds half of
# the reference's own plus this by 1.5x
FLOOR_NS = 8_000
TTL_S = 600.0  # a calibration older than this is taken again (the machine's load changes)


@dataclass(frozen=True)
class Calibration:
    ns_per_output: float  # libtorch CPU time per output tensor of a call, as sampled
    samples: int  # libtorch samples the calibration took (its precision)
    calls: int
    taken: float  # time.monotonic() when it was taken


_cache: dict[Any, Calibration] = {}


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
