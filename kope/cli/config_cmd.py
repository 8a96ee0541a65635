"""``kope config``: the effective configuration."""

from __future__ import annotations

import click
from rich.table import Table

from kope.cli._common import KopeGroup, State, out, pass_state, print_json
from kope.config import ENV_VARS


@click.group("config", cls=KopeGroup)
def command() -> None:
    """Inspect KOPE's configuration (KOPE_* variables > kope.toml > defaults)."""


@command.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_state
def show(state: State, as_json: bool) -> None:
    """Print the effective configuration, secrets masked."""
    data = state.config.masked()
    if as_json:
        print_json(data)
        return
    env_for = {(sec or "", key): name for name, (sec, key) in ENV_VARS.items()}
    table = Table(title=f"KOPE configuration (file: {data['source_file'] or 'none'})", title_justify="left")
    table.add_column("setting", style="bold")
    table.add_column("value")
    table.add_column("environment variable", style="dim")
    for key, value in data.items():
        if isinstance(value, dict):
            for sub, subval in value.items():
                table.add_row(f"{key}.{sub}", "" if subval is None else str(subval), env_for.get((key, sub), ""))
        elif key != "source_file":
            table.add_row(key, "" if value is None else str(value), env_for.get(("", key), ""))
    out.print(table)
