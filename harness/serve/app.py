"""The worker service's HTTP API (FastAPI).

Its endpoints (``GET /health``, ``POST /evaluate``), the key every one needs and the status codes each answer
(500 and 503: infrastructure faults a client retries elsewhere): docs/evaluation-workers.md, "The service's HTTP API
and its evaluator processes".
"""

from __future__ import annotations

import asyncio
import hmac
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from harness import __version__
from harness.errors import HarnessError, TargetUnavailableError
from harness.remote import EvalRequest, error_payload
from harness.serve.devices import Devices, ExecutorLost, Quarantined

HEALTH_SCHEMA = "kope.worker-health/1"


def _infrastructure(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"kind": kind, "message": message}, status_code=status)


def create_app(devices: Devices, key: str, *, max_request_bytes: int = 16 << 20, max_queue: int = 32) -> FastAPI:
    """The ASGI app; ``devices`` must be started (``Devices.start``) before the app serves."""
    expected = key.encode("utf-8")
    state: dict[str, Any] = {"closing": False}

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        devices.bind()
        # each running evaluation (and each probe) waits in a thread: room for all of them at once
        slots = sum(d.slots for d in devices.devices)
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=2 * slots + 4))
        try:
            yield
        finally:
            state["closing"] = True

    app = FastAPI(title="KOPE evaluation worker", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)

    def authorised(request: Request) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode("utf-8"), expected)

    def unauthorised() -> JSONResponse:
        return JSONResponse(
            {"kind": "auth", "message": "missing or wrong worker key"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    @app.get("/health")
    async def health(request: Request) -> JSONResponse:
        if not authorised(request):
            return unauthorised()
        return JSONResponse(
            {"schema": HEALTH_SCHEMA, "version": __version__, "closing": state["closing"], **devices.health()}
        )

    @app.post("/evaluate")
    async def evaluate(request: Request) -> JSONResponse:
        if not authorised(request):
            return unauthorised()
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_request_bytes:
            return _too_large(max_request_bytes)
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_request_bytes:
                return _too_large(max_request_bytes)
        try:
            parsed = EvalRequest.from_payload(json.loads(body))
        except (ValueError, RecursionError) as exc:  # RecursionError: JSON nested deeper than the parser goes
            return JSONResponse({"error": {"type": "OptionsError", "message": f"bad request: {exc}"}}, 422)
        except HarnessError as exc:
            return JSONResponse({"error": error_payload(exc)}, status_code=422)
        if state["closing"]:
            return _infrastructure(503, "infrastructure:busy", "the worker is shutting down")
        if devices.queued() >= max_queue:
            return _infrastructure(503, "infrastructure:busy", f"the worker's queue is full ({max_queue} waiting)")
        target = parsed.options.target
        try:
            device = devices.pick(target)
        except Quarantined as exc:
            return _infrastructure(503, "infrastructure:quarantined", f"device quarantined: {exc}")
        if device is None:
            error = TargetUnavailableError(
                f"this worker has no device for target {target!r} (its targets: {', '.join(devices.targets())})"
            )
            return JSONResponse({"error": error_payload(error)}, status_code=422)
        began = time.monotonic()
        try:
            result = await devices.evaluate(device, parsed.to_payload())
        except Quarantined as exc:
            _log(parsed, device.name, "quarantined", began)
            return _infrastructure(503, "infrastructure:quarantined", f"device quarantined: {exc}")
        except ExecutorLost as exc:
            _log(parsed, device.name, "lost", began)
            return _infrastructure(
                500, "infrastructure:worker_lost", f"the evaluation was lost on {device.name}: {exc}"
            )
        if "error" in result:
            _log(parsed, device.name, f"error {result['error']['type']}", began)
            return JSONResponse(result, status_code=422)
        _log(parsed, device.name, result["outcome"]["error_kind"] or "correct", began)
        return JSONResponse(result)

    return app


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse(
        {"kind": "too_large", "message": f"the request is larger than this worker's limit of {limit} bytes"},
        status_code=413,
    )


def _log(request: EvalRequest, device: str, what: str, began: float) -> None:
    print(
        f"kope worker: {request.task.name} / {request.candidate.name} on {device}: {what} "
        f"({time.monotonic() - began:.1f} s)",
        file=sys.stderr,
        flush=True,
    )
