"""``create_app``: the FastAPI app (REST + MCP + /health + /metrics) behind the guard."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.exceptions import HTTPException as StarletteHTTPException

from kope import __version__
from kope.db.client import GraphClient
from kope.errors import KopeError
from kope.server import api
from kope.server.auth import Authenticator
from kope.server.errors import status_of
from kope.server.guards import AuditWriter, Guard, GuardSettings, Metrics, error_body
from kope.server.mcp_tools import build_mcp
from kope.server.registry import Registry
from kope.server.store import MemoryStore

log = logging.getLogger("kope.server")
HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed"}


def _error(status: int, code: str, message: str, hint: str | None = None) -> Response:
    return Response(error_body(status, code, message, hint), status_code=status, media_type="application/json")


def _validation_message(exc: RequestValidationError) -> str:
    errors = exc.errors()
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    message = first.get("msg", "invalid")
    if first.get("type") == "json_invalid":
        return f"the body is not valid JSON ({message}){more}"
    return f"invalid request: {where}: {message}{more}"


def create_app(
    client: GraphClient,
    registry: Registry,
    *,
    guard: GuardSettings | None = None,
    store: MemoryStore | None = None,
) -> Any:
    """The ASGI app. Owns nothing it is given: the caller closes the client."""
    store = store or MemoryStore(client)
    metrics = Metrics()
    audit = AuditWriter(registry)
    mcp = build_mcp(registry, store, metrics)
    mcp_app = mcp.streamable_http_app()

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        store.init_schema()
        async with mcp.session_manager.run():
            yield
        audit.close()

    app = FastAPI(
        title="KOPE memory server",
        version=__version__,
        description="The shared Experience Graph: team keys, server-enforced namespaces, REST and MCP (/mcp).",
        lifespan=lifespan,
    )

    @app.exception_handler(KopeError)
    async def kope_error(_request: Request, exc: KopeError) -> Response:
        status, code = status_of(exc)
        if status >= 500:
            log.error("request failed: %s", exc.message)
            if code == "internal":
                return _error(status, code, "internal error (the server's log has the details)")
            return _error(status, code, "the memory server cannot reach its graph database; try again later")
        return _error(status, code, exc.message, exc.hint)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> Response:
        return _error(422, "invalid_request", _validation_message(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> Response:
        return _error(exc.status_code, HTTP_CODES.get(exc.status_code, "error"), str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_request: Request, exc: Exception) -> Response:
        log.exception("unexpected error")
        return _error(500, "internal", "internal error (the server's log has the details)")

    @app.get("/health", name="health")
    def health() -> Response:
        try:
            client.verify()
        except KopeError:
            return api.json_response({"status": "degraded", "graph": "unavailable"}, 503)
        return api.json_response({"status": "ok", "graph": "ok", "version": __version__})

    @app.get("/metrics", name="metrics")
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    api.mount(app, registry, store, metrics)
    app.router.routes.extend(mcp_app.routes)  # POST/GET/DELETE /mcp
    authenticator = Authenticator(registry)
    return Guard(
        app,
        registry=registry,
        authenticator=authenticator,
        settings=guard or GuardSettings(),
        metrics=metrics,
        audit=audit,
    )
