"""Where an evaluation's time goes: each phase of ``harness.evaluate`` measured on its own.

Not a test. Prints, for one task and one candidate (default: the suite's relu on all 9 cases):

1. worker start-up: a fresh interpreter importing torch, and a harness worker
   answering its first ``load`` (interpreter + torch + harness + task);
2. per case, in this process: building the case module and the model, generating
   one seed's inputs, the reference forward, the candidate forward, the comparison,
   one output through a pipe (encode, write, read, decode); the timed phase
   itself is in the phase trace of 4;
3. compiling the candidate with an empty cache;
4. one full ``evaluate()`` with its phase trace;
5. ``--breakdown``: instead of 1-4, evaluations (a warm-up one, then ``--runs`` measured ones) with the
   parent's time split by phase (exclusive, summed over cases): worker start, compile, correctness
   (reference trials, candidate trials, comparison), and inside timing the empty round trips, the
   warm-up units, the timed ``go`` requests (each seals its outputs before it replies), fetching outputs, comparing them,
   waiting for the next unit's inputs (input generation the comparison did not hide) and the rest.

    PYTHONPATH=. python benchmarks/profile_harness.py [--task relu] [--candidate PATH] [--cases 0-8]
6. ``--cv``: where the run-to-run spread of the speedup comes from: ``--runs`` evaluations, each timing
   every case twice in a row with the same two worker processes. The reference worker is the same
   process in every evaluation (pooled), the candidate's a fresh one each time; so the spread of the
   reference's medians across evaluations is the machine's drift alone, and if the candidate's is much
   larger, its fresh process (memory placement, huge pages) adds to it. Two timings in one evaluation
   differ by time alone (same processes, a few seconds apart).

    PYTHONPATH=. python benchmarks/profile_harness.py --breakdown [--runs 2] [--case-wall-s 2]
    PYTHONPATH=. python benchmarks/profile_harness.py --cv [--task relu --cases 0,5] [--runs 8]
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def clock() -> float:
    return time.perf_counter()


def startup() -> None:
    started = clock()
    subprocess.run([sys.executable, "-c", "import torch"], check=True)
    print(f"  python -c 'import torch'                    {clock() - started:6.2f} s")


class Phases:
    """Exclusive time per label over wrapped methods (a stack: a wrapped call inside another is counted to the
    inner one only): wall time, and CPU time, which a shared machine's other tenants do not inflate: this
    process's (every thread) and the evaluation's two workers' (their process CPU clocks, read from outside)."""

    def __init__(self) -> None:
        self.total: dict[str, list[float]] = {}  # label -> [wall, parent CPU, reference's CPU, candidate's CPU] in s
        self.count: dict[str, int] = {}
        self.stack: list[list[float]] = []  # the same of the child frames, per open frame
        self.workers: Any = lambda: []  # the current evaluation's live (role, worker)s (set by breakdown)
        self.seen: dict[
            tuple[str, int], int
        ] = {}  # a worker's CPU time when first seen: every frame open then counts from it

    def _now(self) -> tuple[float, float, dict[tuple[str, int], int]]:
        cpu: dict[tuple[str, int], int] = {}
        for role, worker in self.workers():
            try:
                cpu[role, worker.pid] = time.clock_gettime_ns(((~worker.pid) << 3) | 2)
            except OSError:  # gone: not counted
                continue
            self.seen.setdefault((role, worker.pid), cpu[role, worker.pid])
        return clock(), time.process_time(), cpu

    def _spent(self, start: tuple[float, float, dict], end: tuple[float, float, dict]) -> list[float]:
        # a worker first seen inside this frame (just taken or booted) counts from that moment, in every open frame
        def role(name: str) -> float:
            return sum(t - start[2].get(k, self.seen[k]) for k, t in end[2].items() if k[0] == name) / 1e9

        return [end[0] - start[0], end[1] - start[1], role("ref"), role("cand")]

    def wrap(self, cls: type, name: str, label=None) -> None:
        original = getattr(cls, name)
        phases = self

        def wrapped(obj, *args, **kwargs):
            key = label(obj, *args, **kwargs) if callable(label) else (label or name)
            if key is None:  # counted to the caller's phase
                return original(obj, *args, **kwargs)
            phases.stack.append([0.0] * 4)
            start = phases._now()
            try:
                return original(obj, *args, **kwargs)
            finally:
                spent = phases._spent(start, phases._now())
                children = phases.stack.pop()
                mine = phases.total.setdefault(key, [0.0] * 4)
                for i in range(4):
                    mine[i] += spent[i] - children[i]
                phases.count[key] = phases.count.get(key, 0) + 1
                if phases.stack:
                    for i in range(4):
                        phases.stack[-1][i] += spent[i]

        setattr(cls, name, wrapped)

    def reset(self) -> None:
        self.total.clear()
        self.count.clear()
        self.seen.clear()  # a pooled worker seen in an earlier run counts from its first sighting in this one

    def report(self, elapsed: float, cpu: float) -> None:
        print(f"  {'phase':52} {'wall s':>7} {'CPU s = parent + reference + candidate':>40}")
        for key, (wall, parent, ref, cand) in sorted(self.total.items(), key=lambda kv: -sum(kv[1][1:])):
            print(
                f"  {key:52} {wall:7.2f} {parent + ref + cand:8.2f} = {parent:6.2f} + {ref:6.2f} + {cand:6.2f}"
                f"  ({self.count[key]} calls)"
            )
        print(f"  {'(outside the wrapped phases)':52} {elapsed - sum(t[0] for t in self.total.values()):7.2f}")
        totals = [sum(t[i] for t in self.total.values()) for i in range(1, 4)]
        print(f"  {'all phases':52} {'':7} {sum(totals):8.2f} = {totals[0]:6.2f} + {totals[1]:6.2f} + {totals[2]:6.2f}")
        print(f"  {'parent CPU in all':52} {'':7} {cpu:8.2f}")


