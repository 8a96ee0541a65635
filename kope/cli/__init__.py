"""The ``kope`` command: a thin click layer over the library.

Each command group lives in its own module and is registered below; commands
parse options, call the library, and print. ``KopeError`` becomes one line on
stderr and the error's exit code (see ``_common.KopeGroup``).
"""

from __future__ import annotations

import logging
import signal

import click

from kope import __version__
from kope.cli._common import KopeGroup, State


@click.group(cls=KopeGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="kope")
@click.option("-v", "--verbose", count=True, help="More logging on stderr (-vv for debug).")
@click.pass_context
def cli(ctx: click.Context, verbose: int) -> None:
    """KOPE: kernel optimization agents that learn from an Experience Graph in Neo4j."""
    ctx.ensure_object(State)
    if verbose:
        logging.basicConfig(
            level=logging.DEBUG if verbose > 1 else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
        )


def _register() -> None:
    from kope.cli import (
        bench_cmd,
        browser,
        config_cmd,
        context_cmd,
        db,
        doctor,
        eval_cmd,
        memory,
        optimize_cmd,
        serve_cmd,
        tasks_cmd,
        worker_cmd,
    )

    for module in (
        db,
        config_cmd,
        doctor,
        tasks_cmd,
        eval_cmd,
        context_cmd,
        optimize_cmd,
        bench_cmd,
        memory,
        browser,
        serve_cmd,
        worker_cmd,
    ):
        cli.add_command(module.command)


_register()


def main() -> None:
    # SIGTERM (`kill`, `timeout`, a job scheduler) stops a command as Ctrl-C does: a bench writes what it finished
    # and says how to resume it (exit 130), a run is marked interrupted, workers are closed. Python's default
    # ends the process at once, with none of that. A handler someone else installed (a server's) is kept.
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, signal.default_int_handler)
    cli(prog_name="kope")
