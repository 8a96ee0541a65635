"""Measurements of the harness itself (not a test; timings on a shared machine are noisy).

Prints, in one run:

1. turnaround (compile + check + time) of one ReLU kernel through the cpu fast
   path (``harness.cpu.compile_cpp``) and through ``load_inline``: cold (empty
   compile cache) and warm (cached), with the compile time the outcome reports;
2. the coefficient of variation of the measured speedup over repeated
   evaluations of one candidate (default: the suite's softmax candidate on
   three softmax cases, 10 evaluations).

    PYTHONPATH=. python benchmarks/bench_harness.py [--repeats 10] [--cases 0,2,6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness.evaluate import EvalOptions, evaluate  # noqa: E402
from harness.sandbox import REFERENCE_POOL  # noqa: E402
from harness.suite import find_candidate  # noqa: E402


def timed_eval(task: str, candidate: Path, options: EvalOptions):
    started = time.perf_counter()
    outcome = evaluate(task, candidate, options)
    return time.perf_counter() - started, outcome


def turnaround(cases: str) -> None:
    print("== turnaround: compile + check + time, one ReLU kernel, task relu, cases", cases)
    print(f"{'path':14} {'cache':6} {'turnaround s':>13} {'compile s':>10} {'status':10} speedup")
    options = EvalOptions(cases=cases)
    for label, path in (
        ("fast path", HERE / "candidates" / "relu_fast_path.py"),
        ("load_inline", HERE / "candidates" / "relu_load_inline.py"),
    ):
        with tempfile.TemporaryDirectory(prefix="kope-bench-cache-") as cache:
            os.environ["KOPE_HARNESS_CACHE"] = cache
            for state in ("cold", "warm"):
                seconds, o = timed_eval("relu", path, options)
                compile_s = "-" if o.compile_time_s is None else f"{o.compile_time_s:.2f}"
                speed = "-" if o.speedup is None else f"{o.speedup:.2f}x"
                print(f"{label:14} {state:6} {seconds:13.1f} {compile_s:>10} {o.status.value:10} {speed}")
        os.environ.pop("KOPE_HARNESS_CACHE", None)


def speedup_cv(repeats: int, cases: str) -> None:
    candidate = find_candidate("softmax")
    print(f"\n== speedup over {repeats} evaluations of {candidate.name} on task softmax, cases {cases}")
    speedups, per_case = [], {}
    for i in range(repeats):
        seconds, o = timed_eval("softmax", candidate, EvalOptions(cases=cases))
        if o.speedup is None:
            print(f"run {i + 1}: {o.status.value} {o.error_kind}: no speedup")
            continue
        speedups.append(o.speedup)
        for c in o.cases:
            per_case.setdefault(c.name, []).append(c.speedup)
        cvs = " ".join(f"{c.cand_ms.cv:.2f}" for c in o.cases)
        print(f"run {i + 1:2}: speedup {o.speedup:.3f}x  ({seconds:.1f} s; per-case timing CV of the candidate: {cvs})")
    if len(speedups) >= 2:
        mean, sd = statistics.mean(speedups), statistics.stdev(speedups)
        print(
            f"geomean speedup: mean {mean:.3f}x, stdev {sd:.3f}, coefficient of variation {sd / mean:.3f} over {len(speedups)} runs"
        )
        for name, values in per_case.items():
            m, s = statistics.mean(values), statistics.stdev(values)
            print(f"  case {name:24} mean {m:.3f}x  CV {s / m:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cases", default="0,2,6", help="softmax cases for the CV measurement")
    parser.add_argument("--relu-cases", default="0,5", help="relu cases for the turnaround measurement")
    args = parser.parse_args()
    print(
        f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} (shared machines make these numbers noisy)\n"
    )
    try:
        turnaround(args.relu_cases)
        speedup_cv(args.repeats, args.cases)
    finally:
        REFERENCE_POOL.close_all()


if __name__ == "__main__":
    main()
