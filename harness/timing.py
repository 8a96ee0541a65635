"""Timing: the statistics, the clocks and the machine lock of the harness's timed phases.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from harness.budget import Budget as Budget  # where it lived first; kope reads it from there without torch
from harness.device_lock import reader_writer_lock

_clock = time.perf_counter_ns  # bound before any candidate code runs

_FLUSH_SOURCE = r"""
#include <cstdint>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
extern "C" void kope_flush_lines(const void* p, int64_t nbytes) {
    const char* c = static_cast<const char*>(p);
#if defined(__x86_64__) || defined(__i386__)
    for (int64_t i = 0; i < nbytes; i += 64) {
#if defined(__CLFLUSHOPT__)
        _mm_clflushopt(const_cast<char*>(c + i));
#else
        _mm_clflush(c + i);
#endif
    }
    _mm_mfence();
#elif defined(__aarch64__)
    for (int64_t i = 0; i < nbytes; i += 64) asm volatile("dc civac, %0" :: "r"(c + i) : "memory");
    asm volatile("dsb ish" ::: "memory");
#endif
}
"""


def timing_threads(requested: int | None, cores: int) -> int:
    """The thread count of timed calls: ``requested`` (default: every usable core) but at most ``cores - 1`` where
    there is more than one, so one core is left to the harness's parent, the other worker and the OS and a parallel
    region never waits for a thread another process took (on 2 cores the per-unit times of 2-thread units were
    bimodal, 1.8-2x apart, and the speedup's CV over evaluations 9-12 %; docs/harness-workers.md, "Threads").
    As deployed (``EvalOptions.deployed``) the user's own settings apply instead."""
    usable = max(1, cores - 1)
    return max(1, min(requested or usable, usable))


def median_ci(samples: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """Distribution-free ~95 % confidence interval of the median (order statistics; the range below 6 samples)."""
    xs = sorted(samples)
    n = len(xs)
    if n < 6:
        return (xs[0], xs[-1]) if xs else (0.0, 0.0)
    half = z * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2 + half))
    return xs[lo], xs[hi]


# The candidate's CPU while both workers prepare a measured unit's inputs (the same harness code on the same seeds):
# in the lower median window at most this multiple of the reference worker's plus the slack (docs/harness-workers.md,
# "Timing from outside, adaptively")
PREPARE_SHARE = 3.0
PREPARE_SLACK_NS = 500_000


FETCH_SHARE = 2.0  # the fetch windows' bound (fetch_overrun): at most this times the reference worker's CPU ...
FETCH_SLACK_NS = 500_000  # ... plus this, in the lower median unit


def window_overrun(windows: Sequence[tuple[int, int]], share: float, slack_ns: float) -> str | None:
    """What the candidate used over the reference worker's in paired untimed windows ((reference, candidate) CPU ns a
    unit), when the lower median window is over ``share`` x + ``slack_ns``; None when within. The median, because a
    precomputed result moves the median unit only when most units have one (an honest worker's odd window with a
    garbage collection or a page-fault burst does not count, nor the larger of two)."""
    if not windows:
        return None
    lower = (len(windows) - 1) // 2
    if sorted(cand - share * ref - slack_ns for ref, cand in windows)[lower] <= 0:
        return None
    ref, cand = (sorted(x)[lower] / 1e6 for x in zip(*windows))
    each = ", ".join(f"({r / 1e6:.2f}, {c / 1e6:.2f})" for r, c in windows)
    return (
        f"the candidate's process used {cand:.2f} ms of CPU against the reference worker's {ref:.2f} ms in the median "
        f"of {len(windows)} units (at most {share:g}x + {slack_ns / 1e6:g} ms; each unit's (reference, candidate) ms: "
        f"{each})"
    )


def prepare_overrun(windows: Sequence[tuple[int, int]]) -> str | None:
    """``window_overrun`` on the prepare windows, at PREPARE_SHARE: both workers copy the same inputs at once and on a
    loaded machine their memory stalls differ (an honest candidate's window reached 2.55x the reference's, 36.6 vs
    14.3 ms)."""
    return window_overrun(windows, PREPARE_SHARE, PREPARE_SLACK_NS)