def breakdown(task: str, candidate: Path, cases, runs: int, case_wall_s: float) -> None:
    from harness.case_timer import CaseTimer
    from harness.evaluate import EvalOptions, _Evaluation, evaluate
    from harness.timing import Budget
    from harness.worker_pool import close_pools

    phases = Phases()
    for name, label in (
        ("_static", "static checks"),
        ("_start_candidate", "candidate worker: take/boot + load + compile"),
        ("_reference", "reference worker: take/boot + load"),
        ("_reference_trials", "correctness: reference outputs (cache loads, worker requests sent)"),
        # the candidate's correctness trials (inputs, forward, checks, outputs); in timing, counted to the request
        (
            "candidate_reply",
            lambda ev, timeout, case, doing: None if doing == "timing" else "correctness: candidate trials",
        ),
        ("_judge", "correctness: comparison"),
        ("_correctness", "correctness: rest (requests, candidate forward)"),
        ("_physical_limit", "roofline check"),
        ("_release_reference", "release reference worker"),
        ("_timing", "timing: machine lock, pause/resume pool"),
    ):
        phases.wrap(_Evaluation, name, label)
    for name, label in (
        ("_unit", "timing: empty round trips (overhead)"),
        ("_ask", lambda t, who, header: f"timing: {header.kind} request ({who})"),
        ("_go", "timing: /proc checks and sampler around go"),
        ("_compare_unit", "timing: compare timed outputs"),
        ("_read_remote", "timing: read outputs (process_vm_readv)"),
        ("_send_both", lambda t, header: None if getattr(t, "_in_both", False) else "timing: send next prepare"),
        ("_receive_both", lambda t: None if getattr(t, "_in_both", False) else "timing: wait for next unit's inputs"),
        ("_open_samplers", "timing: open samplers"),
        ("_judge_samples", "timing: judge native samples"),
        ("run", "timing: loop bookkeeping (rest)"),
    ):
        phases.wrap(CaseTimer, name, label)
    both = CaseTimer._both

    def flagged_both(timer, header):
        timer._in_both = True
        try:
            return both(timer, header)
        finally:
            timer._in_both = False

    CaseTimer._both = flagged_both  # type: ignore[method-assign]
    phases.wrap(CaseTimer, "_both", lambda t, header: f"timing: both {header.kind} (warm-up prepare / fetch)")
    phases.wrap(CaseTimer, "_blocks", "timing: draw the sampled blocks")
    from harness import reference_cache

    phases.wrap(reference_cache, "load", "correctness: reference cache read + check")
    phases.wrap(reference_cache, "task_digest", "task file SHA-256")
    current: dict[str, Any] = {}
    init = _Evaluation.__init__

    def remembered(ev, *args, **kwargs):
        init(ev, *args, **kwargs)
        current["ev"] = ev

    _Evaluation.__init__ = remembered  # type: ignore[method-assign]
    phases.workers = lambda: [
        (role, w) for role, w in ((r, getattr(current.get("ev"), f"_{r}", None)) for r in ("ref", "cand")) if w
    ]
    calls = {"cand": 0}  # the candidate's measured timed calls (a unit's size grows with the machine's load)
    timed = CaseTimer._run

    def counted(timer):
        try:
            return timed(timer)
        finally:
            calls["cand"] += timer.calls["cand"]

    CaseTimer._run = counted  # type: ignore[method-assign]
    budget = Budget(case_wall_s=case_wall_s)
    try:
        evaluate(task, candidate, EvalOptions(cases=cases, timing=False))  # warm pool, references cached
        for i in range(runs):
            time.sleep(3)  # the pool's replacement worker boots
            phases.reset()
            calls["cand"] = 0
            started, cpu0 = clock(), time.process_time()
            outcome = evaluate(task, candidate, EvalOptions(cases=cases, budget=budget))
            elapsed, cpu = clock() - started, time.process_time() - cpu0
            units = sum(c.cand_ms.n for c in outcome.cases if c.cand_ms)
            print(
                f"\n== run {i + 1}: evaluate() {elapsed:.2f} s, {outcome.status.value}, speedup {outcome.speedup}, "
                f"{units} measured units of {calls['cand']} calls; load average {os.getloadavg()[0]:.2f}"
            )
            phases.report(elapsed, cpu)
    finally:
        close_pools()


