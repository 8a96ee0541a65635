"""Measurements of the harness itself, old path against new in the same run (not a test).

Prints, in one run (all evaluations through ``harness.evaluate``):

1. turnaround of a 2-case ReLU evaluation whose kernel is not in the compile cache, on the
   new path (warm sandboxed workers, cached references, adaptive timing, timed inputs from a
   ring of sets) and on the old one (``warm_pool=False, reference_cache=False, input_ring=False``:
   a fresh interpreter and torch import per worker, references recomputed, ``get_inputs`` for
   every timed call), with the ratio; and the same with the sandbox switched off, for the
   sandbox's cost;
2. a 9-case elementwise evaluation (relu, all cases), new path and old path, with the ratio, and
   the new path without the input ring (the ring's share);
3. the cost of timing from outside the candidate's process: the empty round trip the parent
   subtracts from every timed unit;
4. the coefficient of variation of the measured speedup over 10 evaluations each of softmax
   and relu (new path); with ``--threads-policy both`` also under the thread policy before round 4 (timed
   calls on every usable core instead of all but one: ``harness.timing.timing_threads``), the two
   policies' evaluations alternating, so both see the same load.

    PYTHONPATH=. python benchmarks/bench_harness.py [--repeats 10] [--case-wall-s 2] [--skip 1,3]
        [--threads-policy new|old|both]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness.errors import HarnessError
from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_candidate
from harness.timing import Budget
from harness.worker_pool import WARM_POOL, close_pools

OLD = {"warm_pool": False, "reference_cache": False, "input_ring": False}


BUDGET = Budget()  # --case-wall-s changes its soft wall-time limit per case


def timed_eval(task: str, candidate: Path, **options):
    options.setdefault("budget", BUDGET)
    started = time.perf_counter()
    try:
        outcome = evaluate(task, candidate, EvalOptions(**options))
    except HarnessError as exc:  # e.g. a worker that did not answer in time on an overloaded machine: one line
        return time.perf_counter() - started, Failed(f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    return time.perf_counter() - started, outcome


class Failed:
    """An evaluation that raised instead of returning an outcome (printed, not measured)."""

    speedup = None
    compile_time_s = None
    error_kind = "harness_error"

    def __init__(self, message: str) -> None:
        self.message = message
        self.status = type("Status", (), {"value": "failed"})()
        self.cases: list = []


def wait_for_pool(timeout: float = 120.0) -> None:
    """Until the warm pool has a booted worker again (its refill runs in the background)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(w.ready or _booted(w) for ws in WARM_POOL._idle.values() for w in ws):
            return
        time.sleep(0.2)


def _booted(worker) -> bool:
    try:
        worker.wait_ready(0.01)
        return True
    except Exception:  # still booting
        return False


