"""Where the speedup's run-to-run spread comes from, from the per-unit samples themselves.

Not a test. Runs ``--runs`` evaluations of each task (default: softmax cases 0,2,6 and relu cases 0,5, as
``bench_harness.py``'s section 4), keeps every case's per-unit samples (reference and candidate, in the order
timed), writes them to ``--out`` (JSON) and prints, per case, what shapes them (the reference/candidate correlation
of a repetition's two units, lag-1 autocorrelation, the second half's median against the first's, the largest
sample over the median) and, over the evaluations, the CV of the geomean speedup under several estimators: the
ratio of medians (the harness's), the median of the paired per-repetition ratios, ratios of low percentiles.
``--analyse FILE`` prints the same for samples written earlier, without running anything.

    PYTHONPATH=. python benchmarks/speedup_spread.py [--runs 6] [--threads 1] [--policy old] [--out samples.json]
    PYTHONPATH=. python benchmarks/speedup_spread.py --analyse samples.json [--min-units 10]

docs/harness-workers.md, "5 Dec 2026, round 3".
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TASKS = (("softmax", "0,2,6"), ("relu", "0,5"))


def capture(runs: int, threads: int | None, out: Path, policy: str = "new") -> list[dict]:
    from bench_harness import thread_policy

    from harness import case_timer
    from harness.evaluate import EvalOptions, evaluate
    from harness.suite import find_candidate
    from harness.worker_pool import close_pools

    cases: list[dict] = []
    timed = case_timer.CaseTimer._run

    def kept(timer: case_timer.CaseTimer) -> None:
        try:
            timed(timer)
        finally:
            cases.append({"case": timer.case.name, "ref": timer.samples["ref"], "cand": timer.samples["cand"]})

    case_timer.CaseTimer._run = kept  # type: ignore[method-assign]
    rows: list[dict] = []
    policy_set = thread_policy(policy)  # "old": timed calls on every usable core, as before round 4
    policy_set.__enter__()
    try:
        for task, chosen in TASKS:
            candidate = find_candidate(task)
            evaluate(task, candidate, EvalOptions(cases=chosen, timing=False, threads=threads))
            for run in range(runs):
                cases.clear()
                outcome = evaluate(task, candidate, EvalOptions(cases=chosen, threads=threads))
                rows.append({"task": task, "run": run, "speedup": outcome.speedup, "cases": list(cases)})
                print(f"  {task} run {run + 1}: speedup {outcome.speedup}", flush=True)
                out.write_text(json.dumps(rows))
    finally:
        case_timer.CaseTimer._run = timed  # type: ignore[method-assign]
        policy_set.__exit__(None, None, None)
        close_pools()
    return rows


def _quantile(xs: list[float], q: float) -> float:
    ys = sorted(xs)
    return ys[min(len(ys) - 1, int(q * len(ys)))]


def _corr(a: list[float], b: list[float]) -> float:
    if len(a) < 3:
        return math.nan
    try:
        return statistics.correlation(a, b)
    except statistics.StatisticsError:  # a constant series
        return math.nan


ESTIMATORS = {
    "ratio of medians (the harness's)": lambda r, c: statistics.median(r) / statistics.median(c),
    "median of paired ratios": lambda r, c: statistics.median(a / b for a, b in zip(r, c)),
    "ratio of 25th percentiles": lambda r, c: _quantile(r, 0.25) / _quantile(c, 0.25),
    "ratio of 10th percentiles": lambda r, c: _quantile(r, 0.10) / _quantile(c, 0.10),
}


def analyse(rows: list[dict], min_units: int) -> None:
    for task in dict.fromkeys(row["task"] for row in rows):
        runs = [row for row in rows if row["task"] == task]
        print(f"\n== {task}: {len(runs)} evaluations; cases of fewer than {min_units} units left out")
        for row in runs:
            for c in row["cases"]:
                ref, cand, half = c["ref"], c["cand"], len(c["ref"]) // 2
                if len(ref) < max(min_units, 4):
                    continue
                logs = [[math.log(x) for x in xs] for xs in (ref, cand)]
                drift = [statistics.median(xs[half:]) / statistics.median(xs[:half]) - 1 for xs in (ref, cand)]
                print(
                    f"  run {row['run'] + 1} {c['case']:16} {len(ref):3} units  corr(ref, cand) "
                    f"{_corr(*logs):+.2f}  lag-1 ref {_corr(ref[:-1], ref[1:]):+.2f} cand {_corr(cand[:-1], cand[1:]):+.2f}"
                    f"  2nd/1st half ref {drift[0]:+.0%} cand {drift[1]:+.0%}  max/median ref "
                    f"{max(ref) / statistics.median(ref):.1f} cand {max(cand) / statistics.median(cand):.1f}"
                )
        for name, estimate in ESTIMATORS.items():
            per_run, per_case = [], {}
            for row in runs:
                got = [(c["case"], estimate(c["ref"], c["cand"])) for c in row["cases"] if len(c["ref"]) >= min_units]
                if got:
                    per_run.append(math.exp(statistics.mean(math.log(v) for _, v in got)))
                for case, value in got:
                    per_case.setdefault(case, []).append(value)
            cv = statistics.stdev(per_run) / statistics.mean(per_run) if len(per_run) > 1 else math.nan
            cases = " ".join(
                f"{case} {statistics.stdev(v) / statistics.mean(v):.1%}" for case, v in per_case.items() if len(v) > 1
            )
            print(f"  {name:34} geomean speedup CV {cv:6.1%}  per case: {cases}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--threads", type=int, default=None, help="the workers' thread count (default: the policy's)")
    parser.add_argument(
        "--policy", choices=("new", "old"), default="new", help="timed calls on all cores but one (new) or all (old)"
    )
    parser.add_argument("--out", type=Path, default=Path("speedup_samples.json"))
    parser.add_argument("--analyse", type=Path, default=None, help="samples written earlier: only the analysis")
    parser.add_argument("--min-units", type=int, default=5)
    args = parser.parse_args()
    if args.runs < 2 or args.min_units < 1:
        parser.error("--runs must be at least 2 and --min-units at least 1")
    rows = (
        json.loads(args.analyse.read_text())
        if args.analyse
        else capture(args.runs, args.threads, args.out, args.policy)
    )
    analyse(rows, args.min_units)


if __name__ == "__main__":
    main()
