"""Extract a replay bench's per-repeat figures, and compare two benches paired by repeat (not a test).

``extract``: reduce a ``kope bench --repeats N`` results.json (3-4 MB: every attempt) to the figures the learning
notes quote, ``repeat_steps.json``: per repeat each family's mean steps to 90 % of the optimum over its 2nd and
later operators, severe regressions and paired speedup (what ``benchmarks/replay_overall.py`` reads), and per
operator each configuration's steps in every repeat (a miss counts the budget + 1).

``compare``: two benches of the same family and repeats (a baseline and a candidate proposer), paired by repeat
(repeat k of both ran with proposer seed k-1): per family the candidate minus the baseline, for memory's steps,
its severe regressions and its paired speedup over no memory, each with a 95 % Student's t interval; then each
later operator's mean steps in both.

    python benchmarks/replay_compare.py extract OUT/results.json DEST/repeat_steps.json
    python benchmarks/replay_compare.py compare BASE/results.json CAND/results.json [--config active]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from scipy import stats  # scikit-learn's dependency, installed with KOPE


def interval(values: list[float]) -> str:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.2f}"
    half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{mean:.2f} [{mean - half:.2f}, {mean + half:.2f}]"


def per_operator(data: dict[str, Any]) -> dict[str, dict[str, list[int]]]:
    """operator -> config -> steps to the bar in each repeat (a miss: budget + 1), later operators only."""
    out: dict[str, dict[str, list[int]]] = {}
    for repeat in data["repeat_summary"]["per_repeat"]:
        stb = repeat["steps_to_best"]
        budget = int(stb["budget"])
        for row in stb["per_operator"]:
            if not row["later"] or row["best"] is None:
                continue
            for config, steps in row["steps"].items():
                out.setdefault(row["operator"], {}).setdefault(config, []).append(
                    steps if steps is not None else budget + 1
                )
    return out


def extract(source: Path, dest: Path) -> int:
    data = json.loads(source.read_text())
    repeats = data["repeat_summary"]["per_repeat"]
    slim = {
        "note": "extract of the bench results.json (the full file holds every attempt, 3-4 MB): what "
        "benchmarks/replay_overall.py and replay_compare.py read",
        "command": data.get("command"),
        "operators": [{"family": o.get("family"), "operator": o["operator"]} for o in data["operators"]],
        "repeat_summary": {
            "per_repeat": [
                {k: r[k] for k in ("family_steps", "family_severe", "family_paired") if k in r} for r in repeats
            ]
        },
        "per_operator_steps": per_operator(data),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(slim, indent=1) + "\n")
    print(f"{dest}: {len(repeats)} repeats, {len(slim['per_operator_steps'])} later operators")
    return 0


def _load(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    if "per_operator_steps" not in data:
        data["per_operator_steps"] = per_operator(data)
    return data


def compare(base_path: Path, cand_path: Path, config: str, baseline: str) -> int:
    base, cand = _load(base_path), _load(cand_path)
    b_rep, c_rep = base["repeat_summary"]["per_repeat"], cand["repeat_summary"]["per_repeat"]
    n = min(len(b_rep), len(c_rep))
    if n == 0:
        print("error: no repeat in one of the benches", file=sys.stderr)
        return 2
    print(f"{n} paired repeats (candidate minus baseline, config {config}; {baseline} for reference)")
    for family in c_rep[0]["family_steps"]:
        rows = []
        for b, c in zip(b_rep[:n], c_rep[:n]):
            bs, cs = b["family_steps"].get(family) or {}, c["family_steps"].get(family) or {}
            if bs.get(config) is None or cs.get(config) is None:
                continue
            bsev, csev = b["family_severe"][family], c["family_severe"][family]
            bp = (b["family_paired"].get(config) or {}).get(family) or {}
            cp = (c["family_paired"].get(config) or {}).get(family) or {}
            rows.append(
                (
                    bs[config],
                    cs[config],
                    cs.get(baseline),
                    bsev[config],
                    csev[config],
                    csev.get(baseline, 0),
                    math.log(bp["speedup"]) if bp.get("speedup") else None,
                    math.log(cp["speedup"]) if cp.get("speedup") else None,
                )
            )
        if not rows:
            continue
        col = list(zip(*rows))
        print(f"## {family}")
        print(
            f"  steps: baseline {interval(list(col[0]))}  candidate {interval(list(col[1]))}  "
            f"{baseline} {interval([x for x in col[2] if x is not None])}  "
            f"difference {interval([c - b for b, c in zip(col[0], col[1])])}"
        )
        print(
            f"  severe: baseline {interval(list(col[3]))}  candidate {interval(list(col[4]))}  "
            f"{baseline} {interval(list(col[5]))}  difference {interval([c - b for b, c in zip(col[3], col[4])])}"
        )
        logs_b = [x for x in col[6] if x is not None]
        logs_c = [x for x in col[7] if x is not None]
        if logs_b and logs_c:
            print(
                f"  paired speedup over {baseline} (geometric): baseline {math.exp(statistics.fmean(logs_b)):.3f}  "
                f"candidate {math.exp(statistics.fmean(logs_c)):.3f}"
            )
    ops_b, ops_c = base["per_operator_steps"], cand["per_operator_steps"]
    print("per operator, mean steps (baseline / candidate / " + baseline + "):")
    for op, by in ops_c.items():
        b = ops_b.get(op, {}).get(config) or []
        c = by.get(config) or []
        x = by.get(baseline) or []
        fmt = lambda v: f"{statistics.fmean(v[:n]):.2f}" if v else "-"  # noqa: E731
        print(f"  {op:20s} {fmt(b)} / {fmt(c)} / {fmt(x)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ex = sub.add_parser("extract")
    ex.add_argument("results", type=Path)
    ex.add_argument("dest", type=Path)
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("base", type=Path)
    cmp_.add_argument("candidate", type=Path)
    cmp_.add_argument("--config", default="active")
    cmp_.add_argument("--baseline", default="no-memory")
    args = parser.parse_args(argv)
    try:
        if args.command == "extract":
            return extract(args.results, args.dest)
        return compare(args.base, args.candidate, args.config, args.baseline)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: not a kope bench --repeats results.json or its extract ({exc})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
