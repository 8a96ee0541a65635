"""``kope serve``: the shared memory server, and its registry (keys, namespaces, audit) on the server host."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from kope.cli._common import KopeGroup, State, out, print_json


def _registry_path(state: State, explicit: str | None) -> Path:
    return Path(explicit) if explicit else Path(state.config.data_dir) / "server" / "registry.sqlite3"


def registry_option(func: Callable[..., Any]) -> Callable[..., Any]:
    @click.option(
        "--registry",
        "registry_file",
        type=click.Path(dir_okay=False),
        envvar="KOPE_SERVER_REGISTRY",
        help="The server's registry file (KOPE_SERVER_REGISTRY; default <data dir>/server/registry.sqlite3).",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, registry_file: str | None, **kwargs: Any) -> Any:
        state = click.get_current_context().ensure_object(State)
        return func(*args, registry=lambda: _open_registry(_registry_path(state, registry_file)), **kwargs)

    return wrapper


def _open_registry(path: Path) -> Any:
    from kope.server.registry import Registry

    return Registry(path)


def _when(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "-"


@click.group("serve", cls=KopeGroup, invoke_without_command=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free).")
@click.option(
    "--certfile", type=click.Path(exists=True, dir_okay=False), help="TLS certificate (PEM); needs --keyfile."
)
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False), help="TLS private key (PEM).")
@click.option(
    "--rate-limit", default="1200/minute", show_default=True, help="Requests per key, e.g. 100/second, 5000/hour."
)
@click.option(
    "--max-body-mb", default=16.0, show_default=True, type=click.FloatRange(0.001), help="Largest request body."
)
@click.option(
    "--max-import-mb", default=256.0, show_default=True, type=click.FloatRange(0.001), help="Largest memory import."
)
@click.option(
    "--slow-request-s",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Log a warning for each request answered this late, with its time in Neo4j (0: every request).",
)
@click.option(
    "--trusted-proxy",
    "trusted_proxies",
    multiple=True,
    help="Address of a reverse proxy whose X-Forwarded-For is believed (repeatable; default: none, the "
    "client address is the socket's).",
)
@registry_option
@click.pass_context
def command(
    ctx: click.Context,
    registry: Any,
    host: str,
    port: int,
    certfile: str | None,
    keyfile: str | None,
    rate_limit: str,
    max_body_mb: float,
    max_import_mb: float,
    slow_request_s: float,
    trusted_proxies: tuple[str, ...],
) -> None:
    """Serve the Experience Graph to several teams: REST (/v1, docs at /docs) and MCP (/mcp), bearer keys.

    The server holds the only Neo4j credential (the [neo4j] settings / KOPE_NEO4J_*). Without a
    subcommand it runs until Ctrl-C or SIGTERM; `keys`, `namespaces` and `audit` manage its registry.
    """
    ctx.obj = ctx.ensure_object(State)
    ctx.meta["kope.registry"] = registry
    if ctx.invoked_subcommand is not None:
        return
    from limits import parse

    from kope.db.client import GraphClient
    from kope.errors import UsageError
    from kope.server.guards import GuardSettings
    from kope.server.runner import ServeOptions, serve

    try:
        parse(rate_limit)
    except ValueError:
        raise UsageError(f"--rate-limit must look like 100/second or 1200/minute (got {rate_limit!r})") from None
    options = ServeOptions(
        host=host,
        port=port,
        certfile=Path(certfile) if certfile else None,
        keyfile=Path(keyfile) if keyfile else None,
        guard=GuardSettings(
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            max_import_bytes=int(max_import_mb * 1024 * 1024),
            rate_limit=rate_limit,
            slow_request_s=slow_request_s,
        ),
        trusted_proxies=tuple(trusted_proxies),
    )
    state: State = ctx.obj
    with GraphClient.from_config(state.config, connection_timeout=5.0) as client:
        serve(client, registry(), options)


def _registry() -> Any:
    """The registry, opened (created if new) only when a subcommand uses it, not for --help."""
    return click.get_current_context().meta["kope.registry"]()


# -- keys --------------------------------------------------------------------------------------------
@click.group("keys", cls=KopeGroup)
def keys() -> None:
    """Bearer keys of teams: create (the token is printed once), list, revoke."""


@keys.command("create")
@click.option("--team", required=True, help="The team the key acts for (created with its home namespace if new).")
@click.option("--scopes", default="read,write", show_default=True, help="Comma-separated: read, write, admin.")
@click.option("--label", help="A note on who or what holds the key.")
@click.option("--json", "as_json", is_flag=True, help="Print the key as JSON (token included, once).")
@click.option(
    "--adopt",
    is_flag=True,
    help="For a new team: create its home namespace even when the graph holds data under the team's name.",
)
def keys_create(team: str, scopes: str, label: str | None, as_json: bool, adopt: bool) -> None:
    """Create a key; prints its token once (only its hash is kept)."""
    from kope.server.auth import issue_key
    from kope.server.registry import check_team_name, parse_scopes

    registry = _registry()
    if registry.team(team) is None and not adopt:  # a new team: its home namespace is named like it
        check_team_name(team)
        parse_scopes(scopes)
        _refuse_graph_data(team, team)
    record, token = issue_key(registry, team, scopes, label)
    if as_json:
        print_json({**record.to_dict(), "token": token})
        return
    click.echo(token)
    click.echo(
        f"key {record.id} for team {record.team} ({','.join(record.scopes)}): the token above is shown only now; "
        "give it to the team as KOPE_MEMORY_TOKEN",
        err=True,
    )


@keys.command("list")
@click.option("--team", help="Only this team's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def keys_list(team: str | None, as_json: bool) -> None:
    """Every key (never a token or hash): id, team, scopes, label, created, revoked."""
    records = _registry().keys(team)
    if as_json:
        print_json([r.to_dict() for r in records])
        return
    table = Table()
    for col in ("key", "team", "scopes", "label", "created", "revoked"):
        table.add_column(col)
    for r in records:
        table.add_row(r.id, r.team, ",".join(r.scopes), r.label or "-", _when(r.created_at), _when(r.revoked_at))
    out.print(table)


@keys.command("revoke")
@click.argument("key_id")
def keys_revoke(key_id: str) -> None:
    """Revoke a key: its next request is refused (401)."""
    record = _registry().revoke(key_id)
    out.print(f"key {record.id} of team {record.team} revoked at {_when(record.revoked_at)}")


# -- namespaces --------------------------------------------------------------------------------------
@click.group("namespaces", cls=KopeGroup)
def namespaces() -> None:
    """Namespaces: their owner team and who may read them."""


def _sharing(private: bool, public: bool, share_with: tuple[str, ...]) -> tuple[str, list[str]]:
    from kope.errors import UsageError

    if sum((private, public, bool(share_with))) > 1:
        raise UsageError("choose one of --private, --public or --share-with")
    if public:
        return "public", []
    if share_with:
        return "shared", [t for item in share_with for t in item.split(",") if t]
    return "private", []


def _refuse_graph_data(name: str, owner: str) -> None:
    """UsageError when the graph holds data under ``name`` (or cannot be asked): it was not written by this server."""
    from kope.db.client import GraphClient
    from kope.errors import KopeError, UsageError
    from kope.server.store import MemoryStore

    state = click.get_current_context().ensure_object(State)
    try:
        with GraphClient.from_config(state.config, connection_timeout=5.0) as client:
            held = MemoryStore(client).holds_data(name)
    except KopeError as exc:
        raise UsageError(
            f"cannot check whether the graph holds data under {name!r} ({exc.message})",
            hint="start Neo4j, or pass --adopt to create it without looking",
        ) from None
    if held:
        raise UsageError(
            f"the graph already holds data under {name!r} that this server did not write",
            hint=f"pass --adopt to give that data to team {owner!r}",
        )


@namespaces.command("create")
@click.argument("name")
@click.option("--owner", required=True, help="The team that owns it (the only one that may write to it).")
@click.option("--share-with", multiple=True, help="Teams that may read it (repeatable or comma-separated).")
@click.option("--public", is_flag=True, help="Every team of this server may read it.")
@click.option(
    "--adopt",
    is_flag=True,
    help="Create it even when the graph holds data under this name that this server did not write "
    "(e.g. over Bolt): that data is then the owner team's.",
)
def ns_create(name: str, owner: str, share_with: tuple[str, ...], public: bool, adopt: bool) -> None:
    """Create a namespace owned by a team (private unless shared); never over data the graph holds unless --adopt."""
    visibility, teams = _sharing(False, public, share_with)
    if not adopt:
        _refuse_graph_data(name, owner)
    ns = _registry().create_namespace(name, owner, visibility=visibility, shared_with=teams, by="operator")
    out.print(f"namespace {ns.name}: owner {ns.owner}, {_readers(ns)}")


@namespaces.command("share")
@click.argument("name")
@click.option("--with", "share_with", multiple=True, help="Teams that may read it (replaces the list).")
@click.option("--public", is_flag=True, help="Every team may read it.")
@click.option("--private", is_flag=True, help="Only its owner may read it.")
def ns_share(name: str, share_with: tuple[str, ...], public: bool, private: bool) -> None:
    """Change who may read a namespace."""
    visibility, teams = _sharing(private, public, share_with)
    ns = _registry().set_sharing(name, visibility, teams)
    out.print(f"namespace {ns.name}: owner {ns.owner}, {_readers(ns)}")


def _readers(ns: Any) -> str:
    if ns.visibility == "public":
        return "readable by every team"
    if ns.visibility == "shared":
        return "readable by " + ", ".join([ns.owner, *ns.shared_with])
    return "private"


@namespaces.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def ns_list(as_json: bool) -> None:
    """Every namespace with its owner and readers."""
    items = _registry().namespaces()
    if as_json:
        print_json([ns.to_dict() for ns in items])
        return
    table = Table()
    for col in ("namespace", "owner", "readers", "created"):
        table.add_column(col)
    for ns in items:
        table.add_row(ns.name, ns.owner, _readers(ns), _when(ns.created_at))
    out.print(table)


# -- audit --------------------------------------------------------------------------------------------
@command.command("audit")
@click.option("--team", help="Only requests of this team.")
@click.option("--namespace", help="Only requests on this namespace.")
@click.option("--since-hours", type=click.FloatRange(0), help="Only the last N hours.")
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 1_000_000))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def audit(team: str | None, namespace: str | None, since_hours: float | None, limit: int, as_json: bool) -> None:
    """Who read and wrote what, and when (newest first)."""
    since = time.time() - since_hours * 3600 if since_hours is not None else None
    rows = _registry().audit(team=team, namespace=namespace, since=since, limit=limit)
    if as_json:
        print_json(rows)
        return
    table = Table()
    for col in ("time", "team", "key", "action", "namespace", "status", "detail"):
        table.add_column(col)
    for r in rows:
        detail = ", ".join(f"{k}={v}" for k, v in (r["detail"] or {}).items())
        table.add_row(
            _when(r["ts"]),
            r["team"] or "-",
            r["key_id"] or "-",
            r["action"] or f"{r['method']} {r['path']}",
            r["namespace"] or "-",
            str(r["status"]),
            detail[:80] or "-",
        )
    out.print(table)


# click.Group.group is typed to return a union (decorator or group); add_command keeps the subgroups typed
command.add_command(keys)
command.add_command(namespaces)
