"""Loading a task file in a worker process under a timeout: task code never runs in the caller's process.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
import threading
from pathlib import Path
from typing import Any

from harness import settings
from harness.errors import HarnessError, TaskFormatError, TaskNotFoundError
from harness.task import Case, Task, TaskInfo, read_task_literals, resolve_task_path

TASK_MEMORY_BYTES = 16 << 30  # the importing process's address space (torch's import maps ~2 GiB of it)
# Variables that may hold credentials: never handed to task code.
_SECRET = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|CREDENTIAL|_KEY$)", re.IGNORECASE)
_cache: dict[tuple[str, str], Task] = {}
_lock = threading.Lock()


def default_timeout() -> float:
    return settings.task_timeout_s()


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without variables that may hold credentials (passwords, tokens, API keys)."""
    return {k: v for k, v in (os.environ if env is None else env).items() if not _SECRET.search(k)}


def read_task_info(path: str | Path) -> TaskInfo:
    """Metadata and cases from the file's literals, without executing it; else imported in a worker process."""
    info = read_task_literals(path)
    return info if info is not None else load_task_isolated(resolve_task_path(path))


def load_task_isolated(path: str | Path, timeout_s: float | None = None, private: tuple[Path, ...] = ()) -> Task:
    """The validated task, imported in a sandboxed worker process that is killed after ``timeout_s``; ``private``
    folders are hidden from it besides the harness cache (``harness.isolated.private_roots``)."""
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
        payload = _load_in_worker(p, default_timeout() if timeout_s is None else timeout_s, private)
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


def _load_in_worker(path: Path, timeout_s: float, private: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The task's payload (``task_payload``), made by importing it in a sandboxed worker process."""
    from harness.isolated import run_module

    done = run_module(
        "harness.task_loader",
        [str(path)],
        timeout_s=timeout_s,
        reads=[path],
        private=private,
        memory_bytes=TASK_MEMORY_BYTES,
        cpu_s=max(timeout_s, 1.0) * 2,
    )
    if done.timed_out:
        raise TaskFormatError(
            f"{path}: importing the task did not finish within {timeout_s:g} s "
            "(its module-level code runs when the task is loaded)",
            hint=f"make the task's module-level code fast, or raise {settings.TASK_TIMEOUT} (seconds)",
        )
    try:
        payload = json.loads(done.report.decode("utf-8")) if done.report.strip() else None
    except (UnicodeDecodeError, ValueError):
        payload = None
    if done.returncode != 0 or not isinstance(payload, dict):
        last = done.output.splitlines()[-1] if done.output else "no output"
        raise TaskFormatError(
            f"{path}: the process importing the task exited with {done.describe_exit()} ({last})"
            + ("" if done.sandboxed else " [task sandbox off]")
        )
    if not payload.get("ok"):
        error = TaskNotFoundError if payload.get("kind") == "TaskNotFoundError" else TaskFormatError
        message, hint = payload.get("message"), payload.get("hint")
        raise error(
            str(message) if message else f"{path}: the task could not be loaded",
            hint=str(hint) if hint else None,
        )
    if not isinstance(payload.get("task"), dict):
        raise TaskFormatError(f"{path}: the process importing the task sent a malformed reply")
    return payload["task"]


# -- the payload: a Task as JSON, held-out cases included (it only travels between harness processes) --------------
def _case_payload(case: Case) -> dict[str, Any]:
    # the parameters as [name, value] pairs, in the task's order: a case's shape is its integers in the order the
    # task wrote them (kope.memory.shapes), and the disk cache writes sorted keys (harness.jsonfile), which would
    # reorder a dict: a task loaded from the cache then had another shape than the same task loaded fresh, and a
    # cost model that reads shapes proposed differently in the first run after a cache miss than in the next
    return {
        "index": case.index,
        "name": case.name,
        "params": [[k, v] for k, v in case.params.items()],
        "heldout": case.heldout,
    }


def _case_params(value: Any) -> dict[str, Any]:
    if not isinstance(value, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in value
    ):
        raise ValueError("case parameters are not a list of [name, value] pairs")
    return {name: item for name, item in value}


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
    """The ``Task`` of a payload; ``TaskFormatError`` when the payload is not one (a worker's reply is the task's
    own data: a hostile task can write anything to it)."""
    try:
        return _task_from_payload(data, path)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TaskFormatError(f"{path}: the process importing the task sent a malformed task ({exc!r:.200})") from None


def _task_from_payload(data: dict[str, Any], path: Path) -> Task:
    def cases(key: str) -> list[Case]:
        return [Case(c["index"], c["name"], _case_params(c["params"]), bool(c["heldout"])) for c in data[key]]

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


def _harness_code() -> dict[str, int]:
    """Every function of the harness's loaded modules (and its classes' methods) by name: the id of its code."""
    found: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if not (name == "harness" or name.startswith("harness.")) or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if getattr(value, "__module__", None) != name:
                continue
            members = vars(value).items() if isinstance(value, type) else [("", value)]
            for member, item in members:
                code = getattr(getattr(item, "__func__", item), "__code__", None)
                if code is not None:
                    found[f"{name}.{attr}{'.' + member if member else ''}"] = id(code)
    return found


def main(argv: list[str]) -> int:
    """The worker: the task's payload as one JSON object on stdout; what the task prints goes to stderr."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import harness.compare
    import harness.fast_compare  # noqa: F401 - watched: a task that patches the comparison is refused
    from harness.task import load_task

    path = argv[0]
    before = _harness_code()
    try:
        task = load_task(path)
        after = _harness_code()
        changed = sorted(k for k, v in before.items() if after.get(k) != v)
        if changed:
            raise TaskFormatError(
                f"{path}: importing the task replaced the harness's own code "
                f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}); a task may not patch the harness"
            )
        payload: dict[str, Any] = {"ok": True, "task": task_payload(task)}
    except HarnessError as exc:
        payload = {"ok": False, "kind": type(exc).__name__, "message": exc.message, "hint": exc.hint}
    channel.write(json.dumps(payload, allow_nan=False))
    channel.flush()
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # the task may have started threads: do not wait for them
