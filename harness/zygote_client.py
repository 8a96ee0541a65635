"""The parent side of the zygote (``harness.zygote``): one booted, sandboxed process per worker environment
that forks workers on request, so a worker's boot costs a fork.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.ipc import BootFailed, ProtocolError, Ready, Spawn, State, ZygoteState, decode, decode_greeting, encode
from harness.record import excerpt
from harness.worker_limits import BOOT_TIMEOUT_S, OUTPUT_KEEP, WorkerDied, WorkerError, WorkerTimeout


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
        if self._ready:
            return
        readable, _, _ = select.select([self._control], [], [], timeout)
        message = self._control.recv(1 << 16) if readable else b""
        greeting: Ready | BootFailed | None = None
        why = "no greeting" if readable else f"no greeting within {timeout:.0f} s"
        if message:
            try:
                greeting = decode_greeting(json.loads(message))
            except (ValueError, ProtocolError) as exc:
                why = f"a malformed greeting ({exc})"
        if isinstance(greeting, BootFailed):
            why = greeting.message
        if not isinstance(greeting, Ready):
            self.close()
            raise WorkerDied(f"the worker zygote failed to start: {why}", self.output(), "runtime_error:boot")
        self._ready = True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(self, config: dict[str, Any], fds: Sequence[int], timeout: float = BOOT_TIMEOUT_S) -> ForkedProcess:
        """Fork a worker with ``config`` on ``fds`` (to it, from it, report, stdout, stderr); its PID 1's process."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        with ours:
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            try:
                with self._lock:
                    self._wait_ready(timeout)
                    socket.send_fds(
                        self._control, [json.dumps(encode(Spawn(config))).encode()], [*fds, theirs.fileno()]
                    )
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
        with self._lock:
            self._wait_ready(timeout)
            self._control.send(json.dumps(encode(State())).encode())
            readable, _, _ = select.select([self._control], [], [], timeout)
            if not readable:
                raise WorkerTimeout(f"the zygote did not answer within {timeout:.0f} s", self.output())
            try:
                return encode(decode(ZygoteState, json.loads(self._control.recv(1 << 16))))
            except (ValueError, ProtocolError) as exc:
                raise WorkerDied(
                    f"the zygote sent a malformed state: {exc}", self.output(), "runtime_error:protocol"
                ) from None

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


def close_zygotes() -> None:
    with _ZYGOTES_LOCK:
        zygotes = list(_ZYGOTES.values())
        _ZYGOTES.clear()
    for zygote in zygotes:
        zygote.close()
