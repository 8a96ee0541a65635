"""Command lines KOPE prints as hints: they reach the same memory the printing command used.

A hint such as "continue it with `kope optimize --resume RUN`" is only right
if it is run against the same namespace and the same Neo4j server. So every
hint names ``--namespace`` and, where the server is not the default local one,
the environment that selects it (``KOPE_NEO4J_URI`` for an external server;
the data dir and ports for a local server started with other ones). Secrets
are never part of a hint.
"""

from __future__ import annotations

import shlex

from kope.config import KopeConfig, ServerSettings


def server_env(config: KopeConfig) -> list[str]:
    """``NAME=value`` settings that select the configured server (none for the default local one)."""
    if config.neo4j.uri is not None:
        return [f"KOPE_NEO4J_URI={shlex.quote(config.neo4j.uri)}"]
    env = []
    if config.data_dir != KopeConfig().data_dir:
        env.append(f"KOPE_DATA_DIR={shlex.quote(str(config.data_dir))}")
    server = ServerSettings()
    if config.server.bolt_port != server.bolt_port:
        env.append(f"KOPE_NEO4J_BOLT_PORT={config.server.bolt_port}")
    if config.server.http_port != server.http_port:
        env.append(f"KOPE_NEO4J_HTTP_PORT={config.server.http_port}")
    return env


def kope_command(config: KopeConfig, *args: str, namespace: str | None = None, scoped: bool = True) -> str:
    """``[ENV=...] kope ARGS --namespace NS``: a command against this config's server and ``namespace``
    (default: the config's); ``scoped=False`` for commands that take no namespace (``kope db start``)."""
    words = [*server_env(config), "kope", *(shlex.quote(a) for a in args)]
    if scoped:
        words += ["--namespace", shlex.quote(namespace or config.memory.namespace)]
    return " ".join(words)