def fetch_overrun(windows: Sequence[tuple[int, int]]) -> str | None:
    """``window_overrun`` on the fetch windows (from the ``fetch`` request to both replies), at FETCH_SHARE. The
    reference worker runs the candidate worker's checks of that window on its own outputs
    (``harness.worker_reference``), so both cost alike (0.9-1.0x measured, idle); a smaller share than prepare's
    because the window holds no large copies (whose memory stalls differ)."""
    return window_overrun(windows, FETCH_SHARE, FETCH_SLACK_NS)


# The candidate's CPU while it waits for its next request, in a unit's stretches outside its prepare, go and fetch
# windows (wait_overrun): over all units at most this multiple of the reference worker's plus the slack a unit and
# timing thread (each stretch may hold the tail of a reply: the worker's code between its reply's write and its next
# blocking read, 0-83 us measured in a stretch, up to 218 us in a unit, beside 2 busy loops) ...
WAIT_SHARE = 2.0
WAIT_SLACK_NS = 200_000
# ... and no stretch over WAIT_SHARE x the reference worker's plus this a timing thread (a lump of work in one wait,
# which a tail never is: 0.40-0.86 ms for the wait-bound fixture's burst, at most 83 us honest)
WAIT_TAIL_NS = 250_000
WAITS = (
    "between the prepare reply and its go request",
    "between its go reply and the fetch request",
    "between the fetch reply and the next prepare request",
)


def wait_overrun(units: Sequence[Sequence[Sequence[int]]], threads: int = 1) -> str | None:
    """What the candidate used over the reference worker's while each waited for its next request: per unit, the
    (reference, candidate) CPU ns in each stretch of ``WAITS`` (the other worker's timed unit and the parent's
    bookkeeping). Over WAIT_SHARE x + WAIT_SLACK_NS a unit and thread over all units together, or any stretch over
    WAIT_SHARE x + WAIT_TAIL_NS a thread (a lump), is an overrun; else None. Sums and maxima, not a
    median: blocked on its pipe an honest worker runs nothing but a reply's tail, and work after the candidate's unit
    may fall in a wait in some units only (in the fetch window in the others), which would move no median."""
    if not units:
        return None
    ref, cand = ([sum(unit[i][who] for unit in units) for i in range(len(WAITS))] for who in (0, 1))
    slack, tail = WAIT_SLACK_NS * max(1, threads), WAIT_TAIL_NS * max(1, threads)
    lumps = [
        (c - WAIT_SHARE * r - tail, u, i)
        for u, unit in enumerate(units)
        for i, (r, c) in enumerate(unit)
        if c - WAIT_SHARE * r > tail
    ]
    if sum(cand) <= WAIT_SHARE * sum(ref) + slack * len(units) and not lumps:
        return None
    if lumps:
        _, u, i = max(lumps, key=lambda lump: (lump[0], -lump[1]))  # the largest, the first of equals
        return (
            f"the candidate's process used {units[u][i][1] / 1e6:.2f} ms of CPU {WAITS[i]} in unit {u + 1} of "
            f"{len(units)} (the reference worker's {units[u][i][0] / 1e6:.2f} ms; {len(lumps)} such lumps, where a "
            f"wait holds at most a reply's tail: {WAIT_SHARE:g}x + {tail / 1e6:g} ms a stretch), "
            f"{sum(cand) / 1e6:.2f} ms against {sum(ref) / 1e6:.2f} ms over all units"
        )
    i = max(range(len(WAITS)), key=lambda i: cand[i] - ref[i])
    return (
        f"the candidate's process used {sum(cand) / 1e6:.2f} ms of CPU against the reference worker's "
        f"{sum(ref) / 1e6:.2f} ms over {len(units)} units (at most {WAIT_SHARE:g}x + {slack / 1e6:g} ms a unit), "
        f"{cand[i] / 1e6:.2f} ms of it {WAITS[i]} (the reference worker's {ref[i] / 1e6:.2f} ms)"
    )


