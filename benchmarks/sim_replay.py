"""The learning bench on recorded spaces, in process, for developing the proposer: minutes instead of half an hour.

It drives ``kope.agent.tuner.Tuner.plan`` the way the loop and the offline proposer do (the parent is the
incumbent, the first step starts from nothing; no backtracking, no kernel-hash check) over every operator of
a family in order, with memory (the earlier operators' attempts of the same template) or without, the records in
the order the bench's retrieval returns them (``bench_order``), and prints the bench's figures: steps to 90% of
each space's optimum on the 2nd and later operators (a miss counts budget + 1), severe regressions (a step >= 3x
slower than its parent) and the best at the budget. Seed k is the bench's repeat k + 1. Since 6 Dec (issue 34,
nineteenth round) it takes the bench's steps setting by setting (20 repeats, every family, both recordings: the
eighteenth round's bench figures to the last digit; tests/e2e/test_replay_spaces.py::test_the_simulation_takes_the_benchs_steps_setting_by_setting).
It needs no Neo4j; the figures a claim rests on still come from `kope bench --evaluator replay:DIR`
(docs/learning.md), which also exercises the loop, memory and Neo4j.

    python benchmarks/sim_replay.py DIR [--family F] [--steps 8] [--repeats 8] [--per-operator] [--set NAME=VALUE]

DIR is a folder of recorded spaces (``benchmarks/spaces``, ``benchmarks/spaces-r2``). ``--set`` overrides a constant
of ``kope.agent.tuner.tuner`` for the run (e.g. ``--set UNSEEN_SD=1.0``), to try a variant without editing the code.
With memory, an operator whose template has no earlier operator in the family reads the family's other templates
(as ``kope.memory.tuning``'s related templates do); ``--no-related`` leaves them out. The overall ratio is the
bench's (``benchmarks/replay_overall.py``): per repeat, the operator-weighted sum of memory's steps over no memory's,
averaged over the repeats.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from kope.agent.tuner import Tuner, settings_key
from kope.boundary import suite_tasks, templates_for_target
from kope.evaluators.space import SpaceFile, read_spaces
from kope.memory.shapes import CaseShape, ShapeSummary, case_shape
from kope.memory.tuning import CaseSpeed, HardwareFacts, TuningRecord


def records_of(space: SpaceFile, entry: dict, run_id: str, step: int, own: bool, ident: str) -> TuningRecord:
    outcome = entry["outcome"]
    cases = []
    for c in outcome["cases"]:
        shape = case_shape({"name": c["name"], **c["params"]})
        cases.append(CaseSpeed(c["name"], shape.key, bool(c["passed"]), c.get("speedup")))
    summary = ShapeSummary.of([CaseShape.from_key(c.shape) for c in cases if c.shape])
    hw = space.hardware.to_dict()
    return TuningRecord(
        id=ident,
        run_id=run_id,
        step=step,
        operator=space.served_as,
        family=space.family,
        hw_id=str(hw["id"]),
        hw_class=str(hw["class"]),
        vendor=str(hw["vendor"]),
        settings=dict(entry["settings"]),
        status=outcome["status"],
        error_kind=outcome.get("error_kind"),
        a=outcome.get("speedup") if outcome["status"] == "correct" else None,
        code_hash=entry.get("kernel"),
        shape_class=summary.shape_class if summary else None,
        cases=tuple(cases),
        own=own,
        hardware_tier="hardware",
        template=space.template,
    )


def bench_order(
    own: list[TuningRecord], mine: list[TuningRecord], memory: list[TuningRecord], shapes: list[CaseShape]
) -> list[TuningRecord]:
    """The records in the order the bench's retrieval returns them (``cypher/memory/retrieve/tuning_records`` and
    ``tuning_related``: this run's own first, then by shape (same case-set signature, same shape class, other), then
    newest first; every record here is of the same machine and, within a repeat, no other run of the operator). The
    cost model's fit depends on the order of its rows: in the bench's order the simulation reproduces the bench's
    proposals (in step order it did not: matmul on spaces-r2 moved the other way from the bench, 6 Dec)."""
    query = ShapeSummary.of(shapes)
    created = {id(r): i for i, r in enumerate(memory)}

    def shape_rank(r: TuningRecord) -> int:
        summary = ShapeSummary.of([CaseShape.from_key(c.shape) for c in r.cases if c.shape])
        if query and summary and summary.signature == query.signature:
            return 2
        return 1 if query and r.shape_class == query.shape_class else 0

    ordered = sorted(mine, key=lambda r: (-shape_rank(r), -created.get(id(r), 0), r.id))
    return sorted(own, key=lambda r: -r.step) + ordered


def run_family(spaces: list[SpaceFile], steps: int, seed: int, memory: bool, related: bool = True) -> list[dict]:
    templates = templates_for_target("cpu")
    memory_records: list[TuningRecord] = []
    out = []
    for index, space in enumerate(spaces):
        template = templates[space.template]
        tuner = Tuner(template, seed)
        hw = HardwareFacts.from_fingerprint(space.hardware)
        facts = {hw.id: hw}
        allowed = frozenset(space.done())
        entries = {settings_key(e["settings"]): e for e in space.settings}
        shapes = [case_shape({"name": c["name"], **c["params"]}) for c in space.settings[0]["outcome"]["cases"]]
        own: list[TuningRecord] = []
        trajectory = []  # (speedup, parent speedup)
        incumbent = None
        run_id = f"r{index}"
        for step in range(steps):
            mine = [r for r in memory_records if r.template == space.template] if memory else []
            if memory and related and not mine:
                # as kope.memory.tuning's related templates: the family's other templates stand in
                mine = [r for r in memory_records if r.template != space.template]
            records = bench_order(own, mine, memory_records, shapes)
            tried = {settings_key(tuner.space.pin(space.served_as, r.settings)) for r in own}
            base: dict[str, Any] | None = tuner.space.pin(space.served_as, incumbent[1]) if incumbent else None
            plan = tuner.plan(space.served_as, shapes, hw, records, facts, tried, base, allowed)
            if not plan.choices:
                break
            choice = plan.choices[0]
            entry = entries[settings_key(choice.settings)]
            rec = records_of(space, entry, run_id, step, True, f"{space.template}:{run_id}:{step}")
            parent = incumbent[0] if incumbent else 1.0
            trajectory.append((rec.a, parent, choice))
            own.append(rec)
            if rec.a and (incumbent is None or rec.a > incumbent[0]):
                incumbent = (rec.a, dict(choice.settings))
        memory_records.extend(
            TuningRecord(**{**r.__dict__, "own": False, "id": f"{space.template}:{r.run_id}:{r.step}"}) for r in own
        )
        optimum = space.optimum() or 0.0
        hit = next((i + 1 for i, (a, _, _) in enumerate(trajectory) if a and a >= 0.9 * optimum), None)
        severe = sum(1 for a, p, _ in trajectory if a and a * 3 <= p)
        best = max((a for a, _, _ in trajectory if a), default=None)
        out.append(
            {
                "operator": space.operator,
                "steps": hit if hit is not None else steps + 1,
                "severe": severe,
                "best": best,
                "optimum": optimum,
                "first": trajectory[0][2] if trajectory else None,
                "taken": len(trajectory),
                "trajectory": trajectory,
            }
        )
    return out


def mean_ci(values: list[float]) -> str:
    m = statistics.fmean(values)
    if len(values) < 2:
        return f"{m:.2f}"
    h = 1.96 * statistics.stdev(values) / math.sqrt(len(values))
    return f"{m:.2f} [{m - h:.2f}, {m + h:.2f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--family", action="append")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--per-operator", action="store_true", help="each later operator's mean steps and severe")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument(
        "--no-related", action="store_true", help="no related templates: memory is the template's own attempts only"
    )
    args = parser.parse_args(argv)
    from kope.agent.tuner import tuner as tuner_module

    for item in args.set:
        name, _, value = item.partition("=")
        if not hasattr(tuner_module, name):
            print(f"error: kope.agent.tuner.tuner has no constant {name!r}", file=sys.stderr)
            return 2
        setattr(tuner_module, name, type(getattr(tuner_module, name))(float(value)))
    spaces = read_spaces(args.folder)
    order = {t.operator: i for i, t in enumerate(suite_tasks(None))}  # the bench's order within a family
    families = sorted({s.family for s in spaces}) if not args.family else args.family
    # per repeat: (later operators, memory's steps summed, no memory's steps summed), over the families
    totals: dict[int, list[float]] = {r: [0, 0.0, 0.0] for r in range(args.repeats)}
    severe_total = {"memory": 0.0, "no-memory": 0.0}
    for family in families:
        fam = sorted((s for s in spaces if s.family == family), key=lambda s: order.get(s.operator, 999))
        per: dict[str, dict[str, list[float]]] = {}
        ops: dict[str, dict[str, list[tuple[int, int]]]] = {}
        for config in ("memory", "no-memory"):
            steps_r, severe_r, best_r = [], [], []
            for repeat in range(args.repeats):
                rows = run_family(fam, args.steps, repeat, config == "memory", not args.no_related)
                later = rows[1:]
                if not later:
                    continue
                steps_r.append(statistics.fmean(r["steps"] for r in later))
                severe_r.append(sum(r["severe"] for r in later))
                best_r.append(statistics.fmean(math.log(r["best"] or 1e-9) for r in later))
                totals[repeat][0] = totals[repeat][0] + (len(later) if config == "memory" else 0)
                totals[repeat][1 if config == "memory" else 2] += sum(r["steps"] for r in later)
                for r in later:
                    ops.setdefault(r["operator"], {}).setdefault(config, []).append((r["steps"], r["severe"]))
                if args.verbose:
                    print(config, repeat, [(r["operator"], r["steps"], r["severe"], r["taken"]) for r in rows])
                if args.trace:
                    for r in rows:
                        for i, (a, p, c) in enumerate(r["trajectory"]):
                            flag = "SEVERE" if a and a * 3 <= p else ""
                            pred = f"{c.predicted:.2f} [{c.low:.2f},{c.high:.2f}]" if c.predicted else "-"
                            knobs = ",".join(f"{k}={v}" for k, v in c.settings.items())
                            print(
                                f"  {config} r{repeat} {r['operator']} {i} {a:.2f} (opt {r['optimum']:.2f}) from "
                                f"{p:.2f} pred {pred} {c.basis} {flag} {knobs}"
                            )
            per[config] = {"steps": steps_r, "severe": severe_r, "best": best_r}
            severe_total[config] += sum(severe_r)
        if not per["memory"]["steps"]:
            continue
        paired = [math.exp(a - b) for a, b in zip(per["memory"]["best"], per["no-memory"]["best"])]
        print(
            f"{family} ({', '.join(s.operator for s in fam)}): steps memory {mean_ci(per['memory']['steps'])} "
            f"no-memory {mean_ci(per['no-memory']['steps'])}; severe {mean_ci(per['memory']['severe'])} vs "
            f"{mean_ci(per['no-memory']['severe'])}; paired {statistics.geometric_mean(paired):.3f}x"
        )
        if args.per_operator:
            for op, by in ops.items():
                m, x = by["memory"], by["no-memory"]
                print(
                    f"    {op:20s} steps {statistics.fmean(s for s, _ in m):.2f} / {statistics.fmean(s for s, _ in x):.2f}"
                    f"  severe {sum(v for _, v in m)} / {sum(v for _, v in x)}"
                )
    ratios = [m / x for n, m, x in totals.values() if n and x]
    if len(families) > 1 and ratios:
        print(
            f"overall steps ratio {mean_ci(ratios)} (per repeat, operator-weighted); severe regressions "
            f"{severe_total['memory'] / args.repeats:.2f} vs {severe_total['no-memory'] / args.repeats:.2f} per repeat"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
