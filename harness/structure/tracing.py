"""Tracing a task in a worker process with a timeout, cached by the task file's content hash.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import IO, Any

from harness.errors import HarnessError
from harness.structure.graph import CaseGraph, case_graph

TRACER_VERSION = "3"  # 3: every value records its device
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_CASES = 16
STARTUP_TIMEOUT_S = 120.0  # the worker's imports (torch) before the per-task timeout starts
TRACE_MEMORY_BYTES = 32 << 30  # the tracing worker's address space (a reference may run on real tensors)


class StructureError(HarnessError):
    """The task's reference could not be traced (it failed, or ran past the timeout)."""


@dataclass
class Trace:
    task: str
    operator: str
    digest: str  # sha256 of the task file
    cases_total: int
    cases: list[CaseGraph]
    failures: list[tuple[str, str]]  # (case, error) for cases whose reference failed under tracing

    @property
    def first(self) -> CaseGraph:
        return self.cases[0]


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "unknown"


def cache_dir() -> Path:
    from harness.commands import cache_root

    return cache_root() / "structure"


def _key(source: bytes, max_cases: int) -> str:
    digest = hashlib.sha256()
    digest.update(source)
    digest.update(f"\0{TRACER_VERSION}\0{_torch_version()}\0{max_cases}".encode())
    return digest.hexdigest()


def _run_worker(paths: list[Path], timeout: float, max_cases: int) -> dict[str, dict[str, Any]]:
    """Trace ``paths`` in one worker process: {path: JSON result}, one for every path.

    The timeout applies to each task: a task that runs past it gets an ``error`` result, the
    worker is stopped and a new one goes on with the tasks after it; a worker that dies gets
    the task it was tracing an ``error`` result naming its exit status and last stderr lines.
    """
    results: dict[str, dict[str, Any]] = {}
    rest = list(paths)
    while rest:
        done = _one_worker(rest, timeout, max_cases, results)
        rest = rest[done:]
    return results


def _one_worker(paths: list[Path], timeout: float, max_cases: int, results: dict[str, dict[str, Any]]) -> int:
    """Run one worker over ``paths`` until it ends or stalls; returns how many tasks got a result."""
    from harness.isolated import command, use_sandbox

    sandboxed = use_sandbox()
    lines: queue.Queue[str | None] = queue.Queue()
    with tempfile.TemporaryFile("w+") as stderr, tempfile.TemporaryDirectory(prefix="kope-trace-") as scratch:
        cmd, env = command(
            "harness.structure.trace_worker",
            [*map(str, paths), "--max-cases", str(max_cases)],
            Path(scratch),
            sandboxed=sandboxed,
            reads=paths,
            memory_bytes=TRACE_MEMORY_BYTES,
            cpu_s=2 * max(timeout, STARTUP_TIMEOUT_S),  # per task: each is traced in a process of its own
        )
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            cwd=scratch,
            env=env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=_read_lines, args=(proc.stdout, lines), daemon=True)
        reader.start()
        done = 0
        ready = False
        try:
            while done < len(paths):
                try:
                    line = lines.get(timeout=timeout if ready else max(timeout, STARTUP_TIMEOUT_S))
                except queue.Empty:
                    results[str(paths[done])] = {
                        "error": f"tracing the reference took longer than {timeout:.0f} s",
                        "hint": "the reference is very slow or hangs on its own inputs",
                    }
                    return done + 1
                if line is None:  # the worker ended before every task had its result
                    proc.wait()
                    stderr.seek(0)
                    tail = stderr.read().strip().splitlines()[-3:]
                    results[str(paths[done])] = {
                        "error": f"the tracing worker failed (exit {proc.returncode}): "
                        f"{' | '.join(tail) or 'no output'}"
                    }
                    return done + 1
                if line.strip() == "ready":
                    ready = True
                elif line.startswith("{"):
                    try:
                        data = json.loads(line)
                    except ValueError:
                        data = None
                    if not isinstance(data, dict) or data.get("path") != str(paths[done]):
                        data = {"error": "the tracing worker sent a malformed result"}
                    results[str(paths[done])] = data  # in order: a reply names the task it was asked for
                    done += 1
            return done
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):  # it may end between poll and kill
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()


def _read_lines(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _cached(p: Path, max_cases: int) -> tuple[Path, dict[str, Any] | None]:
    key = _key(p.read_bytes(), max_cases)
    cached = cache_dir() / f"{key}.json"
    if cached.is_file():
        try:
            return cached, json.loads(cached.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    return cached, None


def _store(cached: Path, data: dict[str, Any]) -> None:
    if any("error" in c for c in data.get("cases", [])) or "error" in data:
        return  # a failing reference is traced again next time (it may need a package installed meanwhile)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, cached)


_FAILED: dict[str, dict[str, Any]] = {}  # tasks ``warm`` could not trace, by cache key, until trace_task reports them


def warm(paths: list[str | Path], *, timeout: float = DEFAULT_TIMEOUT_S, max_cases: int = DEFAULT_MAX_CASES) -> int:
    """Trace every task of ``paths`` not traced yet, in one worker process; returns how many were traced.

    A task that fails or runs past ``timeout`` does not stop the others; ``trace_task`` on it
    then raises its error once without tracing it again.
    """
    todo = []
    for path in paths:
        p = Path(path).resolve()
        cached, data = _cached(p, max_cases)
        if data is None:
            todo.append((p, cached))
    if todo:
        results = _run_worker([p for p, _ in todo], timeout, max_cases)
        for p, cached in todo:
            data = results[str(p)]
            _store(cached, data)
            if "error" in data:
                _FAILED[cached.name] = data  # its own trace_task reports it without tracing it again
    return len(todo)


def trace_task(
    path: str | Path, *, timeout: float = DEFAULT_TIMEOUT_S, max_cases: int = DEFAULT_MAX_CASES, cache: bool = True
) -> Trace:
    """The traced op graphs of ``path``'s cases (see the module docstring)."""
    p = Path(path).resolve()
    try:
        source = p.read_bytes()
    except OSError as exc:
        raise StructureError(f"{p}: cannot read the task file: {exc}") from None
    cached, data = _cached(p, max_cases) if cache else (None, None)
    if cached is not None and data is None:
        data = _FAILED.pop(cached.name, None)
    if data is None:
        data = _run_worker([p], timeout, max_cases)[str(p)]
        if cached is not None:
            _store(cached, data)
    if "error" in data:
        raise StructureError(f"{p}: {data['error']}", hint=data.get("hint"))
    graphs = [case_graph(c) for c in data["cases"] if "error" not in c]
    failures = [(c["case"], c["error"]) for c in data["cases"] if "error" in c]
    if not graphs:
        detail = "; ".join(f"{case}: {error}" for case, error in failures[:2])
        raise StructureError(f"{p}: the reference failed on every traced case ({detail})")
    return Trace(
        task=str(p),
        operator=data.get("operator", p.stem),
        digest=hashlib.sha256(source).hexdigest(),
        cases_total=int(data.get("cases_total", len(graphs))),
        cases=graphs,
        failures=failures,
    )
