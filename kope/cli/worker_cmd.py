"""``kope worker``: the evaluation worker service on this host (a thin wrapper of ``python -m harness serve``)."""

from __future__ import annotations

import click


@click.command(
    "worker",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Serve evaluations on this host for `--evaluator http://HOST:PORT` (options: `kope worker --help`).

    The same service as `python -m harness serve`: bearer-key auth (KOPE_WORKER_KEY), 127.0.0.1 by default,
    one evaluation running on each device at a time, /health with the queue and the hardware."""
    from kope.boundary import serve_worker

    raise SystemExit(serve_worker(args, prog="kope worker"))
