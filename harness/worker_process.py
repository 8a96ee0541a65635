"""One worker process: started (or forked by the zygote), sandboxed, limited, watched from outside, used once.

How it starts, its limits and the compile requests it may send: docs/harness-workers.md, "One worker process, and the requests it answers". The pools that
keep booted workers are ``harness.worker_pool``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import harness
from harness import settings
from harness.ipc import (
    BootFailed,
    CompileReply,
    CompileRequest,
    Exit,
    MessageReader,
    PeerClosed,
    ProtocolError,
    ReadTimeout,
    Reply,
    Request,
    decode_greeting,
    decode_reply,
    send,
)
from harness.record import excerpt
from harness.sandbox import CPU_PROFILE, SandboxProfile
from harness.worker import EXIT_REPORT
from harness.worker_limits import BOOT_TIMEOUT_S, OUTPUT_KEEP, Limits, WorkerDied, WorkerError, WorkerTimeout
from harness.zygote_client import ForkedProcess, ZygoteRefused, zygote_for, zygote_refusal

log = logging.getLogger(__name__)
M = TypeVar("M")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


PIPE_BYTES = 1 << 20  # the default maximum (/proc/sys/fs/pipe-max-size); 16x Linux's default


def _widen(fd: int) -> None:
    """Grow a message pipe's buffer (64 KiB by default): timed units send their outputs back through it, and
    each full buffer costs a context switch between the worker and the parent (2.4x a bare pipe's throughput
    on the 2-core development machine; a timed unit's fetch gained 1.0-1.5x there, its other costs remain).
    A kernel that refuses (a lower pipe-max-size) keeps the default: slower, never wrong."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (OSError, AttributeError):
        pass


def worker_env(target_env: dict[str, str], sandboxed: bool) -> dict[str, str]:
    """The environment a worker starts with: nothing but what it needs when sandboxed."""
    from harness.sandbox import clean_env

    root = str(Path(harness.__file__).resolve().parent.parent)
    extra = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", **target_env}
    if sandboxed:
        env = clean_env(extra)
    else:
        env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


class Worker:
    _live: set[Worker] = set()  # every live worker is watched while the parent waits on any of them
    _lock = threading.Lock()

    def __init__(
        self,
        role: str,
        env: dict[str, str],
        limits: Limits,
        uses_rlimit_as: bool,
        *,
        sandboxed: bool = False,
        hidden: tuple[str, ...] = (),
        cache_root: str | None = None,
        zygote: bool = True,
        profile: SandboxProfile = CPU_PROFILE,
    ) -> None:
        self.role = role  # "reference", "candidate" or "warm" until the first load
        self.sandboxed = sandboxed
        self.workdir = Path(tempfile.mkdtemp(prefix="kope-worker-"))
        self.scratch = self.workdir / "scratch"
        self.scratch.mkdir()
        self.limits = limits
        self.killed_for_memory = False
        self.retired = False  # it met a sticky device error: never reused (harness.worker.serve)
        self._asked: deque[str] = deque()  # the kinds of the requests sent and not yet answered, oldest first
        self.ready = False
        self.compile_service: Callable[[dict], dict] | None = None
        self._pid: int | None = None
        self._carry = b""
        self.death_signal: int | None = None
        self.exit_code: int | None = None  # reported by the namespace's PID 1 (a forked worker is not our child)
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        _widen(p2c_w)
        _widen(c2p_w)
        rep_r, rep_w = os.pipe()
        self._stdout = open(self.workdir / "worker.stdout", "wb")
        self._stderr = open(self.workdir / "worker.stderr", "wb")
        config = {
            "sandboxed": sandboxed,
            "scratch": str(self.scratch),
            "hidden": list(hidden),
            "memory_bytes": limits.memory_bytes,
            "file_bytes": limits.file_bytes,
            "rlimit_as": uses_rlimit_as,
            "cache_root": cache_root,
            "profile": profile.to_config(),
        }
        self.forked = sandboxed and zygote and settings.zygote_enabled() and zygote_refusal(env) is None
        self.proc: subprocess.Popen[bytes] | ForkedProcess
        try:
            if self.forked:  # a fork of the zygote: the same sandbox, without an interpreter and torch to boot
                fds = [p2c_r, c2p_w, rep_w, self._stdout.fileno(), self._stderr.fileno()]
                try:
                    self.proc = zygote_for(env, hidden).spawn(config, fds)
                except ZygoteRefused as refused:  # it touched CUDA: this worker (and every later one) boots fresh
                    log.warning("%s; workers with this environment boot on their own from now on", refused)
                    self.forked = False
            if not self.forked:
                command = [
                    sys.executable,
                    "-m",
                    "harness.worker",
                    str(p2c_r),
                    str(c2p_w),
                    str(rep_w),
                    json.dumps(config),
                ]
                if sandboxed:
                    from harness.sandbox import launcher

                    command = launcher() + command
                self.proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=self._stdout,
                    stderr=self._stderr,
                    cwd=self.scratch,
                    env=env,
                    pass_fds=(p2c_r, c2p_w, rep_w),
                    start_new_session=True,
                    close_fds=True,
                )
        except BaseException as exc:
            if isinstance(exc, WorkerError):  # what the forked child said before it went (e.g. a failed unshare)
                exc.output = "\n".join(filter(None, [exc.output, self.output()]))
            for fd in (p2c_w, c2p_r, rep_r):
                os.close(fd)
            self._stdout.close()
            self._stderr.close()
            shutil.rmtree(self.workdir, ignore_errors=True)
            raise
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
            os.close(rep_w)
        self._to_child = p2c_w
        self._from_child = c2p_r
        self._report = rep_r
        os.set_blocking(rep_r, False)
        self._reader = MessageReader(c2p_r, max_bytes=limits.max_message_bytes)
        self.started = time.monotonic()
        with Worker._lock:
            Worker._live.add(self)

    # -- start-up ----------------------------------------------------------------------------------
    def wait_ready(self, timeout: float = BOOT_TIMEOUT_S) -> None:
        if self.ready:
            return
        late, malformed = f"the worker did not start within {timeout:.0f} s", "the worker sent a malformed greeting"
        greeting, _ = self._read(timeout, decode_greeting, late, malformed)
        if isinstance(greeting, BootFailed):
            self.kill()
            raise WorkerDied(f"the worker failed to start: {greeting.message}", self.output(), "runtime_error:boot")
        self.ready = True

    def _read(self, timeout: float, decode: Callable[[Any], M], late: str, malformed: str) -> tuple[M, list[Any]]:
        """The next message, decoded; a timeout, a dead worker or a malformed message (the worker is broken,
        ``runtime_error:protocol``) raise the ``WorkerError`` that says so."""
        try:
            header, tensors = self._reader.read(timeout, on_wait=self._watch)
            return decode(header), tensors
        except ReadTimeout:
            self.kill()
            raise WorkerTimeout(late, self.output()) from None
        except PeerClosed:
            raise self._died() from None
        except ProtocolError as exc:
            self.kill()
            raise WorkerDied(f"{malformed}: {exc}", self.output(), "runtime_error:protocol") from None

    # -- requests --------------------------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Requests sent and not yet answered."""
        return len(self._asked)

    def send(self, request: Request, tensors: Sequence[Any] = ()) -> None:
        try:
            send(self._to_child, request, list(tensors))
        except (BrokenPipeError, OSError):
            raise self._died() from None
        self._asked.append(request.kind)

    def receive(self, timeout: float, what: str) -> tuple[Reply, list[Any]]:
        """The reply to the oldest request in flight (``harness.ipc.decode_reply``; anything malformed: the worker
        is broken, ``runtime_error:protocol``), serving the compile requests the worker sends meanwhile."""
        deadline = time.monotonic() + timeout
        if not self.ready:
            self.wait_ready(max(1.0, deadline - time.monotonic()))
        while True:
            reply, tensors = self._read(
                max(0.0, deadline - time.monotonic()),
                lambda header: decode_reply(self._asked[0] if self._asked else "nothing", header),
                f"{what} did not finish within {timeout:.0f} s",
                f"the {self.role} worker sent a malformed reply",
            )
            if isinstance(reply, CompileRequest):  # the worker asks the parent to compile for it
                self._serve_compile(reply)
                continue
            if getattr(reply, "retire", None):
                self.retired = True
            self._asked.popleft()
            return reply, tensors

    def _serve_compile(self, request: CompileRequest) -> None:
        if self.compile_service is None:
            body = {"ok": False, "message": "this worker may not ask for compilation"}
        else:
            try:
                body = self.compile_service(request.body)
            except Exception as exc:  # a failure of the service is the candidate's compile error
                body = {"ok": False, "message": f"{type(exc).__name__}: {exc}"}
        try:
            send(self._to_child, CompileReply(body))
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def request(
        self, request: Request, timeout: float, what: str, tensors: Sequence[Any] = ()
    ) -> tuple[Reply, list[Any]]:
        self.send(request, tensors)
        return self.receive(timeout, what)

    # -- watching from outside ---------------------------------------------------------------------
    @property
    def pid(self) -> int:
        """The worker's own process id as this process sees it (inside the sandbox it is PID 1)."""
        if self._pid is not None:
            return self._pid
        if not self.sandboxed:
            self._pid = self.proc.pid
            return self._pid
        # unshare -> PID 1 of the namespace (harness.worker._be_init) -> the worker; forked: PID 1 -> the worker
        pid = self.proc.pid
        for _depth in range(1 if self.forked else 2):
            for _ in range(500):
                try:
                    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                except OSError:
                    children = []
                if children:
                    pid = int(children[0])
                    break
                if self.proc.poll() is not None:
                    return self.proc.pid
                time.sleep(0.01)
        self._pid = pid
        return pid

    def tasks(self) -> list[int]:
        """The worker's threads, read from /proc (the candidate cannot hide or fake them)."""
        try:
            return [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            return []

    def cpu_ns(self) -> int:
        """CPU time of the worker's process so far, in ns: its process CPU clock, which counts every thread, those
        that have exited too (a helper started and joined inside a timed call); where the clock cannot be read, the
        live threads' /proc/PID/task/*/schedstat."""
        try:
            return time.clock_gettime_ns(((~self.pid) << 3) | 2)  # the kernel's MAKE_PROCESS_CPUCLOCK(pid, SCHED)
        except OSError:
            pass
        total = 0
        for tid in self.tasks():
            try:
                total += int(Path(f"/proc/{self.pid}/task/{tid}/schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return total

    def violations(self) -> list[int]:
        """Syscall numbers the sandbox trapped since the last call (the worker's SIGSYS reporter).

        A negative number is not a syscall: the namespace's PID 1 reports the signal the worker died of."""
        data = self._carry
        self._carry = b""
        while True:
            try:
                chunk = os.read(self._report, 4096)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            data += chunk
        n = len(data) // 4
        found = list(struct.unpack(f"<{n}i", data[: 4 * n])) if n else []
        for value in found:
            if value <= EXIT_REPORT:
                self.exit_code = EXIT_REPORT - value
            elif value < 0:
                self.death_signal = -value
        if isinstance(self.proc, ForkedProcess):
            self.proc.ended(self.death_signal, self.exit_code)
        return [v for v in found if v >= 0]

    def rss_bytes(self) -> int:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return 0

    def _watch(self) -> None:
        with Worker._lock:
            live = list(Worker._live)
        for worker in live:
            if worker.ready and worker.proc.poll() is None and worker.rss_bytes() > worker.limits.memory_bytes:
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
        if self.sandboxed:
            self._carry = b"".join(struct.pack("<i", v) for v in self.violations())  # keep them for the caller
            if self.death_signal is not None:  # reported by the namespace's PID 1
                code = -self.death_signal
            elif self.forked and self.exit_code is not None:
                code = self.exit_code
        if code is not None and code < 0:
            name = _signal_name(-code)
            if name == "SIGXFSZ":
                return WorkerDied(
                    f"the {self.role} worker wrote more than {self.limits.file_bytes >> 20} MiB to one file",
                    output,
                    "runtime_error:output_limit",
                )
            if name == "SIGSYS" and self.sandboxed:
                return WorkerDied(
                    f"the sandbox stopped the {self.role} worker (SIGSYS): it made a forbidden system call with "
                    "SIGSYS blocked (as C library process spawning does) or tried to replace the harness's SIGSYS "
                    "handler",
                    output,
                    "cheat_detected:sandbox_escape",
                )
            return WorkerDied(f"the {self.role} worker was killed by {name}", output, f"runtime_error:{name}")
        return WorkerDied(
            f"the {self.role} worker exited with code {code} in the middle of a request",
            output,
            f"runtime_error:exit_code_{code}",
        )

    # -- ending ------------------------------------------------------------------------------------
    def _killpg(self, number: int) -> None:
        """Signal the worker's whole process group (a forked one's only while its PID 1 lives: no reused id)."""
        if isinstance(self.proc, ForkedProcess):
            self.proc.signal_group(number)
        else:
            os.killpg(self.proc.pid, number)

    def signal(self, number: int) -> None:
        try:
            self._killpg(number)
        except (ProcessLookupError, PermissionError):
            pass

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                self._killpg(signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def close(self, timeout: float = 5.0) -> None:
        """Ask politely, then kill the whole process group (and with it the sandbox's namespace)."""
        with Worker._lock:
            Worker._live.discard(self)
        if self.proc.poll() is None and self.ready:
            try:
                send(self._to_child, Exit())
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.signal(signal.SIGKILL)
        self.kill()
        if isinstance(self.proc, ForkedProcess):
            self.proc.release()
        for fd in (self._to_child, self._from_child, self._report):
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
            path = self.workdir / f"worker.{stream}"
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


def live_workers() -> list[Worker]:
    """Every worker process this interpreter started and has not closed yet (pooled ones included)."""
    with Worker._lock:
        return [w for w in Worker._live if w.alive()]
