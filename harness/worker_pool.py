"""Worker processes: started ahead (warm), sandboxed, limited, watched from outside, used once.

A worker is ``python -m harness.worker FD_IN FD_OUT FD_REPORT CONFIG`` started with
``subprocess.Popen`` in its own session (the whole process group can be killed), inside the
OS sandbox (``harness.sandbox.launcher()``: user, PID, mount, network and IPC namespaces,
``--kill-child``) unless the sandbox is switched off, with a private working folder
(stdout/stderr files and the scratch mount point) and stdin closed. It boots (read-only view,
scratch tmpfs, landlock, torch imported) and says ``ready``; the first request decides its
role (``load`` with ``role`` reference or candidate).

``WarmPool`` keeps a few booted workers per configuration so an evaluation never waits for
an interpreter and a torch import: ``take`` hands one out (a candidate worker serves exactly
one candidate and is then closed) and starts its replacement in the background: never while
another process on the machine is timing (``harness.timing.machine_lock``), and stopped
(SIGSTOP) while this process times (``pause``/``resume``). ``REFERENCE_POOL`` keeps
loaded reference workers (they run only the task's own code) for the next evaluation of the
same task. Both are closed at interpreter exit; ``live_workers()`` lists what is running.

Limits: every request has a deadline (past it the process group is killed: ``WorkerTimeout``);
the parent polls the worker's resident set every 50 ms and kills it past ``memory_bytes``
(the worker also lowers its own ``RLIMIT_AS`` on CPU targets); ``RLIMIT_FSIZE`` caps every
file it writes. A crash, exit or kill is ``WorkerDied`` with the exit code or signal name and
the end of the captured output.

While a request is in flight the worker may send ``compile`` requests of its own (a sandboxed
worker cannot run a compiler or write the compile cache); the parent serves them
(``harness.compile_service.serve_compile``) and keeps waiting for the reply.
"""

from __future__ import annotations

import atexit
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness import settings
from harness.ipc import MessageReader, PeerClosed, ProtocolError, ReadTimeout, write_message
from harness.record import excerpt
from harness.sandbox import CPU_PROFILE, SandboxProfile
from harness.worker import EXIT_REPORT

log = logging.getLogger(__name__)
OUTPUT_KEEP = 4000
BOOT_TIMEOUT_S = 180.0


@dataclass(frozen=True)
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


PIPE_BYTES = 1 << 20  # the default maximum (/proc/sys/fs/pipe-max-size); 16x Linux's default


