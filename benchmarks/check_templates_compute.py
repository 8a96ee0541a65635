"""Render the compute templates (matmul, convolution, fused, block) and evaluate them with the real harness.

For every operator a template serves, each selected knob setting is rendered
to a candidate file and evaluated on every case of the operator's task
(correctness only unless ``--time``); a table of the outcomes follows, and the
exit status is 1 when any setting fails.

Which settings:

* default: every combination when a template has at most 24, else a pairwise
  covering set: every pair of values of every two knobs appears in at least
  one setting (so every value of every knob is checked with every operator,
  and every pair of interacting knobs together);
* ``--pairwise``: the pairwise covering set for every template;
* ``--all-combinations``: the full product of the knob values;
* ``--defaults``: only the default setting.

    PYTHONPATH=$PWD python benchmarks/check_templates_compute.py [--family F] [--template T] [--operator OP]
        [--all-combinations | --pairwise | --defaults] [--time] [--seeds N] [--cases SPEC] [--json FILE]

Timings (``--time``) are medians over the harness's interleaved repetitions on
this shared, noisy machine: read them as rough speedups.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.suite.kernel_templates import KernelTemplate, list_templates

FAMILIES = ("matmul", "convolution", "fused", "block")
SMALL = 24  # templates with at most this many knob combinations are checked exhaustively by default


def pairwise_settings(template: KernelTemplate) -> list[dict]:
    """A small set of settings covering every pair of values of every two knobs (greedy), defaults first."""
    knobs = template.knobs
    uncovered = {
        (a, va, b, vb)
        for a, b in itertools.combinations(range(len(knobs)), 2)
        for va in knobs[a].values
        for vb in knobs[b].values
    }
    rows = [tuple(k.default for k in knobs)]
    while True:
        uncovered -= {(a, rows[-1][a], b, rows[-1][b]) for a, b in itertools.combinations(range(len(knobs)), 2)}
        if not uncovered:
            break
        # Start from the first uncovered pair, then fill each other knob with the value covering most pairs.
        a, va, b, vb = min(uncovered, key=repr)
        row: list = [None] * len(knobs)
        row[a], row[b] = va, vb
        for i, knob in enumerate(knobs):
            if row[i] is not None:
                continue

            def gain(value, i=i, row=row, uncovered=uncovered):
                return sum(
                    1
                    for j, vj in enumerate(row)
                    if vj is not None
                    and ((min(i, j), value if i < j else vj, max(i, j), vj if i < j else value) in uncovered)
                )

            row[i] = max(knob.values, key=gain)
        rows.append(tuple(row))
    return [dict(zip((k.name for k in knobs), row)) for row in rows]


def all_settings(template: KernelTemplate) -> list[dict]:
    names = [k.name for k in template.knobs]
    return [dict(zip(names, values)) for values in itertools.product(*(k.values for k in template.knobs))]


def compact(settings: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in settings.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, action="append", help="only these families (repeatable)")
    parser.add_argument("--template", action="append", help="only these templates (repeatable)")
    parser.add_argument("--operator", action="append", help="only these operators (repeatable)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--all-combinations", action="store_true", help="every combination of knob values")
    mode.add_argument("--pairwise", action="store_true", help="a pairwise covering set of knob values")
    mode.add_argument("--defaults", action="store_true", help="only the default settings")
    parser.add_argument("--time", action="store_true", help="also time the cases (speedup vs the PyTorch reference)")
    parser.add_argument("--seeds", type=int, default=3, help="correctness trials per case (default 3)")
    parser.add_argument("--cases", help="case selection passed to the harness (indices, ranges or names)")
    parser.add_argument("--json", type=Path, help="write every outcome summary to this file")
    args = parser.parse_args(argv)

    families = set(args.family or FAMILIES)
    templates = [
        t for t in list_templates("cpu") if t.family in families and (not args.template or t.name in args.template)
    ]
    jobs = []
    for template in templates:
        every = all_settings(template)
        if args.defaults:
            settings_list, how = [template.default_settings()], "defaults"
        elif args.all_combinations or (not args.pairwise and len(every) <= SMALL):
            settings_list, how = every, "all combinations"
        else:
            settings_list, how = pairwise_settings(template), "pairwise covering set"
        print(
            f"{template.name}: {len(settings_list)} settings ({how} of {len(every)}) x "
            f"{len(template.operators)} operators",
            flush=True,
        )
        for operator in template.operators:
            if args.operator and operator not in args.operator:
                continue
            jobs += [(template, operator, settings) for settings in settings_list]
    if not jobs:
        print("nothing selected", file=sys.stderr)
        return 2
    print(f"{len(jobs)} evaluations ({len(templates)} templates)", flush=True)

    results, failures = [], 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kope-templates-") as tmp:
        for n, (template, operator, settings) in enumerate(jobs, 1):
            path = Path(tmp) / f"{operator}_{n}.py"
            path.write_text(template.render(operator, settings))
            options = EvalOptions(timing=args.time, seeds=args.seeds, cases=args.cases)
            outcome = evaluate(operator, path, options)
            ok = outcome.status.value == "correct"
            failures += not ok
            failed = [c for c in outcome.cases if not c.passed and not (c.error or "").startswith("not run")]
            detail = (
                ""
                if ok
                else (outcome.error_kind or "")
                + (
                    f" [{failed[0].name}: {(failed[0].error or '')[:160]}]"
                    if failed
                    else f" {(outcome.error_excerpt or '')[:300]}"
                )
            )
            speed = f"{outcome.speedup:.2f}x" if outcome.speedup else "-"
            print(
                f"[{n}/{len(jobs)}] {template.name:16} {operator:22} {outcome.status.value:14} "
                f"{outcome.cases_passed}/{outcome.cases_total} {speed:>7} {outcome.duration_s:6.1f}s  "
                f"{compact(settings)}  {detail}",
                flush=True,
            )
            results.append(
                {
                    "template": template.name,
                    "operator": operator,
                    "settings": settings,
                    "status": outcome.status.value,
                    "error_kind": outcome.error_kind,
                    "cases_passed": outcome.cases_passed,
                    "cases_total": outcome.cases_total,
                    "speedup": outcome.speedup,
                    "duration_s": outcome.duration_s,
                    "cases": [
                        {"name": c.name, "passed": c.passed, "error": c.error, "speedup": c.speedup}
                        for c in outcome.cases
                    ],
                }
            )
    elapsed = time.monotonic() - started
    print(
        f"\n{len(jobs) - failures}/{len(jobs)} settings correct on every case, {failures} failing "
        f"({elapsed / 60:.1f} min)"
    )
    by_op: dict[str, list] = {}
    for r in results:
        by_op.setdefault(r["operator"], []).append(r)
    print(f"{'operator':24} {'settings':>8} {'correct':>8} {'best speedup':>13}")
    for op, rs in by_op.items():
        best = max((r["speedup"] for r in rs if r["speedup"]), default=None)
        print(
            f"{op:24} {len(rs):8} {sum(r['status'] == 'correct' for r in rs):8} {(f'{best:.2f}x' if best else '-'):>13}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
