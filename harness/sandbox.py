"""Worker processes: fresh, spawned, limited, watched.

Each worker is ``python -m harness.worker ROLE FD_IN FD_OUT`` started with
``subprocess.Popen`` (a new interpreter: nothing inherited but the
environment), in its own session (so the whole process group can be killed),
with its working directory in a private temporary folder and stdin closed.
Requests and replies travel over two pipes (``harness.ipc``); stdout and
stderr go to files that are read back truncated.

Limits:

* wall clock: every request has a deadline; past it the process group is
  killed (SIGKILL) and the caller gets ``WorkerTimeout``;
* memory: the worker lowers its own ``RLIMIT_AS`` (soft and hard, so the
  candidate cannot raise it) to its size after importing torch plus
  ``Limits.memory_bytes`` (CPU targets; CUDA needs a huge address space); and
  the parent polls the worker's resident set every 50 ms and kills it past
  ``memory_bytes`` (all targets);
* output: ``RLIMIT_FSIZE`` caps what the worker (and its compiler) can write
  to one file, so a print loop cannot fill the disk; no core dumps.

A crash, ``os._exit``, a signal or a kill is ``WorkerDied`` with the exit
code or signal name and the end of the captured output.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness.ipc import MessageReader, PeerClosed, ProtocolError, ReadTimeout, write_message
from harness.record import excerpt

OUTPUT_KEEP = 4000


@dataclass
class Limits:
    memory_bytes: int = 8 << 30  # resident set (and address space above the torch baseline on CPU)
    file_bytes: int = 256 << 20  # largest file the worker may write (stdout/stderr, build outputs)
    max_message_bytes: int = 8 << 30  # largest reply the parent accepts


class WorkerError(Exception):
    """Base for a worker that did not answer."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class WorkerDied(WorkerError):
    def __init__(self, message: str, output: str, kind: str) -> None:
        super().__init__(message, output)
        self.kind = kind  # e.g. runtime_error:SIGSEGV, runtime_error:exit_code_3, runtime_error:out_of_memory


class WorkerTimeout(WorkerError):
    pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


