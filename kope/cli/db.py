"""``kope db``: the local Neo4j server (start, stop, status, logs)."""

from __future__ import annotations

import time

import click
from rich.table import Table

from kope.cli._common import KopeGroup, State, err, out, pass_state, print_json, progress, server_options
from kope.db.local import LocalNeo4j, ServerStatus


@click.group("db", cls=KopeGroup)
def command() -> None:
    """Run and inspect the local Neo4j server that holds the Experience Graph."""


def _show(status: ServerStatus, as_json: bool) -> None:
    if as_json:
        print_json(status.to_dict())
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    state = "[green]running[/green]" if status.running else "[yellow]not running[/yellow]"
    if status.reused:
        state += " (reused)"
    rows = [
        ("state", state),
        ("pid", status.pid),
        (
            "version",
            f"Neo4j {status.version}" + (f" {status.edition}" if status.edition else "") if status.version else None,
        ),
        ("bolt", status.bolt_uri),
        ("http", status.http_url),
        ("browser", status.browser_url),
        ("data dir", status.data_dir),
        ("log", status.log_file),
        ("nodes", status.nodes),
        ("relationships", status.relationships),
    ]
    for key, value in rows:
        if value is not None:
            table.add_row(key, str(value))
    for note in status.notes:
        table.add_row("note", note)
    out.print(table)


@command.command("start")
@server_options
@click.option("--docker", is_flag=True, help="Use docker/compose.yml (neo4j:5.26-community) instead of Java + Maven.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@pass_state
def start(state: State, docker: bool, as_json: bool) -> None:
    """Provision (first time) and start the server; reuse it if already running."""
    began = time.monotonic()
    if docker:
        from kope.db.docker import DockerNeo4j

        status = DockerNeo4j(state.config, progress).start()
    else:
        status = LocalNeo4j(state.config, progress).start()
    if not status.reused:
        progress(f"Neo4j is up ({time.monotonic() - began:.1f} s)")
    _show(status, as_json)


@command.command("stop")
@server_options
@click.option("--docker", is_flag=True, help="Stop the Docker Compose server.")
@pass_state
def stop(state: State, docker: bool) -> None:
    """Stop the server (SIGTERM, then SIGKILL after the stop timeout)."""
    if docker:
        from kope.db.docker import DockerNeo4j

        DockerNeo4j(state.config, progress).stop()
        out.print("stopped")
        return
    stopped = LocalNeo4j(state.config, progress).stop()
    out.print("stopped" if stopped else "not running")


@command.command("status")
@server_options
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@pass_state
def status(state: State, as_json: bool) -> None:
    """Running or not, version, ports, Browser URL, data dir, node and relationship counts."""
    _show(LocalNeo4j(state.config, progress).status(), as_json)


@command.command("logs")
@server_options
@click.option("-n", "--lines", default=50, show_default=True, type=click.IntRange(1, 100_000), help="How many lines.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C to stop).")
@pass_state
def logs(state: State, lines: int, follow: bool) -> None:
    """Print the end of the server log (neo4j.log, plus JVM output)."""
    server = LocalNeo4j(state.config, progress)
    tail = server.log_tail(lines)
    if not tail:
        err.print(f"no log yet at {server.log_file}")
        return
    for line in tail:
        click.echo(line)
    if follow:
        with open(server.log_file, encoding="utf-8", errors="replace") as handle:
            handle.seek(0, 2)
            try:
                while True:
                    line = handle.readline()
                    if line:
                        click.echo(line.rstrip("\n"))
                    else:
                        time.sleep(0.5)
            except KeyboardInterrupt:
                pass
