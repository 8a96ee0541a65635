"""Shared CLI plumbing: the error boundary, the lazily loaded config, consoles."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click
from rich.console import Console

from kope.config import KopeConfig, load_config
from kope.errors import KopeError

# Tables and results go to stdout; progress and errors to stderr.
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class KopeCLIError(click.ClickException):
    """A KopeError shown as one line (plus an optional hint) with its exit code."""

    def __init__(self, error: KopeError) -> None:
        super().__init__(error.message)
        # click declares exit_code a class variable but reads it from the instance
        self.exit_code = error.exit_code  # type: ignore[misc]  # the per-error exit code (see above)
        self.hint = error.hint

    def show(self, file: Any = None) -> None:
        stream = file or sys.stderr
        click.echo(f"error: {self.message}", file=stream)
        if self.hint:
            click.echo(f"  hint: {self.hint}", file=stream)


class KopeUsageError(click.ClickException):
    """One of click's own usage errors (an unknown option or command, a value out of range, a missing argument)
    shown as KOPE shows a bad input: one ``error:`` line and a hint, exit status 2 (click's own format is a usage
    block and ``Error: ...``)."""

    exit_code = 2

    def __init__(self, error: click.UsageError) -> None:
        super().__init__(error.format_message())
        self.command = error.ctx.command_path if error.ctx is not None else "kope"

    def show(self, file: Any = None) -> None:
        stream = file or sys.stderr
        click.echo(f"error: {self.message}", file=stream)
        click.echo(f"  hint: `{self.command} --help` says what it takes", file=stream)


def _usage_error(exc: click.UsageError) -> click.ClickException:
    # "no arguments: show the help" is click's way of answering a bare group, not a mistake
    return exc if isinstance(exc, click.exceptions.NoArgsIsHelpError) else KopeUsageError(exc)


class KopeGroup(click.Group):
    """A click group whose commands turn KopeError, and click's usage errors, into one error line and an exit."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # this group's own options
            raise _usage_error(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KopeError as exc:
            raise KopeCLIError(exc) from None
        except click.UsageError as exc:  # a subcommand's options and arguments, or an unknown subcommand
            raise _usage_error(exc) from None

    def group(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", KopeGroup)
        return super().group(*args, **kwargs)


@dataclass
class State:
    overrides: dict[str, Any] = field(default_factory=dict)
    _config: KopeConfig | None = None

    @property
    def config(self) -> KopeConfig:
        if self._config is None:
            self._config = load_config(self.overrides)
        return self._config

    def override(self, **values: Any) -> None:
        """Apply command-level options (dotted keys) before the config is read."""
        for key, value in values.items():
            if value is not None:
                self.overrides[key] = value
                self._config = None


pass_state = click.make_pass_decorator(State, ensure=True)


def progress(message: str) -> None:
    err.print(f"[dim]›[/dim] {message}")


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def server_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options that select and shape the local Neo4j server."""

    @click.option("--data-dir", type=click.Path(file_okay=False), help="KOPE data directory (KOPE_DATA_DIR).")
    @click.option(
        "--bolt-port", type=click.IntRange(1, 65535), help="Bolt port of the local server (KOPE_NEO4J_BOLT_PORT)."
    )
    @click.option(
        "--http-port",
        type=click.IntRange(1, 65535),
        help="HTTP/Browser port of the local server (KOPE_NEO4J_HTTP_PORT).",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, data_dir: str | None, bolt_port: int | None, http_port: int | None, **kwargs: Any) -> Any:
        state = click.get_current_context().ensure_object(State)
        state.override(**{"data_dir": data_dir, "server.bolt_port": bolt_port, "server.http_port": http_port})
        return func(*args, **kwargs)

    return wrapper


def evaluator_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--evaluator``: where candidates are evaluated (the configuration's evaluator.backend, KOPE_EVALUATOR)."""
    return click.option(
        "--evaluator",
        default=None,
        metavar="local|URL[,URL...]|ray[://ADDRESS]|replay:DIR",
        help="Where candidates are evaluated: local (default), evaluation workers (`kope worker`) at "
        "http://HOST:PORT[,...] with KOPE_WORKER_KEY, or a Ray cluster: ray (RAY_ADDRESS or the one "
        "running here) or ray://HOST:PORT, or replay:DIR: the outcomes recorded in DIR by `kope bench record-space`, "
        "marked replayed (KOPE_EVALUATOR).",
    )(func)
