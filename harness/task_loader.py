"""Loading a task file in a worker process under a timeout: task code never runs in the caller's process.

A task file is Python: importing it (to read metadata whose values are not
literals, or its cases) runs its module-level code, which can be slow, hang or
crash. ``load_task_isolated(path)`` imports it in a fresh interpreter
(``python -m harness.task_loader PATH OUT``) in its own session, with an
environment stripped of credentials, and kills the whole process group when
it takes longer than ``timeout_s`` (default ``TASK_LOAD_TIMEOUT_S``, or the
``KOPE_HARNESS_TASK_TIMEOUT`` environment variable, in seconds). The worker
writes the validated task as JSON; the caller rebuilds the ``Task`` from it and
keeps it, keyed by the file's path and content hash, so a loop that evaluates
the same task many times pays for one import. The JSON is also kept on disk
(``cache_root()/tasks``, mode 0600, written atomically, with a digest of its
contents; the sandbox hides the folder from candidates), keyed by the path, the
file's content, this loader's and ``harness/task.py``'s own source and the torch
version, so every later process loading the same unchanged task skips the
import (an interpreter and torch: about 2 s of CPU) too; an edited task file
is a new key, a damaged entry is ignored and rewritten.

Failures are ``TaskFormatError`` with one clear line: the task's own message,
a timeout, or the worker's crash. Workers that must run the task's code (the
reference and candidate workers) call ``harness.task.load_task`` directly.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from harness.errors import HarnessError, TaskFormatError, TaskNotFoundError
from harness.task import Case, Task, TaskInfo, read_task_literals, resolve_task_path

TASK_LOAD_TIMEOUT_S = 60.0
TIMEOUT_ENV = "KOPE_HARNESS_TASK_TIMEOUT"
# Variables that may hold credentials: never handed to task code.
_SECRET = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|CREDENTIAL|_KEY$)", re.IGNORECASE)
_cache: dict[tuple[str, str], Task] = {}
_lock = threading.Lock()


def default_timeout() -> float:
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None or not raw.strip():
        return TASK_LOAD_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise TaskFormatError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise TaskFormatError(f"{TIMEOUT_ENV}={raw!r} must be a positive number of seconds")
    return value


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without variables that may hold credentials (passwords, tokens, API keys)."""
    return {k: v for k, v in (os.environ if env is None else env).items() if not _SECRET.search(k)}


def read_task_info(path: str | Path) -> TaskInfo:
    """Metadata and cases from the file's literals, without executing it; else imported in a worker process."""
    info = read_task_literals(path)
    return info if info is not None else load_task_isolated(resolve_task_path(path))


def load_task_isolated(path: str | Path, timeout_s: float | None = None) -> Task:
    """The validated task, imported in a worker process that is killed after ``timeout_s``."""
    p = resolve_task_path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise TaskFormatError(f"{p}: cannot read the task file: {exc}") from None
    key = (str(p), hashlib.sha256(data).hexdigest())
    with _lock:
        if key in _cache:
            return _cache[key]
    payload = _read_disk(key)
    if payload is None:
        payload = _load_in_worker(p, default_timeout() if timeout_s is None else timeout_s)
        _write_disk(key, payload)
    task = task_from_payload(payload, p)
    with _lock:
        _cache[key] = task
    return task


# -- the disk cache of loaded tasks ---------------------------------------------------------------------------
@functools.cache
def _loader_version() -> str:
    """What a cached payload depends on besides the task file: the code that made it and torch's version."""
    import harness.task

    digest = hashlib.sha256()
    for module in (harness.task, sys.modules[__name__]):
        digest.update(Path(module.__file__ or "").read_bytes())
    try:
        from importlib.metadata import version

        digest.update(version("torch").encode())
    except Exception:  # no torch metadata: the code digest alone
        pass
    return digest.hexdigest()


def _disk_path(key: tuple[str, str]) -> Path:
    from harness.commands import cache_root

    name = hashlib.sha256("\0".join([*key, _loader_version()]).encode()).hexdigest()
    return cache_root() / "tasks" / f"{name}.json"


