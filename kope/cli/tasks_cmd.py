"""``kope tasks``: the built-in operator suite (list, show, check)."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Table

from kope.boundary import (
    FAMILIES,
    check_task,
    find_candidate,
    find_task,
    is_match,
    list_candidates,
    structure_summary,
    suite_tasks,
    task_structure,
    template_for,
)
from kope.cli._common import KopeGroup, out, print_json


@click.group("tasks", cls=KopeGroup)
def command() -> None:
    """The built-in operator suite: tasks (KernelBench-format references with cases) and example candidates."""


@command.command("list")
@click.option("--family", type=click.Choice(FAMILIES), default=None, help="Only this family.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def list_cmd(family: str | None, as_json: bool) -> None:
    """List every built-in task: operator, family, level, cases, and whether a cpu example candidate ships."""
    tasks = suite_tasks(family)
    candidates = list_candidates("cpu")
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
    info = find_task(task)
    candidate = find_candidate(info.operator)
    structure = task_structure(info.path, info.operator)
    if as_json:
        print_json(
            info.to_dict()
            | {"cpu_candidate": str(candidate) if candidate else None, "structure": structure_summary(structure)}
        )
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
    _print_structure(structure)
    if source:
        out.print(info.path.read_text(), markup=False, highlight=False)


def _print_structure(match: Any) -> None:
    """The traced structure: the template that serves it and every binding, or why nothing does."""
    if not is_match(match):
        out.print(f"structure: no kernel template serves it: {match.explanation()}", markup=False)
        return
    how = "its own built-in candidate" if match.native else "adapted to the task's constructor and shapes"
    out.print(f"structure: {match.structure} · template {match.template} ({how}) · family {match.family}", markup=False)
    table = Table(title="bindings", title_justify="left")
    for name in ("stage", "what", "tensors", "scalars"):
        table.add_column(name, overflow="fold")
    for i, stage in enumerate(match.stages):
        what = f"{stage.template}.{stage.operator}" if stage.kind == "template" else stage.kind
        tensors = ", ".join(f"{k}={v.source}:{v.name}" for k, v in stage.tensors.items())
        scalars = ", ".join(f"{k}={v.expr} ({v.source})" for k, v in stage.scalars.items())
        table.add_row(str(i), what, tensors or "-", scalars or "-")
    out.print(table)


@command.command("check")
@click.argument("tasks", nargs=-1)
@click.option("--time", "measure", is_flag=True, help="Also time each case's reference (median of 5 warm calls).")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def check_cmd(tasks: tuple[str, ...], measure: bool, as_json: bool) -> None:
    """Validate task files and run every case's reference once in a fresh process (default: all built-in tasks)."""
    report: list[dict[str, Any]] = []
    failed = 0
    names = list(tasks) or [t.operator for t in suite_tasks()]
    for name in names:
        task, checks = check_task(find_task(name).path, measure=measure)
        failed += sum(not c.ok for c in checks)
        report.append({"task": task.operator, "path": str(task.path), "cases": [c.to_dict() for c in checks]})
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
