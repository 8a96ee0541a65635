"""The harness's timing budget (``Budget``), apart from ``harness.timing`` so that a process that only builds
a budget (a replayed bench's pair: ``kope.boundary.timing_budget``) does not import torch for it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Budget:
    warmup_ms: float = 25.0  # per implementation, before the first measured repetition
    rep_ms: float = 100.0  # measured time each implementation gets at least (with min_reps), see lopsided
    min_reps: int = 5
    max_reps: int = 100
    max_wall_s: float = 60.0  # wall time for one case's timing, all included (a hard stop)
    # ...and a soft one: after min_reps, one case's timing stops once this much wall time has passed since it began
    # (warm-up included), whatever rep_ms says. Fresh inputs for every timed call cost far more than a fast kernel
    # (a 16 MB randn ~25 ms against a 0.5 ms ReLU here), so for fast kernels the measured-time budget alone meant
    # hundreds of input sets per case; the interval achieved is recorded either way. 0: no soft limit.
    case_wall_s: float = 2.0
    ci_target: float = 0.015  # stop once both medians' 95 % intervals are within +-1.5 % (0: never early)
    unit_ms: float = 1.0  # fast kernels are timed in units of calls lasting at least this long
    # ...or, for a lopsided pair (one implementation far slower than the other), until both together have
    # spent this many times rep_ms: the slow one's samples then decide the speedup, and the fast one's
    # interval is recorded as measured (an 0.5 s candidate against a 3 ms reference stops after min_reps,
    # not after the 33 repetitions the reference would need to reach rep_ms on its own)
    lopsided: float = 10.0
