"""A real OpenAI-compatible HTTP server that replays scripted responses.

Tests point the real ``openai`` client (and so the real proposer and loop) at
it: ``base_url = server.url``. Each POST to ``/v1/chat/completions`` consumes
the next scripted step:

- ``Reply(content)``: a 200 chat completion with that assistant content and a
  usage block (prompt tokens counted from the request, completion tokens from
  the content, or given explicitly);
- ``Fail(status, message, headers)``: an error response (429 with
  ``retry-after``, 500, 503 ...) in OpenAI's error JSON shape;
- ``Stall(seconds)``: hold the request that long before answering the next
  step (for client timeouts).

Every request body and header is recorded in ``server.requests`` for
assertions. When the script runs out the server answers 500 with
``script exhausted`` so a test that asks too often fails loudly.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"


@dataclass
class Fail:
    status: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    type: str = "server_error"


@dataclass
class Stall:
    seconds: float


Step = Reply | Fail | Stall


@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    def text(self, role: str | None = None) -> str:
        return "\n".join(str(m.get("content", "")) for m in self.messages if role is None or m.get("role") == role)


def _rough_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ReplayLLM:
    """Start with ``with ReplayLLM(steps, api_key=...) as server: ...``."""

    def __init__(self, steps: list[Step], *, api_key: str | None = None, model: str = "replay-model") -> None:
        self.steps = list(steps)
        self.api_key = api_key
        self.model = model
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # shutdown() waits for serve_forever to look up from select(): every 50 ms here, not the default 0.5 s
        serve = functools.partial(self._server.serve_forever, poll_interval=0.05)
        self._thread = threading.Thread(target=serve, name="llm-replay", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def remaining(self) -> int:
        return len(self.steps)

    def __enter__(self) -> ReplayLLM:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self) -> Step | None:
        with self._lock:
            return self.steps.pop(0) if self.steps else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
                self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": None}}, headers)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send(
                        200,
                        {"object": "list", "data": [{"id": server.model, "object": "model", "owned_by": "kope-tests"}]},
                    )
                else:
                    self._error(404, f"no route {self.path}", "invalid_request_error")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._error(400, "body is not JSON", "invalid_request_error")
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.requests.append(RecordedRequest(self.path, headers, body))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._error(404, f"no route {self.path}", "invalid_request_error")
                    return
                if server.api_key is not None and headers.get("authorization") != f"Bearer {server.api_key}":
                    self._error(401, "invalid api key", "authentication_error")
                    return
                step = server._next()
                while isinstance(step, Stall):
                    time.sleep(step.seconds)
                    step = server._next()
                if step is None:
                    self._error(500, "script exhausted", "server_error")
                elif isinstance(step, Fail):
                    self._error(step.status, step.message, step.type, step.headers)
                else:
                    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                    usage_in = step.prompt_tokens if step.prompt_tokens is not None else _rough_tokens(prompt)
                    usage_out = (
                        step.completion_tokens if step.completion_tokens is not None else _rough_tokens(step.content)
                    )
                    self._send(
                        200,
                        {
                            "id": f"chatcmpl-replay-{len(server.requests)}",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": body.get("model", server.model),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {"role": "assistant", "content": step.content},
                                    "finish_reason": step.finish_reason,
                                }
                            ],
                            "usage": {
                                "prompt_tokens": usage_in,
                                "completion_tokens": usage_out,
                                "total_tokens": usage_in + usage_out,
                            },
                        },
                    )

        return Handler