def _quantile(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))] if ys else float("nan")


def cv(task: str, candidate: Path, cases, runs: int, case_wall_s: float) -> None:
    import statistics

    from harness.case_timer import CaseTimer
    from harness.evaluate import EvalOptions, evaluate
    from harness.timing import Budget
    from harness.worker_pool import close_pools

    # run, case, pass, ref/cand medians, median of the paired ratios, ratio of the 20th percentiles
    rows: list[tuple[int, str, int, float, float, float, float]] = []
    current = {"run": 0}
    original = CaseTimer.run

    def twice(timer: CaseTimer) -> None:
        for attempt in (1, 2):
            again = timer if attempt == 1 else CaseTimer(timer.ev, timer.case)
            original(again)
            r = timer.ev.results[timer.case.index]
            if r.ref_ms and r.cand_ms:
                pairs = sorted(a / b for a, b in zip(again.samples["ref"], again.samples["cand"]) if b > 0)
                paired = statistics.median(pairs) if pairs else float("nan")
                low = _quantile(again.samples["ref"], 0.2) / _quantile(again.samples["cand"], 0.2)
                rows.append((current["run"], timer.case.name, attempt, r.ref_ms.median, r.cand_ms.median, paired, low))

    CaseTimer.run = twice  # type: ignore[method-assign]
    budget = Budget(case_wall_s=case_wall_s)
    try:
        evaluate(task, candidate, EvalOptions(cases=cases, timing=False))
        for i in range(runs):
            time.sleep(3)
            current["run"] = i
            started = clock()
            outcome = evaluate(task, candidate, EvalOptions(cases=cases, budget=budget))
            print(f"  run {i + 1}: {clock() - started:.1f} s, {outcome.status.value}, load {os.getloadavg()[0]:.2f}")
    finally:
        CaseTimer.run = original  # type: ignore[method-assign]
        close_pools()

    def cv_of(xs: list[float]) -> float:
        return statistics.stdev(xs) / statistics.mean(xs) if len(xs) > 1 else float("nan")

    print(
        f"\n  {'case':14} {'ref median CV':>14} {'cand median CV':>15} {'speedup CV':>11} {'|pass1-pass2|/speedup':>22}"
        f" {'paired-ratio CV':>16}"
    )
    for name in dict.fromkeys(r[1] for r in rows):
        first = [r for r in rows if r[1] == name and r[2] == 1]
        second = {r[0]: r for r in rows if r[1] == name and r[2] == 2}
        speed = [r[3] / r[4] for r in first]
        within = [abs(r[3] / r[4] - second[r[0]][3] / second[r[0]][4]) / (r[3] / r[4]) for r in first if r[0] in second]
        print(
            f"  {name:14} {cv_of([r[3] for r in first]):14.3f} {cv_of([r[4] for r in first]):15.3f} "
            f"{cv_of(speed):11.3f} {statistics.mean(within) if within else float('nan'):22.3f}"
            f" {cv_of([r[5] for r in first]):16.3f}"
        )
    runs_seen = sorted({r[0] for r in rows})

    def geo(values: list[float]) -> float:
        return math.exp(sum(math.log(v) for v in values) / len(values))

    for label, pick in (
        ("ratio of medians", lambda r: r[3] / r[4]),
        ("median of paired ratios", lambda r: r[5]),
        ("ratio of 20th percentiles", lambda r: r[6]),
    ):
        per_run = [geo([pick(r) for r in rows if r[0] == i and r[2] == 1]) for i in runs_seen]
        print(f"  geomean speedup over cases, {label:24}: CV {cv_of(per_run):.3f} over {len(per_run)} evaluations")
    print(
        "  (independent draws of the same spread differ by ~1.13 x their CV on average: a within-evaluation\n"
        "   difference that large says the spread is time, not the processes)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="relu")
    parser.add_argument("--candidate", default=None)
    parser.add_argument("--cases", default=None)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--breakdown", action="store_true", help="only the phase breakdown of whole evaluations")
    parser.add_argument("--cv", action="store_true", help="only the source of the speedup's run-to-run spread")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--case-wall-s", type=float, default=2.0)
    args = parser.parse_args()

    if args.breakdown or args.cv:
        from harness.suite import find_candidate, find_task

        print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
        cand = Path(args.candidate) if args.candidate else find_candidate(args.task)
        run = breakdown if args.breakdown else cv
        run(str(find_task(args.task).path), cand, args.cases, args.runs, args.case_wall_s)
        return
    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    print("\n== 1. worker start-up")
    startup()
    from harness.suite import find_candidate, find_task

    task_path = find_task(args.task).path
    candidate = Path(args.candidate) if args.candidate else find_candidate(args.task)

    import torch

    from harness.compare import compare_outputs
    from harness.ipc import Load, MessageReader, write_message
    from harness.targets import get_target
    from harness.task import load_task, select_cases
    from harness.worker_common import build, build_reference, decode, encode, init_inputs, make_inputs
    from harness.worker_limits import Limits
    from harness.worker_process import Worker

    target = get_target("cpu")
    env = dict(os.environ)
    env.update(target.worker_env(os.cpu_count() or 1))
    started = clock()
    worker = Worker("reference", env, Limits(), True)
    worker.request(
        Load(task=str(task_path), target="cpu", target_options={}, threads=os.cpu_count() or 1),
        120,
        "load",
    )
    print(f"  harness reference worker: start + load task  {clock() - started:6.2f} s")
    worker.close()

    print("\n== 3. compile (empty cache)")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["KOPE_HARNESS_CACHE"] = cache
        from harness.targets.base import import_file

        started = clock()
        module = import_file(candidate, "kope_profile_candidate")
        print(f"  import + compile {candidate.name:28} {clock() - started:6.2f} s")
        os.environ.pop("KOPE_HARNESS_CACHE")
    torch.set_num_threads(os.cpu_count() or 1)
    task = load_task(task_path)
    cases = select_cases(task, args.cases)
    print(f"\n== 2. per case (ms; inputs/forward/compare per seed; x{args.seeds} seeds x 2 workers today)")
    print(f"  {'case':22} {'module':>7} {'inputs':>7} {'ref fwd':>8} {'cand fwd':>8} {'compare':>8} {'ipc':>7}")
    totals: dict[str, float] = {}
    for case in cases:
        row = {}
        t0 = clock()
        mod = task.module_for_case(case)
        init = init_inputs(mod, 1, case.name)
        ref = build_reference(mod, init, 1, "cpu", case.name)
        cand = build(module.ModelNew, init, 1, "cpu")
        row["module"] = clock() - t0
        t0 = clock()
        inputs = make_inputs(mod, 7, "cpu", case.name)
        row["inputs"] = clock() - t0
        with torch.no_grad():
            t0 = clock()
            out_ref = ref(*inputs)
            row["ref fwd"] = clock() - t0
            t0 = clock()
            out_cand = cand(*inputs)
            row["cand fwd"] = clock() - t0
        t0 = clock()
        verdict = compare_outputs(out_cand, out_ref, device="cpu")
        row["compare"] = clock() - t0
        assert verdict.ok, verdict.message
        r, w = os.pipe()
        got = {}
        reader = threading.Thread(target=lambda g=got, fd=r: g.update(msg=MessageReader(fd, 1 << 40).read(60)))
        t0 = clock()
        reader.start()
        tensors: list = []
        write_message(w, {"output": encode(out_cand, tensors)}, tensors)
        reader.join()
        decode(got["msg"][0]["output"], got["msg"][1])
        row["ipc"] = clock() - t0
        os.close(r)
        os.close(w)
        for k, v in row.items():
            totals[k] = totals.get(k, 0.0) + v
        print(f"  {case.name:22} " + " ".join(f"{row[k] * 1e3:{w}.0f}" for k, w in zip(row, (7, 7, 8, 8, 8, 7))))
    print(f"  {'total':22} " + " ".join(f"{totals[k] * 1e3:{w}.0f}" for k, w in zip(totals, (7, 7, 8, 8, 8, 7))))

    print("\n== 4. one evaluate() with its phase trace (parent side)")
    from harness.evaluate import EvalOptions, evaluate
    from harness.worker_pool import REFERENCE_POOL

    logging.basicConfig(level=logging.DEBUG, format="  %(message)s")
    logging.getLogger("harness").setLevel(logging.DEBUG)
    started = clock()
    outcome = evaluate(task_path, candidate, EvalOptions(cases=args.cases, seeds=args.seeds))
    print(f"  evaluate(): {clock() - started:.2f} s, {outcome.status.value}, speedup {outcome.speedup}")
    REFERENCE_POOL.close_all()


if __name__ == "__main__":
    main()