def relative_halfwidth(samples: Sequence[float]) -> float:
    """Half the width of ``median_ci`` divided by the median (inf when the median is 0)."""
    lo, hi = median_ci(samples)
    xs = sorted(samples)
    median = xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
    return (hi - lo) / (2 * median) if median > 0 else math.inf


UNIT_CAP = 4096  # calls per timed unit at most
LONGEST_UNIT_NS = 0.5e9  # the warm-up grows no worker's unit past this (the other one's may stay short)


def next_unit_size(n: int, shortest_ns: float, longest_ns: float, target_ns: float) -> int | None:
    """The warm-up's next unit size (calls per unit) after units of ``n`` calls took ``shortest_ns`` and
    ``longest_ns`` in the faster and the slower worker, or None once ``n`` is settled: the faster worker's unit
    lasts ``target_ns``, or a larger ``n`` would take the slower one's past ``LONGEST_UNIT_NS`` or ``UNIT_CAP``
    (a candidate thousands of times slower than the reference once had its units doubled past the request's
    timeout under load)."""
    ceiling = min(UNIT_CAP, max(n, int(n * LONGEST_UNIT_NS / max(longest_ns, 1.0))))
    if shortest_ns >= target_ns or n >= ceiling:
        return None
    return min(ceiling, max(2 * n, math.ceil(n * target_ns / max(shortest_ns, 1.0))))


def enough_repetitions(
    budget: Budget,
    reps: int,
    spent_ms: Mapping[str, float],
    samples: Mapping[str, Sequence[float]],
    wall_s: float = 0.0,
) -> bool:
    """Whether interleaved timing may stop after ``reps`` repetitions (the hard deadline aside):
    never before ``min_reps``; then at ``max_reps``, once ``wall_s`` (since the case's timing began) reaches
    ``case_wall_s``, once every median's interval is within ``ci_target``, once each implementation has
    ``rep_ms`` of measured time, or once both together have ``lopsided`` x ``rep_ms`` (one far slower than
    the other)."""
    if reps < budget.min_reps:
        return False
    if reps >= budget.max_reps:
        return True
    if budget.case_wall_s > 0 and wall_s >= budget.case_wall_s:
        return True
    if budget.ci_target > 0 and max(relative_halfwidth(s) for s in samples.values()) <= budget.ci_target:
        return True
    return min(spent_ms.values()) >= budget.rep_ms or sum(spent_ms.values()) >= budget.lopsided * budget.rep_ms


def _lock_folder() -> Path:
    from harness.commands import cache_root

    folder = cache_root() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def machine_lock(exclusive: bool) -> Iterator[None]:
    """A machine-wide reader/writer lock (flock): timed phases are writers, warm-worker starts readers.

    A writer first takes the turnstile, so a stream of readers cannot starve it."""
    folder = _lock_folder()
    with reader_writer_lock(folder / "turnstile.lock", folder / "timing.lock", exclusive):
        yield


class CpuTimer:
    """Wall time of one call; before it, the cache lines of the inputs and model state are
    flushed (``clflush``/``dc civac``) and a scrub buffer (twice the private caches) is rewritten."""

    name = "cpu"

    def __init__(self, scrub_bytes: int) -> None:
        self.scrub = torch.empty(max(scrub_bytes, 1 << 20) // 4, dtype=torch.float32)
        self._flush_lines = None
        self.method = "scrub"
        try:
            from harness.cpu import compile_cpp

            self._flush_lines = compile_cpp(_FLUSH_SOURCE).kope_flush_lines
            self.method = "clflush+scrub"
        except Exception:  # no compiler or an exotic arch: the scrub buffer still evicts the private caches
            self._flush_lines = None

    def flush(self, tensors: list[torch.Tensor]) -> None:
        self.scrub.add_(1.0)
        if self._flush_lines is None:
            return
        for t in tensors:
            if t.device.type == "cpu" and t.untyped_storage().nbytes():
                self._flush_lines(t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())

    def time(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        start = _clock()
        out = fn()
        return (_clock() - start) / 1e6, out


class CudaTimer:
    """CUDA events around the call; the L2 cache is flushed by rewriting a buffer larger than it.

    The end event is recorded after a device-wide synchronisation: work the call queued on other
    streams (which an event on the current stream would not wait for) is inside the timed region."""

    name = "cuda"
    method = "l2-scrub"

    def __init__(self, device: torch.device) -> None:
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 64 << 20)
        self.scrub = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.float32, device=device)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)

    def flush(self, tensors: list[torch.Tensor]) -> None:
        self.scrub.zero_()

    def time(self, fn: Callable[[], Any]) -> tuple[float, Any]:
        self.start.record()
        out = fn()
        torch.cuda.synchronize()  # every stream, not just the current one
        self.end.record()
        torch.cuda.synchronize()
        return self.start.elapsed_time(self.end), out