def _widen(fd: int) -> None:
    """Grow a message pipe's buffer (64 KiB by default): timed units send their outputs back through it, and
    each full buffer costs a context switch between the worker and the parent (2.4x a bare pipe's throughput
    on the 2-core development machine; a timed unit's fetch gained 1.0-1.5x there, its other costs remain).
    A kernel that refuses (a lower pipe-max-size) keeps the default: slower, never wrong."""
    if settings.pipe_default():
        return
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
        self.pending = 0  # requests sent and not yet answered
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
        self.forked = sandboxed and zygote and zygote_enabled() and zygote_refusal(env) is None
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
        try:
            reply, _ = self._reader.read(timeout, on_wait=self._watch)
        except ReadTimeout:
            self.kill()
            raise WorkerTimeout(f"the worker did not start within {timeout:.0f} s", self.output()) from None
        except PeerClosed:
            raise self._died() from None
        except ProtocolError as exc:
            self.kill()
            raise WorkerDied(
                f"the worker sent a malformed greeting: {exc}", self.output(), "runtime_error:protocol"
            ) from None
        if reply.get("op") != "ready":
            self.kill()
            raise WorkerDied(f"the worker failed to start: {reply.get('message')}", self.output(), "runtime_error:boot")
        self.ready = True

    # -- requests --------------------------------------------------------------------------------
    def send(self, header: dict[str, Any], tensors: Sequence[Any] = ()) -> None:
        try:
            write_message(self._to_child, header, list(tensors))
        except (BrokenPipeError, OSError):
            raise self._died() from None
        self.pending += 1

    def receive(self, timeout: float, what: str) -> tuple[dict[str, Any], list[Any]]:
        deadline = time.monotonic() + timeout
        if not self.ready:
            self.wait_ready(max(1.0, deadline - time.monotonic()))
        while True:
            try:
                message = self._reader.read(max(0.0, deadline - time.monotonic()), on_wait=self._watch)
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
            header = message[0]
            if header.get("retire"):
                self.retired = True
            if header.get("op") == "compile":  # the worker asks the parent to compile for it
                self._serve_compile(header)
                continue
            self.pending -= 1
            return message

    def _serve_compile(self, header: dict[str, Any]) -> None:
        if self.compile_service is None:
            reply = {"ok": False, "message": "this worker may not ask for compilation"}
        else:
            try:
                reply = self.compile_service(header)
            except Exception as exc:  # a failure of the service is the candidate's compile error
                reply = {"ok": False, "message": f"{type(exc).__name__}: {exc}"}
        try:
            write_message(self._to_child, reply)
        except (BrokenPipeError, OSError):
            raise self._died() from None

    def request(
        self, header: dict[str, Any], timeout: float, what: str, tensors: Sequence[Any] = ()
    ) -> tuple[dict[str, Any], list[Any]]:
        self.send(header, tensors)
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
                write_message(self._to_child, {"op": "exit"})
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            self._killpg(signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
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


# -- the zygote (harness.zygote): workers forked from one booted process --------------------------------


def zygote_enabled() -> bool:
    return settings.zygote_enabled()


class ForkedProcess:
    """A worker forked by the zygote, seen through its namespace's PID 1 (not our child: a pidfd tells when it
    ended; how, PID 1 reports on the worker's report channel). The subset of ``subprocess.Popen`` the worker
    uses."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._pidfd: int | None = os.pidfd_open(pid)  # open until release(): threads may poll it at once
        self._reported: int | None = None
        self._exited = False
        self._lock = threading.Lock()

    def ended(self, death_signal: int | None, exit_code: int | None) -> None:
        if death_signal is not None:
            self._reported = -death_signal
        elif exit_code is not None:
            self._reported = exit_code

    @property
    def returncode(self) -> int | None:
        if not self._exited:
            return None
        return self._reported if self._reported is not None else -signal.SIGKILL  # killed before it could say

    def poll(self) -> int | None:
        return self.wait(0.0)

    def wait(self, timeout: float | None = None) -> int | None:
        import select

        with self._lock:
            fd = None if self._exited else self._pidfd
        if fd is not None:
            readable, _, _ = select.select([fd], [], [], timeout)
            if not readable:
                if timeout == 0.0:
                    return None
                raise subprocess.TimeoutExpired("harness worker", timeout or 0.0)
            self._exited = True
        return self.returncode

    def signal_group(self, number: int) -> None:
        if self.poll() is None:
            try:
                os.killpg(self.pid, number)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self) -> None:
        with self._lock:
            if self._pidfd is not None and not self._exited:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)

    def release(self) -> None:
        """Close the pidfd (the worker is closed: killed if it still ran)."""
        with self._lock:
            fd, self._pidfd = self._pidfd, None
            self._exited = True
        if fd is not None:
            os.close(fd)


class ZygoteRefused(WorkerError):
    """The zygote would not fork: a fork of it could not use CUDA (``harness.zygote.cuda_state``)."""


class Zygote:
    """The parent side of ``harness.zygote``: one sandboxed process, booted once, that forks workers on request."""

    def __init__(self, env: dict[str, str], hidden: tuple[str, ...]) -> None:
        from harness.sandbox import launcher

        self.key = _zygote_key(env)
        self.workdir = Path(tempfile.mkdtemp(prefix="kope-zygote-"))
        scratch = self.workdir / "scratch"
        scratch.mkdir()
        self._log = open(self.workdir / "zygote.log", "wb")
        self._control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"scratch": str(scratch), "hidden": list(hidden)}
        command = [*launcher(), sys.executable, "-m", "harness.zygote", str(theirs.fileno()), json.dumps(config)]
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                cwd=scratch,
                env=env,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                close_fds=True,
            )
        finally:
            theirs.close()
        self._lock = threading.Lock()
        self._ready = False

    def _wait_ready(self, timeout: float) -> None:
        import select

        if self._ready:
            return
        readable, _, _ = select.select([self._control], [], [], timeout)
        message = self._control.recv(1 << 16) if readable else b""
        try:
            reply = json.loads(message) if message else {}
        except ValueError:
            reply = {}
        if reply.get("op") != "ready":
            why = reply.get("message") or ("no greeting" if readable else f"no greeting within {timeout:.0f} s")
            self.close()
            raise WorkerDied(f"the worker zygote failed to start: {why}", self.output(), "runtime_error:boot")
        self._ready = True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, config: dict[str, Any], fds: Sequence[int], timeout: float = BOOT_TIMEOUT_S) -> ForkedProcess:
        """Fork a worker with ``config`` on ``fds`` (to it, from it, report, stdout, stderr); its PID 1's process."""
        import select

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with ours:
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            try:
                with self._lock:
                    self._wait_ready(timeout)
                    socket.send_fds(self._control, [json.dumps({"config": config}).encode()], [*fds, theirs.fileno()])
            except OSError as exc:
                raise WorkerDied(f"the worker zygote is gone: {exc}", self.output(), "runtime_error:boot") from None
            finally:
                theirs.close()
            readable, _, _ = select.select([ours], [], [], timeout)
            if not readable:
                raise WorkerTimeout(f"the zygote did not fork a worker within {timeout:.0f} s", self.output())
            data, ancillary, _flags, _addr = ours.recvmsg(1, socket.CMSG_SPACE(struct.calcsize("3i")))
            if data == b"0":  # the zygote refused to fork: it found CUDA state in itself (harness.zygote)
                why = b""
                while chunk := ours.recv(1 << 12):
                    why += chunk
                reason = why.decode(errors="replace") or "no reason given"
                with _ZYGOTES_LOCK:
                    _REFUSED[self.key] = reason
                raise ZygoteRefused(f"the worker zygote refused to fork: {reason}")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                pid, _uid, _gid = struct.unpack("3i", payload[: struct.calcsize("3i")])
                if pid > 0:
                    return ForkedProcess(pid)
        raise WorkerDied("the forked worker did not start (no PID 1 credentials)", self.output(), "runtime_error:boot")

    def state(self, timeout: float = BOOT_TIMEOUT_S) -> dict[str, Any]:
        """What the zygote process says of its own CUDA state (``harness.zygote.cuda_state``), read in it."""
        import select

        with self._lock:
            self._wait_ready(timeout)
            self._control.send(json.dumps({"op": "state"}).encode())
            readable, _, _ = select.select([self._control], [], [], timeout)
            if not readable:
                raise WorkerTimeout(f"the zygote did not answer within {timeout:.0f} s", self.output())
            return dict(json.loads(self._control.recv(1 << 16)))

    def output(self) -> str:
        try:
            return excerpt((self.workdir / "zygote.log").read_text(errors="replace"), OUTPUT_KEEP) or ""
        except OSError:
            return ""

    def close(self) -> None:
        """Close the control socket (the zygote exits, and every worker it forked with it) and kill its group."""
        self._control.close()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


_ZYGOTES: dict[tuple[tuple[str, str], ...], Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()
_REFUSED: dict[tuple[tuple[str, str], ...], str] = {}  # environments whose zygote refused to fork, and why


def _zygote_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(env.items()))


def zygote_refusal(env: dict[str, str]) -> str | None:
    """Why workers with this environment boot fresh instead of being forked (None: they may be forked)."""
    with _ZYGOTES_LOCK:
        return _REFUSED.get(_zygote_key(env))


def zygote_for(env: dict[str, str], hidden: tuple[str, ...]) -> Zygote:
    """The live zygote for workers with this environment (started, hiding ``hidden``, when there is none).

    Not keyed by the hidden folders: each forked worker sets up its own view with its own (the zygote runs
    nothing but the harness and torch), so evaluations that hide different folders share one zygote."""
    key = _zygote_key(env)
    with _ZYGOTES_LOCK:
        zygote = _ZYGOTES.get(key)
        if zygote is not None and not zygote.alive():
            zygote.close()
            zygote = None
        if zygote is None:
            zygote = _ZYGOTES[key] = Zygote(env, hidden)
        return zygote


def zygote_processes() -> set[int]:
    """The process ids of every live zygote (its ``unshare`` and the zygote itself; not the workers it forked)."""
    with _ZYGOTES_LOCK:
        zygotes = [z for z in _ZYGOTES.values() if z.alive()]
    pids = set()
    for zygote in zygotes:
        pids.add(zygote.proc.pid)
        try:
            pids.update(
                int(p) for p in Path(f"/proc/{zygote.proc.pid}/task/{zygote.proc.pid}/children").read_text().split()
            )
        except OSError:
            pass
    return pids


def close_zygotes() -> None:
    with _ZYGOTES_LOCK:
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for zygote in zygotes:
        zygote.close()


def live_workers() -> list[Worker]:
    """Every worker process this interpreter started and has not closed yet (pooled ones included)."""
    with Worker._lock:
        return [w for w in Worker._live if w.alive()]


def pool_size() -> int:
    """Warm workers kept per configuration: ``KOPE_HARNESS_POOL`` or one per two CPUs (1 to 4)."""
    size = settings.pool_size()
    if size is not None:
        return size
    from harness.hardware import available_cores

    return max(1, min(4, available_cores() // 2))


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a booted worker depends on (two evaluations with equal specs can share a pool)."""

    env: tuple[tuple[str, str], ...]
    limits: Limits
    uses_rlimit_as: bool
    sandboxed: bool
    hidden: tuple[str, ...]
    cache_root: str | None
    profile: SandboxProfile = CPU_PROFILE  # what the sandbox opens for the target (harness.sandbox.PROFILES)

    def start(self, role: str = "warm", zygote: bool = True) -> Worker:
        """A worker booting now (``zygote=False``: an interpreter and torch of its own, not a fork of the zygote)."""
        return Worker(
            role,
            dict(self.env),
            self.limits,
            self.uses_rlimit_as,
            sandboxed=self.sandboxed,
            hidden=self.hidden,
            cache_root=self.cache_root,
            zygote=zygote,
            profile=self.profile,
        )


class WarmPool:
    """Booted, idle workers by spec; each one is handed out once."""

    def __init__(self, size: int | None = None) -> None:
        self.size = pool_size() if size is None else size
        self._idle: dict[WorkerSpec, list[Worker]] = {}
        self._starting: dict[WorkerSpec, int] = {}
        self._booting: set[Worker] = set()
        self._stopped: set[Worker] = set()  # every worker pause() stopped and nobody continued yet, booting or not
        self._paused = 0
        self._generation = 0  # close_all() starts a new one: boots of an older one are discarded
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a boot ended (worker idle, or the start failed)
        self._waiting: dict[WorkerSpec, int] = {}  # takers waiting for a boot, by spec
        self._served: set[WorkerSpec] = set()  # specs some evaluation already took a worker for
        self._closed = False

    def take(self, spec: WorkerSpec, refill: bool = True) -> Worker:
        """A booted worker for ``spec``: an idle one, else one already starting (its boot is waited for rather
        than a second one started beside it), else one started now; its replacement starts in the background
        (``refill=False``: the caller evaluates no more, so none is booted for nothing)."""
        worker = None
        with self._changed:
            self._served.add(spec)
            while worker is None:
                idle = self._idle.get(spec, [])
                while idle and worker is None:
                    candidate = idle.pop(0)
                    if candidate.alive():
                        worker = candidate
                    else:
                        candidate.close()
                # wait only for a boot no earlier taker waits for (several takers at once start their own)
                if worker is not None or self._closed or self._starting.get(spec, 0) <= self._waiting.get(spec, 0):
                    break
                self._waiting[spec] = self._waiting.get(spec, 0) + 1
                try:
                    self._changed.wait(BOOT_TIMEOUT_S)
                finally:
                    self._waiting[spec] -= 1
            if worker is not None and worker in self._stopped:  # ready already, so it has no boot left to pause
                worker.signal(signal.SIGCONT)
                self._stopped.discard(worker)
        if worker is None:
            worker = spec.start()
        if refill:
            self._refill(spec)
        return worker

    def prefill(self, spec: WorkerSpec, count: int) -> None:
        """Start booting workers for ``spec`` until ``count`` are idle or booting (a command that will evaluate
        soon calls this first, so that the first evaluation's workers boot while the command starts up). Too
        late, once an evaluation took a worker for ``spec``, it does nothing (the pool's own refill goes on)."""
        with self._lock:
            if spec in self._served:
                return
        self._refill(spec, count)

    def _refill(self, spec: WorkerSpec, want: int | None = None) -> None:
        with self._lock:
            want = self.size if want is None else max(want, self.size)
            if self._closed or want <= 0:
                return
            have = len(self._idle.get(spec, [])) + self._starting.get(spec, 0)
            need = max(0, want - have)
            self._starting[spec] = self._starting.get(spec, 0) + need
        for _ in range(need):
            threading.Thread(target=self._start_one, args=(spec,), daemon=True, name="kope-warm-pool").start()

    def _start_one(self, spec: WorkerSpec) -> None:
        from harness.timing import machine_lock

        worker = None
        generation = self._generation
        try:
            with machine_lock(exclusive=False):  # not while another process times something
                worker = spec.start()
            with self._lock:
                self._booting.add(worker)
                if self._paused:
                    worker.signal(signal.SIGSTOP)
                    self._stopped.add(worker)
            worker.wait_ready(10 * BOOT_TIMEOUT_S)  # it may be stopped for a while: see pause()
        except Exception:  # a failed warm start only means the next take starts one itself
            if worker is not None:
                worker.close()
            worker = None
        with self._changed:  # one step: a take() never sees it neither starting nor idle
            self._booting.discard(worker)
            self._starting[spec] -= 1
            if worker is not None and not self._closed and generation == self._generation:
                self._idle.setdefault(spec, []).append(worker)
                worker = None
            self._changed.notify_all()
        if worker is not None:
            worker.close()

    def pause(self) -> None:
        """Stop every booting worker (SIGSTOP) while this process times something; ``resume`` continues them."""
        with self._lock:
            self._paused += 1
            for worker in self._booting:
                worker.signal(signal.SIGSTOP)
                self._stopped.add(worker)

    def resume(self) -> None:
        with self._lock:
            self._paused = max(0, self._paused - 1)
            if not self._paused:
                # every worker stopped, not only those still booting: one that became ready just as pause() came
                # was stopped and then moved to the idle list, and would have stayed stopped there for good (its
                # taker's first request then never got an answer: timeout:compile after 420 s in a test run)
                for worker in self._stopped:
                    worker.signal(signal.SIGCONT)
                self._stopped.clear()

    def close_all(self) -> None:
        """Close every idle worker and kill the ones still booting."""
        with self._changed:
            self._closed = True
            self._generation += 1
            self._served.clear()
            idle, self._idle = self._idle, {}
            booting = list(self._booting)
            self._changed.notify_all()
        for workers in idle.values():
            for worker in workers:
                worker.close()
        for worker in booting:  # its boot thread closes it; the folder goes now (at exit that thread never runs)
            worker.kill()
            shutil.rmtree(worker.workdir, ignore_errors=True)

    def reopen(self) -> None:
        with self._lock:
            self._closed = False


class ReferencePool:
    """Idle, loaded reference workers kept for the next evaluation of the same task.

    A reference worker runs only the task's own code (never a candidate), so it can serve
    several evaluations. ``take`` hands a worker to one evaluation at a time; ``give``
    returns a healthy one; at most ``size`` idle workers are kept.
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
                    if worker.alive():
                        return worker, info
                    worker.close()
                    return None
        return None

    def give(self, key: tuple, worker: Worker, info: dict) -> None:
        # an unread reply would answer the next one; a retired worker (sticky device error) is never reused
        if worker.pending or worker.retired or not worker.alive() or self.size <= 0:
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


REFERENCE_POOL = ReferencePool()
WARM_POOL = WarmPool()


def one_shot() -> None:
    """This process evaluates once and exits: boot no warm worker for a next evaluation, keep no reference worker."""
    WARM_POOL.size = 0
    REFERENCE_POOL.size = 0


def close_pools() -> None:
    """Close every pooled worker (idle reference workers and warm workers)."""
    REFERENCE_POOL.close_all()
    WARM_POOL.close_all()
    WARM_POOL.reopen()


def _close_everything() -> None:
    WARM_POOL.close_all()
    REFERENCE_POOL.close_all()
    for worker in live_workers():
        worker.close(timeout=0.5)
    with Worker._lock:
        left = list(Worker._live)  # started and killed, never closed (e.g. a boot cut short by the exit)
    for worker in left:
        shutil.rmtree(worker.workdir, ignore_errors=True)
    close_zygotes()


atexit.register(_close_everything)