class ColdCompile:
    """Removes the compile-cache entries a run created, so the next run compiles again."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __enter__(self) -> ColdCompile:
        self.before = set(self._entries())
        return self

    def __exit__(self, *exc: object) -> None:
        for entry in set(self._entries()) - self.before:
            shutil.rmtree(entry, ignore_errors=True)

    def _entries(self) -> list[Path]:
        return [p for sub in ("cpu", "torch_ext") for p in (self.root / sub).glob("*/*") if p.is_dir()] + [
            p for p in (self.root / "torch_ext").glob("*") if p.is_dir()
        ]


def line(label: str, seconds: float, outcome, extra: str = "") -> None:
    speed = "-" if outcome.speedup is None else f"{outcome.speedup:.2f}x"
    compile_s = "-" if outcome.compile_time_s is None else f"{outcome.compile_time_s:.2f}"
    print(f"  {label:34} {seconds:7.2f} s  compile {compile_s:>5} s  {outcome.status.value:9} {speed:>7} {extra}")
    if isinstance(outcome, Failed):
        print(f"    {outcome.message}")


def turnaround(cache: Path) -> None:
    print("== 1. 2-case relu turnaround, kernel not in the compile cache (cases 0,5)")
    candidate = HERE / "candidates" / "relu_fast_path.py"
    results = {}
    for label, options in (
        ("new (warm pool, ref cache, sandbox)", {}),
        ("new, sandbox off", {"sandbox": False}),
        ("old (fresh workers, refs recomputed)", OLD),
    ):
        if options.get("warm_pool", True):
            timed_eval("relu", find_candidate("relu"), cases="0,5", timing=False, **options)  # warms pool + refs
            wait_for_pool()
        with ColdCompile(cache):
            seconds, outcome = timed_eval("relu", candidate, cases="0,5", **options)
        results[label] = seconds
        line(label, seconds, outcome, f"load {os.getloadavg()[0]:.2f}")
    new, old = results["new (warm pool, ref cache, sandbox)"], results["old (fresh workers, refs recomputed)"]
    print(
        f"  ratio old/new: {old / new:.2f}x; sandbox cost: new/new-without-sandbox = {new / results['new, sandbox off']:.2f}x"
    )


def nine_cases() -> None:
    print("\n== 2. 9-case elementwise evaluation (relu, suite candidate, all cases)")
    candidate = find_candidate("relu")
    timed_eval("relu", candidate, timing=False)  # references of all 9 cases cached, pool warm
    wait_for_pool()
    new, o_new = timed_eval("relu", candidate)
    line("new", new, o_new, f"load {os.getloadavg()[0]:.2f}")
    wait_for_pool()
    no_ring, o_no_ring = timed_eval("relu", candidate, input_ring=False)
    line("new, input ring off", no_ring, o_no_ring, f"load {os.getloadavg()[0]:.2f}")
    old, o_old = timed_eval("relu", candidate, **OLD)
    line("old", old, o_old, f"load {os.getloadavg()[0]:.2f}")
    print(f"  ratio old/new: {old / new:.2f}x; ring off/on: {no_ring / new:.2f}x")


def round_trip() -> None:
    print("\n== 3. timing from outside the candidate's process: cost of one empty timed unit")
    from harness.hardware import available_cores
    from harness.ipc import Go, Load, Prepare
    from harness.targets import get_target
    from harness.worker_pool import Limits, WorkerSpec
    from harness.worker_process import worker_env

    target = get_target("cpu")
    env = worker_env(target.worker_env(available_cores()), True)
    spec = WorkerSpec(tuple(sorted(env.items())), Limits(), True, True, (), None)
    worker = spec.start("reference")
    try:
        task = find_candidate("relu").parent.parent.parent / "tasks" / "elementwise" / "relu.py"
        worker.request(
            Load(role="reference", task=str(task), target="cpu", target_options={}, threads=available_cores()),
            120,
            "load",
        )
        worker.request(Prepare(case=0, init_seed=0, seeds=[]), 60, "prepare")
        costs = []
        for _ in range(200):
            start = time.perf_counter_ns()
            worker.request(Go(), 60, "go")
            costs.append((time.perf_counter_ns() - start) / 1e3)
        print(f"  median {statistics.median(costs):.0f} us, p90 {sorted(costs)[180]:.0f} us per unit (subtracted)")
    finally:
        worker.close()


@contextlib.contextmanager
def thread_policy(name: str):
    """``new``: harness.timing.timing_threads as it is; ``old``: timed calls on every usable core (before round 4)."""
    from harness import timing

    kept = timing.timing_threads
    if name == "old":
        timing.timing_threads = lambda requested, cores: requested or cores
    try:
        yield
    finally:
        timing.timing_threads = kept


def speedup_cv(repeats: int, policies: list[str]) -> None:
    for task, cases in (("softmax", "0,2,6"), ("relu", "0,5")):
        candidate = find_candidate(task)
        print(f"\n== 4. speedup over {repeats} evaluations of {candidate.name} on task {task}, cases {cases}")
        for policy in policies:
            with thread_policy(policy):
                timed_eval(task, candidate, cases=cases, timing=False)
        found: dict[str, list[float]] = {policy: [] for policy in policies}
        for i in range(repeats):
            for policy in policies:
                with thread_policy(policy):
                    seconds, o = timed_eval(task, candidate, cases=cases)
                one_run(i, policy if len(policies) > 1 else "", seconds, o, found[policy])
        for policy, speedups in found.items():
            if len(speedups) >= 2:
                mean, sd = statistics.mean(speedups), statistics.stdev(speedups)
                print(
                    f"  {task}{' ' + policy if len(policies) > 1 else ''} ({policy_threads(policy)} threads): mean "
                    f"{mean:.3f}x, stdev {sd:.4f}, coefficient of variation {sd / mean:.4f} ({len(speedups)} runs)"
                )


def policy_threads(policy: str) -> int:
    from harness import timing
    from harness.hardware import available_cores

    with thread_policy(policy):
        return timing.timing_threads(None, available_cores())


def one_run(i: int, policy: str, seconds: float, o, speedups: list[float]) -> None:
    """One evaluation's line; its speedup appended to ``speedups``."""
    label = f"run {i + 1:2}{' ' + policy if policy else ''}"
    if o.speedup is None:
        print(f"  {label}: {o.status.value} {o.error_kind}: no speedup")
        return
    speedups.append(o.speedup)
    ci = " ".join(
        f"+-{(c.cand_ms.ci_high - c.cand_ms.ci_low) / 2 / c.cand_ms.median * 100:.1f}%/{c.cand_ms.n}"
        for c in o.cases
        if c.cand_ms and c.cand_ms.ci_low is not None
    )
    print(
        f"  {label}: speedup {o.speedup:.3f}x  ({seconds:.1f} s; candidate median CI/reps per case: {ci}; "
        f"load {os.getloadavg()[0]:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument(
        "--threads-policy",
        choices=("new", "old", "both"),
        default="new",
        help="section 4: timed calls on all usable cores but one (new), on every one (old), or both alternating",
    )
    parser.add_argument("--skip", default="", help="comma-separated sections to skip (1,2,3,4)")
    parser.add_argument(
        "--case-wall-s",
        type=float,
        default=Budget().case_wall_s,
        help=f"soft wall-time limit of one case's timing (harness.timing.Budget.case_wall_s; default {Budget().case_wall_s:g})",
    )
    args = parser.parse_args()
    skip = set(args.skip.split(","))
    global BUDGET
    BUDGET = Budget(case_wall_s=args.case_wall_s)
    print(
        f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} (a shared machine makes these noisy); "
        f"soft wall-time limit per case {BUDGET.case_wall_s:g} s\n"
    )
    with tempfile.TemporaryDirectory(prefix="kope-bench-cache-") as cache:
        os.environ["KOPE_HARNESS_CACHE"] = cache
        started = time.perf_counter()
        try:
            if "1" not in skip:
                turnaround(Path(cache))
            if "2" not in skip:
                nine_cases()
            if "3" not in skip:
                round_trip()
            if "4" not in skip:
                speedup_cv(args.repeats, ["new", "old"] if args.threads_policy == "both" else [args.threads_policy])
        finally:
            close_pools()
        print(f"\nbench_harness: {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
