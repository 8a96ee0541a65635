"""Start ``kope serve``: check Neo4j and the port first (one clear error each), then run uvicorn.

The listening socket is bound here, before uvicorn starts, so a busy port is a
``PortInUseError`` naming it instead of a log line from deep inside the server; the
graph is checked once (``DatabaseUnavailableError`` / ``DatabaseAuthError`` otherwise).
SIGINT and SIGTERM stop the server gracefully (uvicorn installs the handlers even in a
background job that started with SIGINT ignored).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import socket
import ssl
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kope.db.client import GraphClient
from kope.errors import PortInUseError
from kope.server.errors import ServeError
from kope.server.guards import GuardSettings
from kope.server.registry import Registry

if TYPE_CHECKING:
    import uvicorn


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8765
    certfile: Path | None = None
    keyfile: Path | None = None
    guard: GuardSettings = GuardSettings()
    log_level: str = "warning"
    # addresses of reverse proxies whose X-Forwarded-For / -Proto is believed; none: the socket's address counts
    trusted_proxies: tuple[str, ...] = ()


def _server_class() -> type[uvicorn.Server]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that a stop asked for by SIGINT/SIGTERM ends with exit status 0
        (uvicorn re-raises the signal after its graceful shutdown, so the process would die of it)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    getattr(self, "_captured_signals", []).clear()

    return Server


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose proto says TCP
    # (with proto 0 every response waits ~40 ms for the client's delayed ACK)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(
                f"port {port} on {host} is in use by another process", hint="choose another one with --port"
            ) from None
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def check_tls(options: ServeOptions) -> None:
    if (options.certfile is None) != (options.keyfile is None):
        raise ServeError("TLS needs both --certfile and --keyfile")
    if options.certfile is None:
        return
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(str(options.certfile), str(options.keyfile))
    except (OSError, ssl.SSLError) as exc:
        raise ServeError(
            f"cannot use the TLS certificate {options.certfile} with key {options.keyfile}: {exc}"
        ) from None


class _LineHandler(logging.StreamHandler):  # type: ignore[type-arg]  # a stream of text
    pass


def _plain_log_lines() -> None:
    """The server's own warnings and errors as one line each on stderr, with a time: the MCP library gives the root
    logger a Rich handler, which would wrap them at 80 columns and pad them in a log file."""
    kope_log = logging.getLogger("kope")
    if any(isinstance(h, _LineHandler) for h in kope_log.handlers):
        return
    handler = _LineHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    kope_log.addHandler(handler)
    kope_log.propagate = False


def serve(client: GraphClient, registry: Registry, options: ServeOptions) -> None:
    """Run until SIGINT/SIGTERM. The caller closes ``client``."""
    import uvicorn

    from kope.server.app import create_app

    _plain_log_lines()
    check_tls(options)
    client.verify()  # DatabaseUnavailableError / DatabaseAuthError: one line
    sock = bind(options.host, options.port)
    scheme = "https" if options.certfile else "http"
    app = create_app(client, registry, guard=options.guard)
    config = uvicorn.Config(
        app,
        log_level=options.log_level,
        access_log=False,  # every request is in the audit log instead
        ssl_certfile=str(options.certfile) if options.certfile else None,
        ssl_keyfile=str(options.keyfile) if options.keyfile else None,
        lifespan="on",
        timeout_graceful_shutdown=10,
        # uvicorn believes X-Forwarded-For from 127.0.0.1 by default: a local client could forge its address
        proxy_headers=bool(options.trusted_proxies),
        forwarded_allow_ips=",".join(options.trusted_proxies) or None,
    )
    server = _server_class()(config)
    shown = options.host if ":" not in options.host else f"[{options.host}]"
    print(
        f"kope serve: listening on {scheme}://{shown}:{sock.getsockname()[1]} "
        f"(graph {client.uri}, registry {registry.path}); docs at /docs, MCP at /mcp",
        file=sys.stderr,
        flush=True,
    )
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise ServeError("the server did not start (see the messages above)")
    print("kope serve: stopped", file=sys.stderr, flush=True)
