"""``python -m harness.serve.executor PARENT_PID ROOT``: one evaluator process of the worker service.

It imports torch and the harness once and evaluates requests one at a time (the pools stay warm), never importing a
task file; its line protocol and when it ends: docs/evaluation-workers.md, "The service's HTTP API and its
evaluator processes".
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)  # unwinds the evaluation in flight, closing its workers
            return
        time.sleep(1.0)


def _on_sigterm(_signum: int, _frame: Any) -> None:
    raise SystemExit(143)


def main(argv: list[str]) -> int:
    parent, root = int(argv[0]), Path(argv[1])
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)  # anything printed from here on goes to stderr, not into the channel
    sys.stdout = sys.stderr
    signal.signal(signal.SIGTERM, _on_sigterm)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the service; it stops its executors itself
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()

    import harness.evaluate  # noqa: F401 - pay for torch and the harness before the first request
    from harness.remote import evaluate_payload

    channel.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("op") == "exit":
            break
        started = time.monotonic()
        try:
            result = evaluate_payload(message["payload"], str(root))
        except Exception as exc:  # a fault of the harness itself: the service's error, not the candidate's
            import traceback

            result = {"internal_error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]}
        channel.write(
            json.dumps({"id": message["id"], "result": result, "seconds": round(time.monotonic() - started, 3)}) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
