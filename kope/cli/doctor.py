"""``kope doctor``: one table of what this machine has and lacks."""

from __future__ import annotations

import click
from rich.table import Table

from kope.cli._common import State, out, pass_state, print_json
from kope.doctor import run_checks

MARK = {
    "ok": "[green]ok[/green]",
    "missing": "[red]missing[/red]",
    "optional": "[yellow]absent[/yellow]",
    "info": "info",
}


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@click.option("--strict", is_flag=True, help="Exit 1 when a required component is missing.")
@pass_state
def command(state: State, as_json: bool, strict: bool) -> None:
    """Check Python, torch/GPU, Triton, C++/OpenMP, Java, Maven, Docker, Neo4j and the LLM endpoint."""
    checks = run_checks(state.config)
    if as_json:
        print_json([c.to_dict() for c in checks])
    else:
        table = Table(title="kope doctor", title_justify="left")
        table.add_column("component", style="bold")
        table.add_column("status")
        table.add_column("detail")
        table.add_column("fix", style="cyan")
        for check in checks:
            table.add_row(check.name, MARK[check.level], check.detail, check.fix or "")
        out.print(table)
    if strict and any(c.level == "missing" for c in checks):
        raise SystemExit(1)