def _read_disk(key: tuple[str, str]) -> dict[str, Any] | None:
    from harness.jsonfile import read_json

    entry = read_json(_disk_path(key))  # none yet, or damaged: loaded again (and rewritten)
    if not isinstance(entry, dict) or entry.get("path") != key[0] or not isinstance(entry.get("task"), dict):
        return None
    return entry["task"] if entry.get("sha256") == _digest(entry["task"]) else None


def _write_disk(key: tuple[str, str], payload: dict[str, Any]) -> None:
    """Atomically, mode 0600; failing to write only costs a load next time."""
    from harness.jsonfile import write_json

    try:
        write_json(_disk_path(key), {"path": key[0], "sha256": _digest(payload), "task": payload})
    except (OSError, ValueError):
        return


def _digest(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, allow_nan=False).encode()).hexdigest()


def _load_in_worker(path: Path, timeout_s: float) -> dict[str, Any]:
    """The task's payload (``task_payload``), made by importing it in a worker process."""
    import harness

    root = str(Path(harness.__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory(prefix="kope-task-") as scratch:
        out = Path(scratch) / "task.json"
        env = clean_env()
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        with open(Path(scratch) / "output", "w+b") as output:
            proc = subprocess.Popen(
                [sys.executable, "-m", "harness.task_loader", str(path), str(out)],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                cwd=scratch,
                env=env,
                start_new_session=True,
            )
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _kill(proc)
                raise TaskFormatError(
                    f"{path}: importing the task did not finish within {timeout_s:g} s "
                    "(its module-level code runs when the task is loaded)",
                    hint=f"make the task's module-level code fast, or raise {TIMEOUT_ENV} (seconds)",
                ) from None
            finally:
                _kill(proc)  # anything the task started in its session goes too
            output.seek(0)
            printed = output.read()[-2000:].decode(errors="replace").strip()
        if not out.is_file():
            last = printed.splitlines()[-1] if printed else "no output"
            raise TaskFormatError(
                f"{path}: the process importing the task exited with status {proc.returncode} ({last})"
            )
        payload = json.loads(out.read_text(encoding="utf-8"))
    if not payload.get("ok"):
        error = TaskNotFoundError if payload.get("kind") == "TaskNotFoundError" else TaskFormatError
        raise error(payload["message"], hint=payload.get("hint"))
    return payload["task"]


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# -- the payload: a Task as JSON, held-out cases included (it only travels between harness processes) --------------
def _case_payload(case: Case) -> dict[str, Any]:
    return {"index": case.index, "name": case.name, "params": case.params, "heldout": case.heldout}


def task_payload(task: Task) -> dict[str, Any]:
    return {
        "operator": task.operator,
        "family": task.family,
        "level": task.level,
        "description": task.description,
        "dtype": task.dtype,
        "cases": [_case_payload(c) for c in task.cases],
        "heldout_cases": [_case_payload(c) for c in task.heldout_cases],
        "index_outputs": task.index_outputs,
        "has_apply_case": task.has_apply_case,
    }


def task_from_payload(data: dict[str, Any], path: Path) -> Task:
    def cases(key: str) -> list[Case]:
        return [Case(c["index"], c["name"], dict(c["params"]), bool(c["heldout"])) for c in data[key]]

    return Task(
        operator=data["operator"],
        family=data["family"],
        level=data["level"],
        description=data["description"],
        path=path,
        dtype=data["dtype"],
        cases=cases("cases"),
        heldout_cases=cases("heldout_cases"),
        index_outputs=list(data["index_outputs"]),
        has_apply_case=data["has_apply_case"],
        source=path.read_text(encoding="utf-8", errors="replace"),
    )


def main(argv: list[str]) -> int:
    from harness.task import load_task

    path, out = argv[0], Path(argv[1])
    try:
        payload: dict[str, Any] = {"ok": True, "task": task_payload(load_task(path))}
    except HarnessError as exc:
        payload = {"ok": False, "kind": type(exc).__name__, "message": exc.message, "hint": exc.hint}
    out.write_text(json.dumps(payload, allow_nan=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    code = main(sys.argv[1:])
    sys.stdout.flush()
    os._exit(code)  # the task may have started threads: do not wait for them
