"""The ASGI guard in front of every route (REST and MCP alike), in this order:

1. public paths (``/health``, ``/docs``, ``/openapi.json``) pass; they hold no memory data;
2. the bearer key is authenticated from the headers alone, before any byte of the body is read:
   none, malformed, unknown or revoked is ``401`` (argon2 checks of unseen tokens are rate
   limited per key id, so bad keys sent for one key never lock out another key or an address);
3. the key's rate limit (sliding window, ``limits``): over it is ``429`` with ``Retry-After``;
4. the body is read up to the limit: more is ``413`` (``Content-Length`` checked first);
5. the route runs with ``scope["kope.identity"]``; afterwards the request is counted in the
   Prometheus metrics and written to the audit log (who, what, which namespace, status, when;
   the client address is the socket's: uvicorn rewrites it from ``X-Forwarded-For`` only for
   the proxies ``kope serve --trusted-proxy`` names).

Error bodies are ``{"error": ..., "code": ...}``: one line, never a stack trace.
"""

from __future__ import annotations

import json
import logging
import math
import queue
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
from limits import RateLimitItem, parse
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter
from prometheus_client import CollectorRegistry, Counter, Histogram

from kope.db.client import TransactionStats, transaction_stats
from kope.server.auth import Authenticator, key_id_of
from kope.server.errors import AuthenticationError
from kope.server.registry import Registry

log = logging.getLogger("kope.server")
PUBLIC = frozenset({"/health", "/docs", "/docs/oauth2-redirect", "/openapi.json"})
UNAUDITED = frozenset({"/metrics"})
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class GuardSettings:
    max_body_bytes: int = 16 * 1024 * 1024
    max_import_bytes: int = 256 * 1024 * 1024
    rate_limit: str = "1200/minute"  # per key
    auth_failure_limit: str = "30/minute"  # argon2 verifications of unseen tokens, per key id
    slow_request_s: float = 10.0  # a request answered this late is logged as a warning, with its time in Neo4j

    def body_limit(self, path: str) -> int:
        return self.max_import_bytes if path.endswith("/import") else self.max_body_bytes


@dataclass
class _Exchange:
    """One request as the guard saw it: the status it answered, who asked, whether it is metered and audited."""

    header: str | None
    status: int = 500
    identity: Any = None
    accounted: bool = True


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "kope_server_requests", "Requests answered", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "kope_server_request_seconds",
            "Time to answer a request",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
        )
        # across all teams: /metrics answers any key, so it names no team or namespace
        self.attempts = Counter(
            "kope_server_attempts_recorded", "Attempts written to the graph", registry=self.registry
        )


class AuditWriter:
    """Audit rows are queued by the request path and written in batches by one thread."""

    def __init__(self, registry: Registry, interval: float = 0.2) -> None:
        self.registry = registry
        self.interval = interval
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="kope-audit", daemon=True)
        self._thread.start()

    def add(self, row: dict[str, Any]) -> None:
        self._queue.put(row)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        done = False
        while not done:
            batch: list[dict[str, Any]] = []
            try:
                item = self._queue.get(timeout=self.interval)
                while True:
                    if item is None:
                        done = True
                        break
                    batch.append(item)
                    item = self._queue.get_nowait()
            except queue.Empty:
                pass
            try:
                self.registry.append_audit(batch)
            except Exception:  # the audit must never take the server down; say so loudly
                log.exception("could not write %d audit rows", len(batch))


def error_body(status: int, code: str, message: str, hint: str | None = None) -> bytes:
    body: dict[str, Any] = {"error": message, "code": code}
    if hint:
        body["hint"] = hint
    return json.dumps(body).encode()


async def send_error(
    send: Send, status: int, code: str, message: str, hint: str | None = None, headers: dict[str, str] | None = None
) -> None:
    body = error_body(status, code, message, hint)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


