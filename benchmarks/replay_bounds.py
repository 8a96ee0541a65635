"""What bounds the memory / no-memory steps ratio on the recorded spaces, per family (not a test).

For each family's 2nd and later operators: the space's size (recorded settings of the template's grid), how
close the defaults are to the optimum, how many recorded settings reach 90 % of it, and no memory's mean steps
to 90 % (from a bench's results.json, ``--results``, one or more; a miss counts budget + 1 as in the bench). Two
bounds on memory's steps: **perfect** (an operator with an earlier operator of its template reaches 90 % at step
1; the others, nothing to transfer, as no memory) and **shared optimum** (step 1 only where the record holds
something to transfer: a setting within 90 % of this operator's optimum that is also within 90 % of an earlier
operator's optimum, read in this operator's knobs; else no memory's steps). And a reference policy, not a
bound: **consensus top K** (``--top K``, 2 by default) knows every earlier operator of the template's whole recorded
space, more than a memory ever holds, tries this operator's recorded settings in the order of their geometric-mean
fraction of those operators' optima (the top K), and if none reaches 90 % goes on as no memory (K + no memory's
steps, at most budget + 1). It says what transferring settings alone can give on a recording, however well memory
knew the earlier operators. And the recording cost: the seconds each space took (its outcomes' ``duration_s``), per
setting.

    python benchmarks/replay_bounds.py benchmarks/spaces --results OUT1/results.json OUT2/results.json ...

``--results`` also takes the ``repeat_steps.json`` that ``benchmarks/replay_compare.py extract`` writes.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from kope.agent.tuner import Tuner, settings_key
from kope.boundary import suite_tasks, templates_for_target
from kope.evaluators.space import SpaceFile, read_spaces


def speed(entry: dict) -> float:
    o = entry["outcome"]
    return float(o["speedup"]) if o["status"] == "correct" and o.get("speedup") else 0.0


def no_memory_steps(paths: list[Path], budget: int = 8) -> dict[str, float]:
    """Mean steps to 90 % of each operator's recorded optimum without memory, over a bench's repeats."""
    steps: dict[str, list[int]] = defaultdict(list)
    for path in paths:
        data = json.loads(path.read_text())
        if "per_operator_steps" in data:  # replay_compare.py's extract
            for op, configs in data["per_operator_steps"].items():
                steps[op].extend(configs.get("no-memory", []))
            continue
        optima = data["optima"]
        for pair in data["pairs"]:
            if pair["config"] != "no-memory" or pair["operator"] not in optima:
                continue
            target = 0.9 * optima[pair["operator"]]
            hits = [
                a["step"]
                for a in pair["attempts"]
                if a.get("status") == "correct" and (a.get("speedup") or 0) >= target
            ]
            steps[pair["operator"]].append(min(hits) + 1 if hits else budget + 1)
    return {op: statistics.fmean(v) for op, v in steps.items()}


def keyed(space: SpaceFile, reader: SpaceFile) -> list[tuple[str, float]]:
    """``space``'s recorded settings as ``reader``'s operator reads them (its template's relevant knobs pinned, a
    ``settings_key`` each), with their speeds."""
    pin = Tuner(templates_for_target("cpu")[reader.template]).space.pin
    return [(settings_key(pin(reader.served_as, e["settings"])), speed(e)) for e in space.settings]


def shared_optimum(space: SpaceFile, earlier: list[SpaceFile]) -> bool:
    """Some setting within 90 % of ``space``'s optimum is within 90 % of an earlier space's optimum too (both
    read in ``space``'s relevant knobs: what memory could transfer at its first step)."""
    best = max(speed(e) for e in space.settings)
    good = {key for key, v in keyed(space, space) if v >= 0.9 * best}
    for other in earlier:
        top = max(speed(e) for e in other.settings)
        if any(v >= 0.9 * top and key in good for key, v in keyed(other, space)):
            return True
    return False


def consensus_steps(space: SpaceFile, earlier: list[SpaceFile], top: int, alone: float, budget: int = 8) -> float:
    """Steps to 90 % of ``space``'s optimum for the consensus policy (module docstring): its recorded settings
    ranked by the mean log fraction of each earlier space's optimum they reached there (those that measured
    them), the top ``top`` tried in turn, then no memory's ``alone`` steps after them."""
    mine: dict[str, float] = {}
    for key, v in keyed(space, space):
        mine[key] = max(mine.get(key, 0.0), v)
    best = max(mine.values())
    scores: dict[str, list[float]] = defaultdict(list)
    for other in earlier:
        optimum = max(speed(e) for e in other.settings)
        for key, v in keyed(other, space):
            if key in mine:
                scores[key].append(math.log(max(v, 1e-3) / optimum))
    ranked = sorted(scores, key=lambda k: (-statistics.fmean(scores[k]), -len(scores[k]), k))
    for index, key in enumerate(ranked[:top]):
        if mine[key] >= 0.9 * best:
            return float(index + 1)
    return min(float(budget + 1), top + alone)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--results", type=Path, nargs="*", default=[])
    parser.add_argument("--top", type=int, default=2, help="settings the consensus policy tries (default 2)")
    args = parser.parse_args(argv)
    if args.top < 1:
        parser.error("--top takes a count of at least 1")
    spaces = read_spaces(args.folder)
    order = {t.operator: i for i, t in enumerate(suite_tasks(None))}
    nomem = no_memory_steps(args.results)
    totals = {"nomem": 0.0, "perfect": 0.0, "shared": 0.0, "consensus": 0.0, "ops": 0}
    for family in sorted({s.family for s in spaces}):
        fam = sorted((s for s in spaces if s.family == family), key=lambda s: order.get(s.operator, 999))
        print(f"## {family}")
        sums = {"nomem": 0.0, "perfect": 0.0, "shared": 0.0, "consensus": 0.0, "ops": 0}
        seen: set[str] = set()
        for index, s in enumerate(fam):
            values = [speed(e) for e in s.settings]
            best = max(values)
            default = values[0]
            near = sum(1 for v in values if v >= 0.9 * best)
            seconds = sum(float(e["outcome"].get("duration_s") or 0.0) for e in s.settings)
            grid = s.design.get("grid_size") if isinstance(s.design, dict) else None
            transfer = s.template in seen
            same = [e for e in fam[:index] if e.template == s.template]
            shared = transfer and shared_optimum(s, same)
            seen.add(s.template)
            steps = nomem.get(s.operator)
            line = (
                f"  {s.operator:20s} {s.template:14s} settings {len(values):2d}/{grid or '-':>4} "
                f"defaults {default / best:4.2f} of optimum, {near:2d} setting(s) >= 90%, "
                f"recorded in {seconds:5.0f} s ({seconds / len(values):4.1f} s/setting)"
            )
            if index == 0:
                print(line + "  (first: not counted)")
                continue
            if steps is not None:
                perfect = 1.0 if transfer else steps
                sums["nomem"] += steps
                sums["perfect"] += perfect
                sums["shared"] += 1.0 if shared else steps
                consensus = consensus_steps(s, same, args.top, steps) if transfer else steps
                sums["consensus"] += consensus
                sums["ops"] += 1
                line += f"; no memory {steps:4.2f} steps, perfect memory {perfect:4.2f}" + (
                    "" if transfer else " (no earlier operator of its template)"
                )
                if transfer:
                    line += ", optimum shared" if shared else ", no shared optimum"
                    line += f", consensus top {args.top} {consensus:4.2f}"
            print(line)
        if sums["ops"]:
            print(
                f"  later operators {sums['ops']}: no memory {sums['nomem'] / sums['ops']:.2f} steps, perfect memory "
                f"{sums['perfect'] / sums['ops']:.2f}: ratio bound {sums['perfect'] / sums['nomem']:.2f}; shared "
                f"optimum {sums['shared'] / sums['ops']:.2f}: ratio bound {sums['shared'] / sums['nomem']:.2f}; "
                f"consensus top {args.top} {sums['consensus'] / sums['ops']:.2f}: ratio "
                f"{sums['consensus'] / sums['nomem']:.2f}"
            )
            for key in totals:
                totals[key] += sums[key]
    if totals["ops"]:
        print(
            f"overall ({totals['ops']:.0f} later operators): no memory {totals['nomem'] / totals['ops']:.2f}, perfect "
            f"memory {totals['perfect'] / totals['ops']:.2f}: ratio bound {totals['perfect'] / totals['nomem']:.2f}; "
            f"shared optimum {totals['shared'] / totals['ops']:.2f}: ratio bound {totals['shared'] / totals['nomem']:.2f}; "
            f"consensus top {args.top} {totals['consensus'] / totals['ops']:.2f}: ratio "
            f"{totals['consensus'] / totals['nomem']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