def untimed_overrun(
    prepared: Sequence[tuple[int, int]],
    fetches: Sequence[tuple[int, int]],
    waits: Sequence[Sequence[Sequence[int]]] = (),
    threads: int = 1,
) -> str | None:
    """The candidate's work off the clock, judged on both untimed windows (``prepare_overrun``, ``fetch_overrun``) and
    on the stretches between them (``wait_overrun``): every untimed stretch of a measured unit."""
    for overrun, where in (
        (prepare_overrun(prepared), "prepared a timed unit's inputs (the same harness code on the same seeds)"),
        (fetch_overrun(fetches), "described a timed unit's outputs (fetch: the same checks on both)"),
        (wait_overrun(waits, threads), "waited for their next requests (blocked on their pipes, idle)"),
    ):
        if overrun is not None:
            return (
                f"while both workers {where} {overrun}: work done off the clock (process CPU clocks, read by the "
                "harness)"
            )
    return None


class UntimedCpu:
    """Both workers' CPU ((reference, candidate) ns, their process CPU clocks read by the parent) in every untimed
    stretch of the measured units: the prepare and fetch windows, and the waits between them and each one's own timed
    unit (``WAITS``); ``overrun`` judges them (``untimed_overrun``)."""

    def __init__(self) -> None:
        self.prepared: list[tuple[int, int]] = []
        self.fetches: list[tuple[int, int]] = []
        self.waits: list[list[list[int]]] = []  # a unit's (reference, candidate) CPU in each of WAITS
        self.waiting: list[list[int]] | None = None  # the current unit's, from its prepare window's close
        self.last = [0, 0]  # each worker's CPU at its last reading
        self.opened: tuple[int, int] | None = None

    def wait(self, stretch: int, who: int, now: int) -> None:
        """Worker ``who`` (0: reference, 1: candidate) read ``now``: what it used since its last reading was waiting."""
        if self.waiting is not None:
            self.waiting[stretch][who] += now - self.last[who]
        self.last[who] = now

    def open_prepare(self, now: tuple[int, int]) -> None:
        self.open_fetch(now, stretch=2)
        self.end_unit()
        self.opened = now

    def close_prepare(self, now: tuple[int, int]) -> None:
        if self.opened is not None:
            self.prepared.append((now[0] - self.opened[0], now[1] - self.opened[1]))
            self.opened, self.last, self.waiting = None, list(now), [[0, 0] for _ in WAITS]

    def open_fetch(self, now: tuple[int, int], stretch: int = 1) -> None:
        self.wait(stretch, 0, now[0])
        self.wait(stretch, 1, now[1])

    def close_fetch(self, before: tuple[int, int], now: tuple[int, int]) -> None:
        self.fetches.append((now[0] - before[0], now[1] - before[1]))
        self.last = list(now)

    def end_unit(self) -> None:
        if self.waiting is not None:
            self.waits.append(self.waiting)
            self.waiting = None

    def overrun(self, threads: int = 1) -> str | None:
        self.end_unit()
        return untimed_overrun(self.prepared, self.fetches, self.waits, threads)
