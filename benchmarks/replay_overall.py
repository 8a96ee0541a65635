"""Overall steps-to-90% ratio, memory over no memory, across several `kope bench --repeats N` results (not a test).

Each results.json holds, per repeat, each family's mean steps to 90 % of the optimum over its 2nd and later
operators (``repeat_summary.per_repeat[k].family_steps``). Repeat k of every bench is paired (proposer seed k-1):
per repeat, the operator-weighted sum of memory's steps over no memory's; then the mean over repeats with a 95 %
Student's t interval, and the same for each configuration's mean steps.

    python benchmarks/replay_overall.py OUT1/results.json OUT2/results.json ... [--memory active --baseline no-memory]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys

from scipy import stats  # scikit-learn's dependency, installed with KOPE


def interval(values: list[float]) -> tuple[float, float, float]:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.nan, math.nan
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return mean, mean - half, mean + half


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--memory", default="active")
    parser.add_argument("--baseline", default="no-memory")
    args = parser.parse_args()
    per_repeat: dict[int, list[tuple[int, float, float]]] = {}
    for path in args.results:
        try:
            data = json.load(open(path))
            repeats = data["repeat_summary"]["per_repeat"]
            counts: dict[str, int] = {}
            for op in data["operators"]:  # the 2nd and later operators of each family
                counts[op["family"]] = counts.get(op["family"], -1) + 1
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {path}: not a kope bench --repeats results.json ({exc})", file=sys.stderr)
            return 2
        for k, repeat in enumerate(repeats):
            for family, steps in repeat["family_steps"].items():
                if args.memory in steps and args.baseline in steps:
                    per_repeat.setdefault(k, []).append((counts[family], steps[args.memory], steps[args.baseline]))
    if not per_repeat:
        print("error: no repeat has both configurations", file=sys.stderr)
        return 2
    ratios, memory, baseline = [], [], []
    for rows in per_repeat.values():
        n = sum(c for c, _, _ in rows)
        a = sum(c * m for c, m, _ in rows)
        b = sum(c * x for c, _, x in rows)
        ratios.append(a / b)
        memory.append(a / n)
        baseline.append(b / n)
    operators = sum(c for c, _, _ in next(iter(per_repeat.values())))
    fmt = "{:.2f} [{:.2f}, {:.2f}]".format
    print(f"{len(args.results)} benches, {len(per_repeat)} paired repeats, {operators} later operators")
    print(f"steps to 90%: {args.memory} {fmt(*interval(memory))} vs {args.baseline} {fmt(*interval(baseline))}")
    print(f"ratio {args.memory}/{args.baseline}: {fmt(*interval(ratios))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
