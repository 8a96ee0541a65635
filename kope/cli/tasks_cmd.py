"""``kope tasks``: the built-in operator suite (list, show, check)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from kope.cli._common import KopeGroup, out, print_json
from kope.targets import harness_error

FAMILIES = ("elementwise", "reduction", "normalization", "matmul", "convolution", "fused", "block")


@click.group("tasks", cls=KopeGroup)
def command() -> None:
    """The built-in operator suite: tasks (KernelBench-format references with cases) and example candidates."""


def _suite():
    from harness import suite

    return suite


@command.command("list")
@click.option("--family", type=click.Choice(FAMILIES), default=None, help="Only this family.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def list_cmd(family: str | None, as_json: bool) -> None:
    """List every built-in task: operator, family, level, cases, and whether a cpu example candidate ships."""
    from harness.errors import HarnessError

    suite = _suite()
    try:
        tasks = suite.list_tasks(family)
    except HarnessError as exc:
        raise harness_error(exc) from None
    candidates = suite.list_candidates("cpu")
    if as_json:
        print_json(
            [
                t.to_dict() | {"cpu_candidate": str(candidates[t.operator]) if t.operator in candidates else None}
                for t in tasks
            ]
        )
        return
    table = Table(title=f"{len(tasks)} built-in tasks", title_justify="left")
    # One line per task: the description is cut to the terminal's width (`kope tasks show` has it whole).
    from harness.suite.kernel_templates import template_for

    rows = []
    for t in tasks:
        template = template_for(t.operator, "cpu")
        rows.append(
            (
                t.operator,
                t.family,
                str(t.level),
                str(len(t.cases)),
                "yes" if t.operator in candidates else "",
                template.name if template else "",
                t.description,
            )
        )
    names = ("operator", "family", "L", "cases", "example", "template", "description")
    widths = [max(len(name), *(len(r[i]) for r in rows)) for i, name in enumerate(names[:-1])]
    room = max(12, out.width - sum(widths) - 3 * len(names) - 1)  # what the borders and padding leave
    for name, width in zip(names, [*widths, room]):
        table.add_column(
            name, no_wrap=True, overflow="ellipsis", max_width=width, min_width=None if name == "description" else width
        )
    for row in rows:
        table.add_row(*row)
    out.print(table)


@command.command("show")
@click.argument("task")
@click.option("--source", is_flag=True, help="Also print the task file.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def show_cmd(task: str, source: bool, as_json: bool) -> None:
    """Show one task (a built-in operator name or a task file): metadata, cases, files."""
    from harness.errors import HarnessError

    suite = _suite()
    try:
        info = suite.find_task(task)
    except HarnessError as exc:
        raise harness_error(exc) from None
    candidate = suite.find_candidate(info.operator)
    if as_json:
        print_json(info.to_dict() | {"cpu_candidate": str(candidate) if candidate else None})
        return
    out.print(f"[bold]{info.operator}[/bold] · {info.family} · level {info.level}")
    out.print(info.description)
    out.print(f"task file: {info.path}")
    out.print(f"cpu example candidate: {candidate or 'none'}")
    table = Table(title=f"{len(info.cases)} cases", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("name")
    table.add_column("parameters")
    for c in info.cases:
        table.add_row(str(c.index), c.name, json.dumps(c.params))
    out.print(table)
    if source:
        out.print(info.path.read_text(), markup=False, highlight=False)


@command.command("check")
@click.argument("tasks", nargs=-1)
@click.option("--time", "measure", is_flag=True, help="Also time each case's reference (median of 5 warm calls).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def check_cmd(tasks: tuple[str, ...], measure: bool, as_json: bool) -> None:
    """Validate task files and run every case's reference once in a fresh process (default: all built-in tasks)."""
    from harness.errors import HarnessError
    from harness.task_check import check_task

    suite = _suite()
    report: list[dict[str, Any]] = []
    failed = 0
    try:
        names = list(tasks) or [t.operator for t in suite.list_tasks()]
        for name in names:
            task, checks = check_task(suite.find_task(name).path, measure=measure)
            failed += sum(not c.ok for c in checks)
            report.append({"task": task.operator, "path": str(task.path), "cases": [c.to_dict() for c in checks]})
    except HarnessError as exc:
        raise harness_error(exc) from None
    if as_json:
        print_json(report)
    else:
        table = Table(title_justify="left")
        for name in ("task", "case", "result", "outputs", "ref ms", "note"):
            table.add_column(name, overflow="fold")
        for entry in report:
            for c in entry["cases"]:
                note = c["error"] or (f"degenerate reference: {c['degenerate']}" if c["degenerate"] else "")
                table.add_row(
                    entry["task"],
                    c["name"],
                    "[green]ok[/green]" if c["ok"] else "[red]FAIL[/red]",
                    " ".join(c["outputs"] or []),
                    "" if c["ref_ms"] is None else f"{c['ref_ms']:.2f}",
                    note,
                )
        out.print(table)
    if failed:
        raise SystemExit(1)
