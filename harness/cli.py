"""``python -m harness``: the harness on its own (``kope eval`` / ``kope tasks`` wrap the same functions).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from harness.errors import HarnessError


def _add_eval_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="built-in operator name or path to a task file")
    p.add_argument("candidate", help="path to a candidate file defining ModelNew")
    p.add_argument("--target", default="cpu", help="cpu, triton or cuda (default cpu)")
    p.add_argument("--cases", default=None, help="case indices, ranges or names, comma-separated (default: all)")
    p.add_argument("--held-out", action="store_true", help="also run the task's held-out cases (final evaluation)")
    p.add_argument("--seeds", type=int, default=3, help="correctness trials per case (default 3)")
    p.add_argument(
        "--threads", type=int, default=None, help="fixed thread count (default and cap: the usable CPUs but one)"
    )
    p.add_argument("--no-timing", action="store_true", help="check correctness only")
    p.add_argument("--warmup-ms", type=float, default=25.0, help="warm-up budget per implementation and case")
    p.add_argument("--rep-ms", type=float, default=100.0, help="measured-time budget per implementation and case")
    p.add_argument("--seed", type=int, default=None, help="fix all seeds (reproducible inputs)")
    p.add_argument("--json", action="store_true", help="print the kope.outcome/1 JSON record")


def options_from_args(args: argparse.Namespace) -> Any:
    from harness.evaluate import EvalOptions
    from harness.timing import Budget

    return EvalOptions(
        target=args.target,
        cases=args.cases,
        case_set="all" if args.held_out else "visible",
        seeds=args.seeds,
        threads=args.threads,
        timing=not args.no_timing,
        budget=Budget(  # the soft wall-time limit per case scales with the measured time asked for
            warmup_ms=args.warmup_ms,
            rep_ms=args.rep_ms,
            case_wall_s=Budget().case_wall_s * args.rep_ms / Budget().rep_ms,
        ),
        seed=args.seed,
    )


def format_outcome(outcome: Any) -> str:
    """A plain-text report of an Outcome (the kope CLI renders a rich table instead)."""
    o = outcome
    hw = o.hardware
    lines = [
        f"{o.task} ({o.family}, level {o.level}) on {o.target}: {hw.class_} {hw.cpu_model if not hw.gpu else hw.gpu.name} "
        f"[{hw.id}], {o.threads} threads",
        "",
    ]
    lines.append(f"{'#':>3}  {'case':32} {'result':6} {'ref ms':>16} {'cand ms':>16} {'speedup':>8}")
    for c in o.cases:
        ref = f"{c.ref_ms.median:.3f}±{c.ref_ms.iqr:.3f}" if c.ref_ms else "-"
        cand = f"{c.cand_ms.median:.3f}±{c.cand_ms.iqr:.3f}" if c.cand_ms else "-"
        speed = f"{c.speedup:.2f}x" if c.speedup else "-"
        lines.append(
            f"{c.index:>3}  {c.name[:32]:32} {'pass' if c.passed else 'FAIL':6} {ref:>16} {cand:>16} {speed:>8}"
            + ("  (held-out)" if c.heldout else "")
        )
        if c.error:
            lines.append(f"       {c.error[:300]}")
    lines.append("")
    speed = f"{o.speedup:.3f}x" if o.speedup else "n/a"
    lines.append(
        f"status: {o.status.value}"
        + (f" ({o.error_kind})" if o.error_kind and o.error_kind != o.status.value else "")
        + f"   cases: {o.cases_passed}/{o.cases_total}   speedup (geomean): {speed}   "
        + f"compile: {o.compile_time_s if o.compile_time_s is not None else '-'} s   total: {o.duration_s} s"
    )
    if not o.timings_valid:
        lines.append("timings are not valid on this target here (e.g. the Triton interpreter): correctness only")
    if o.error_excerpt and o.status.value != "correct":
        lines += ["", o.error_excerpt]
    return "\n".join(lines)


def _cmd_eval(args: argparse.Namespace) -> int:
    from harness.evaluate import evaluate
    from harness.worker_pool import one_shot

    one_shot()  # one evaluation and exit: a worker booted for a next one would be wasted
    outcome = evaluate(args.task, args.candidate, options_from_args(args))
    print(outcome.to_json() if args.json else format_outcome(outcome))
    return 0 if outcome.ok else 1


def _cmd_tasks(args: argparse.Namespace) -> int:
    from harness.suite import find_candidate, find_task, list_tasks

    if args.tasks_cmd == "list":
        tasks = list_tasks(args.family)
        if args.json:
            print(
                json.dumps(
                    [t.to_dict() | {"cpu_candidate": str(find_candidate(t.operator) or "") or None} for t in tasks],
                    indent=2,
                )
            )
        else:
            for t in tasks:
                print(f"{t.operator:24} {t.family:14} L{t.level}  {len(t.cases):3} cases  {t.description[:70]}")
        return 0
    if args.tasks_cmd == "show":
        info = find_task(args.operator)
        if args.json:
            print(
                json.dumps(
                    info.to_dict() | {"cpu_candidate": str(find_candidate(info.operator) or "") or None}, indent=2
                )
            )
        else:
            print(f"{info.operator}: {info.description}\nfamily {info.family}, level {info.level}, file {info.path}")
            for c in info.cases:
                print(f"  {c.index:>2} {c.name:34} {json.dumps(c.params)}")
            if info.heldout_cases:
                print(f"  {len(info.heldout_cases)} held-out cases (final evaluation only; not shown)")
        return 0
    from harness.task_check import check_task

    names = args.task or [t.operator for t in list_tasks()]
    failed = 0
    report = []
    for name in names:
        task, checks = check_task(find_task(name).path, measure=args.time)
        failed += sum(not c.ok for c in checks)
        report.append({"task": task.operator, "path": str(task.path), "cases": [c.to_dict() for c in checks]})
        if not args.json:
            for check in checks:
                ms = f"{check.ref_ms:8.2f} ms" if check.ref_ms is not None else ""
                status = "ok" if check.ok else "FAIL"
                print(
                    f"{task.operator:20} {check.name:34} {status:4} {ms} {' '.join(check.outputs or [])} "
                    f"{check.error or ''}" + (f" (degenerate: {check.degenerate})" if check.degenerate else "")
                )
    if args.json:
        print(json.dumps(report, indent=2))
    return 1 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    from harness.serve.cli import add_parser as add_serve_parser

    parser = argparse.ArgumentParser(prog="python -m harness", description="KOPE's evaluation harness")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_eval_options(sub.add_parser("eval", help="compile, check and time a candidate against a task"))
    tasks = sub.add_parser("tasks", help="the built-in operator suite")
    tsub = tasks.add_subparsers(dest="tasks_cmd", required=True)
    p = tsub.add_parser("list", help="list the built-in tasks")
    p.add_argument("--family", default=None)
    p.add_argument("--json", action="store_true")
    p = tsub.add_parser("show", help="one task: metadata and cases")
    p.add_argument("operator")
    p.add_argument("--json", action="store_true")
    p = tsub.add_parser("check", help="validate task files and run each case's reference once")
    p.add_argument("task", nargs="*", help="operator names or task files (default: every built-in task)")
    p.add_argument("--time", action="store_true", help="also time each case's reference")
    p.add_argument("--json", action="store_true")
    add_serve_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            from harness.serve.cli import run

            return run(args)
        return _cmd_eval(args) if args.command == "eval" else _cmd_tasks(args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