class Worker:
    _live: set[Worker] = set()  # every live worker is watched while the parent waits on any of them

    def __init__(self, role: str, env: dict[str, str], limits: Limits, uses_rlimit_as: bool) -> None:
        self.role = role
        self.workdir = Path(tempfile.mkdtemp(prefix=f"kope-{role}-"))  # its cwd and captured output; removed by close()
        self.limits = limits
        self.killed_for_memory = False
        self.pending = 0  # requests sent and not yet answered
        workdir = self.workdir
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        self._stdout = open(workdir / f"{role}.stdout", "wb")
        self._stderr = open(workdir / f"{role}.stderr", "wb")
        child_env = dict(env)
        root = str(Path(harness.__file__).resolve().parent.parent)
        child_env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        child_env["KOPE_WORKER_MEMORY_BYTES"] = str(limits.memory_bytes)
        child_env["KOPE_WORKER_FILE_BYTES"] = str(limits.file_bytes)
        child_env["KOPE_WORKER_RLIMIT_AS"] = "1" if uses_rlimit_as else "0"
        child_env["PYTHONDONTWRITEBYTECODE"] = "1"
        child_env["PYTHONUNBUFFERED"] = "1"
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness.worker", role, str(p2c_r), str(c2p_w)],
                stdin=subprocess.DEVNULL,
                stdout=self._stdout,
                stderr=self._stderr,
                cwd=workdir,
                env=child_env,
                pass_fds=(p2c_r, c2p_w),
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
        self._to_child = p2c_w
        self._from_child = c2p_r
        self._reader = MessageReader(c2p_r, max_bytes=limits.max_message_bytes)
        self.started = time.monotonic()
        Worker._live.add(self)

    # -- requests --------------------------------------------------------------------------------
    def send(self, header: dict[str, Any], tensors: list[Any] = ()) -> None:
        try:
            write_message(self._to_child, header, list(tensors))
        except (BrokenPipeError, OSError):
            raise self._died() from None
        self.pending += 1

    def receive(self, timeout: float, what: str) -> tuple[dict[str, Any], list[Any]]:
        try:
            message = self._reader.read(timeout, on_wait=self._watch)
            self.pending -= 1
            return message
        except ReadTimeout:
            self.kill()
            raise WorkerTimeout(f"{what} did not finish within {timeout:.0f} s", self.output()) from None
        except PeerClosed:
            raise self._died() from None
        except ProtocolError as exc:
            self.kill()
            raise WorkerDied(
                f"the {self.role} worker sent a malformed reply: {exc}", self.output(), "runtime_error:protocol"
            ) from None

    def request(
        self, header: dict[str, Any], timeout: float, what: str, tensors: list[Any] = ()
    ) -> tuple[dict[str, Any], list[Any]]:
        self.send(header, tensors)
        return self.receive(timeout, what)

    # -- watching ----------------------------------------------------------------------------------
    def rss_bytes(self) -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return 0

    def _watch(self) -> None:
        for worker in list(Worker._live):
            if worker.proc.poll() is None and worker.rss_bytes() > worker.limits.memory_bytes:
                worker.killed_for_memory = True
                worker.kill()

    def _died(self) -> WorkerDied:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        output = self.output()
        if self.killed_for_memory:
            return WorkerDied(
                f"the {self.role} worker went over the memory limit ({self.limits.memory_bytes >> 20} MiB resident) "
                "and was killed",
                output,
                "runtime_error:out_of_memory",
            )
        if code is not None and code < 0:
            name = _signal_name(-code)
            if name == "SIGXFSZ":
                return WorkerDied(
                    f"the {self.role} worker wrote more than {self.limits.file_bytes >> 20} MiB to one file",
                    output,
                    "runtime_error:output_limit",
                )
            return WorkerDied(f"the {self.role} worker was killed by {name}", output, f"runtime_error:{name}")
        return WorkerDied(
            f"the {self.role} worker exited with code {code} in the middle of a request",
            output,
            f"runtime_error:exit_code_{code}",
        )

    # -- ending ------------------------------------------------------------------------------------
    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self, timeout: float = 5.0) -> None:
        """Ask politely, then kill the whole process group (left-over children included)."""
        Worker._live.discard(self)
        if self.proc.poll() is None:
            try:
                self.send({"op": "exit"})
                self.proc.wait(timeout=timeout)
            except (WorkerError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.kill()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._stdout.close()
        self._stderr.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def output(self, limit: int = OUTPUT_KEEP) -> str:
        """The captured stdout and stderr, each cut to its first and last lines."""
        parts = []
        for stream in ("stdout", "stderr"):
            path = self.workdir / f"{self.role}.{stream}"
            try:
                size = path.stat().st_size
                with open(path, "rb") as f:
                    head = f.read(limit // 2)
                    tail = b""
                    if size > limit:
                        f.seek(max(size - limit // 2, limit // 2))
                        tail = f.read()
            except OSError:
                continue
            text = head.decode(errors="replace")
            if tail:
                text += f"\n[... {size - len(head) - len(tail)} bytes elided ...]\n" + tail.decode(errors="replace")
            if text.strip():
                parts.append(f"--- {stream} ---\n{text.strip()}")
        return excerpt("\n".join(parts), limit) or ""


class WorkerPool:
    """Idle, loaded reference workers kept for the next evaluation of the same task.

    A reference worker runs only the task's own code (never a candidate), so it can
    serve several evaluations; reusing it saves a torch import and the task load
    (about a second of CPU each time). ``take`` hands a worker to one evaluation at a
    time; ``give`` returns a healthy one; at most ``size`` idle workers are kept and
    all are closed at interpreter exit (or by ``close_all``).
    """

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._idle: list[tuple[tuple, Worker, dict]] = []
        self._lock = threading.Lock()

    def take(self, key: tuple) -> tuple[Worker, dict] | None:
        with self._lock:
            for i, (k, worker, info) in enumerate(self._idle):
                if k == key:
                    del self._idle[i]
                    if worker.proc.poll() is None:
                        return worker, info
                    worker.close()
                    return None
        return None

    def give(self, key: tuple, worker: Worker, info: dict) -> None:
        if worker.pending or worker.proc.poll() is not None:  # an unread reply would answer the next evaluation
            worker.close()
            return
        with self._lock:
            self._idle.append((key, worker, info))
            surplus = self._idle[: -self.size] if len(self._idle) > self.size else []
            self._idle = self._idle[len(surplus) :]
        for _, old, _ in surplus:
            old.close()

    def close_all(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, worker, _ in idle:
            worker.close()


REFERENCE_POOL = WorkerPool()
atexit.register(REFERENCE_POOL.close_all)