class Guard:
    def __init__(
        self,
        app: ASGIApp,
        *,
        registry: Registry,
        authenticator: Authenticator,
        settings: GuardSettings,
        metrics: Metrics,
        audit: AuditWriter,
    ) -> None:
        self.app = app
        self.registry = registry
        self.auth = authenticator
        self.settings = settings
        self.metrics = metrics
        self.audit = audit
        self._limiter = SlidingWindowCounterRateLimiter(MemoryStorage())
        self._rate: RateLimitItem = parse(settings.rate_limit)
        self._auth_rate: RateLimitItem = parse(settings.auth_failure_limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path in PUBLIC:
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        exchange = _Exchange(header=_header(scope, b"authorization"))
        with transaction_stats() as db:
            await self._guarded(scope, receive, send, exchange)
        if exchange.accounted:
            self._account(scope, exchange, time.perf_counter() - began, db)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, exchange: _Exchange) -> None:
        path: str = scope["path"]
        header = exchange.header

        async def send_counted(message: Message) -> None:
            if message["type"] == "http.response.start":
                exchange.status = message["status"]
            await send(message)

        try:
            key_id = self.auth.needs_hash_check(header)
            if key_id is not None:
                if not self._limiter.hit(self._auth_rate, "auth", key_id):
                    await send_error(
                        send_counted,
                        429,
                        "rate_limited",
                        f"too many secrets tried for key {key_id}",
                        None,
                        {"Retry-After": "60"},
                    )
                    exchange.accounted = False  # unseen secrets tried too often: neither metered nor audited
                    return
                identity = await anyio.to_thread.run_sync(self.auth.identify, header)  # argon2: tens of ms
            else:
                identity = self.auth.identify(header)  # two indexed SQLite reads
        except AuthenticationError as exc:  # answered before any byte of the body is read
            await send_error(
                send_counted, 401, exc.code, exc.message, exc.hint, {"WWW-Authenticate": 'Bearer realm="kope"'}
            )
        else:
            scope["kope.identity"] = exchange.identity = identity
            if not self._limiter.hit(self._rate, "key", identity.key_id):
                stats = self._limiter.get_window_stats(self._rate, "key", identity.key_id)
                retry = max(1, math.ceil(stats.reset_time - time.time()))
                await send_error(
                    send_counted,
                    429,
                    "rate_limited",
                    f"rate limit of key {identity.key_id} reached ({self.settings.rate_limit})",
                    "slow down and retry after the Retry-After seconds",
                    {"Retry-After": str(retry)},
                )
            else:
                try:
                    receive = await self._read_body(scope, receive)
                except _TooLarge:
                    limit = self.settings.body_limit(path)
                    await send_error(send_counted, 413, "too_large", f"request body over the limit of {limit} bytes")
                else:
                    try:
                        await self.app(scope, receive, send_counted)
                    except Exception:  # the app's handler answered 500 (no trace in the body); keep serving
                        log.exception("unhandled error in %s %s", scope["method"], path)
                        exchange.status = 500

    async def _read_body(self, scope: Scope, receive: Receive) -> Receive:
        """Read the whole body (up to the limit) and hand a receive that replays it."""
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return receive
        limit = self.settings.body_limit(scope["path"])
        declared = _header(scope, b"content-length")
        if declared is not None:
            try:
                if int(declared) > limit:
                    raise _TooLarge
            except ValueError:
                raise _TooLarge from None
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            message: Message = await receive()
            return message

        return replay

    def _account(self, scope: Scope, exchange: _Exchange, seconds: float, db: TransactionStats) -> None:
        identity, header = exchange.identity, exchange.header
        client = (scope.get("client") or ("?", 0))[0]
        route = scope.get("route")
        template = getattr(route, "path", None) or ("/mcp" if scope["path"].startswith("/mcp") else "(unmatched)")
        status = (scope.get("kope.audit") or {}).get("status") or exchange.status
        self.metrics.requests.labels(scope["method"], template, str(status)).inc()
        self.metrics.latency.labels(scope["method"], template).observe(seconds)
        if seconds >= self.settings.slow_request_s:
            # the route's template, never the path: a namespace or a key id in it is not for the log
            log.warning(
                "slow request: %s %s answered %s after %.1f s (Neo4j: %d units of work, %d transient errors "
                "retried, %.1f s)",
                scope["method"],
                template,
                status,
                seconds,
                db.transactions,
                db.retries,
                db.seconds,
            )
        if scope["path"] in UNAUDITED:
            return
        params = scope.get("path_params") or {}
        extra = scope.get("kope.audit") or {}
        self.audit.add(
            {
                "ts": time.time(),
                "key_id": identity.key_id
                if identity
                else (key_id_of(header.partition(" ")[2].strip()) if header else None),
                "team": identity.team if identity else None,
                "method": scope["method"],
                "path": scope["path"][:300],
                "namespace": extra.get("namespace") or params.get("ns"),
                "action": extra.get("action") or getattr(route, "name", None),
                "status": extra.get("status") or status,  # an MCP tool's refusal travels in a 200 response
                "detail": extra.get("detail"),
                "client": client,
            }
        )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            text: str = value.decode("latin-1")
            return text
    return None
