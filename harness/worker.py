"""Worker process entry point: ``python -m harness.worker FD_IN FD_OUT FD_REPORT CONFIG_JSON``.

Boot, roles, PID 1 of the sandbox's namespace and why every exception becomes an error reply:
docs/harness-workers.md, "One worker process, and the requests it answers".
"""

from __future__ import annotations

import errno
import json
import os
import sys
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.ipc import Failed, Message


def _early_limits(config: dict) -> None:
    import resource

    file_bytes = int(config.get("file_bytes", 256 << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def apply_memory_limit(config: dict) -> None:
    """Cap the address space at (size now) + the memory budget, soft and hard (the candidate cannot raise it).
    Not where the target or the sandbox profile says no (CUDA: ``harness.sandbox.SandboxProfile.rlimit_as``)."""
    if not config.get("rlimit_as") or not config.get("profile", {}).get("rlimit_as", True):
        return
    import resource

    budget = int(config.get("memory_bytes", 8 << 30))
    size = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                size = int(line.split()[1]) * 1024
    limit = size + budget + (1 << 30)  # 1 GiB of slack for thread stacks and malloc arenas
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def classify(exc: BaseException, phase: str) -> tuple[str, str]:
    """(error_kind, message) for an exception raised by candidate code in ``phase`` (load|run|time)."""
    from harness.errors import CompileError

    name = type(exc).__name__
    text = f"{name}: {exc}"
    if isinstance(exc, CompileError):
        return ("timeout:compile" if exc.timed_out else "compile_error"), str(exc)
    module = type(exc).__module__ or ""
    if module.startswith("triton") and "Compil" in name:
        return "compile_error", text
    if isinstance(exc, SystemExit):
        return "runtime_error:sys_exit", f"the candidate called sys.exit({exc.code!r})"
    if isinstance(exc, MemoryError) or any(
        s in str(exc) for s in ("can't allocate memory", "out of memory", "Cannot allocate memory", "std::bad_alloc")
    ):
        return "runtime_error:out_of_memory", text
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return (
            "runtime_error:output_limit",
            f"{text} (the candidate wrote past the file-size limit on its captured output)",
        )
    if phase == "load" and isinstance(exc, ImportError):
        return "format_error:import", text
    return f"runtime_error:{name}", text


RETIRED_KEYS = ("ok", "error_kind", "message", "retire", "sticky")


def sticky_error(reply: dict) -> bool:
    """Whether an error reply is a sticky device error (it notes which in ``reply["sticky"]``)."""
    from harness.serve.quarantine import sticky_signature

    name = sticky_signature([reply.get("message"), reply.get("traceback")])
    if name is not None:
        reply["sticky"] = name
    return name is not None


def error_reply(exc: BaseException, phase: str) -> Failed:
    from harness.ipc import Failed

    kind, message = classify(exc, phase)
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    reply = Failed(error_kind=kind, message=message, traceback=tb[-6000:])
    try:
        from harness.targets.base import compile_seconds

        reply.compile_time_s = compile_seconds()
    except Exception:  # the reply matters more than the number
        pass
    return reply


def boot_private(config: dict) -> None:
    """This worker's own part of the boot: inside the sandbox its read-only view with its scratch tmpfs and
    Landlock (writes beneath scratch, and to its profile's device nodes); the compile cache it reads."""
    profile = config.get("profile", {})
    if config.get("sandboxed"):
        from harness import sandbox

        sandbox.enter_view(config["scratch"], config.get("hidden", ()))
        sandbox.restrict_writes(config["scratch"], profile.get("devices", ()))
        for name in profile.get("scratch_env", ()):  # a runtime's cache (Triton's): the tree is read-only
            os.environ[name] = os.path.join(config["scratch"], name.lower())
    if config.get("cache_root"):
        from harness.commands import set_cache_root

        set_cache_root(config["cache_root"])


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's mallopt parameters (malloc.h)


def keep_heap() -> None:
    """Memory a worker frees stays in its heap for the next allocation (glibc: no trimming, no mmap per large block).

    Every timed unit allocates fresh inputs and outputs of the same sizes as the last; with glibc's
    defaults a block of a few MB is its own mmap, so every unit page-faults (and the kernel zeroes) all
    of it again, inside the timed region for the outputs, by a cost that varies with the host more than
    the kernel does. Both workers run with this, so the comparison stays fair. (``GLIBC_TUNABLES``
    would do the same, but the sandbox's secure-exec start drops it.)"""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
        libc.mallopt(M_MMAP_MAX, 0)
    except (OSError, AttributeError):  # not glibc: its allocator's defaults stay
        pass


def boot_shared() -> None:
    """What every worker needs and no worker changes: torch, the harness's worker modules, torch's lazy imports.
    A worker started on its own does this itself; the zygote (``harness.zygote``) does it once for the
    workers it forks."""
    keep_heap()
    import torch  # noqa: F401  (before the memory limit: the baseline includes torch)

    import harness.worker_candidate  # imported now, so that a job never waits for them
    import harness.worker_reference  # noqa: F401
    from harness.guards import prime
    from harness.targets import torch_ext

    torch_ext.install()
    prime()  # torch's lazy imports (torch._dynamo: ~2 s) happen here, not while an evaluation waits


# PID 1's reports on the report channel: a syscall number (>= 0, the SIGSYS reporter), the signal the worker died
# of (-1 .. -64), or EXIT_REPORT - code when it exited (a forked worker's parent cannot wait for it)
EXIT_REPORT = -(1 << 20)


def _be_init(fd_in: int, fd_out: int, report_fd: int) -> None:
    """As PID 1 of the sandbox's PID namespace: fork the worker, reap, and pass on how it ended.

    PID 1 ignores signals it has no handler for (abort() would not end it), so the worker runs
    as its child; when the worker ends, PID 1 reports how on the report channel (the signal as a
    negative number, an exit as ``EXIT_REPORT - code``) and exits; the namespace, and everything
    left in it, dies with it."""
    import struct

    child = os.fork()
    if child == 0:
        return
    os.close(fd_in)
    os.close(fd_out)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        if pid != child:
            continue
        if os.WIFSIGNALED(status):
            os.write(report_fd, struct.pack("<i", -os.WTERMSIG(status)))
            os._exit(128 + os.WTERMSIG(status))
        os.write(report_fd, struct.pack("<i", EXIT_REPORT - os.WEXITSTATUS(status)))
        os._exit(os.WEXITSTATUS(status))


def main(argv: list[str]) -> None:
    fd_in, fd_out, report_fd = int(argv[1]), int(argv[2]), int(argv[3])
    config = json.loads(argv[4])
    if config.get("sandboxed") and os.getpid() == 1:
        _be_init(fd_in, fd_out, report_fd)
    serve(fd_in, fd_out, report_fd, config)


def serve(fd_in: int, fd_out: int, report_fd: int, config: dict, *, shared_booted: bool = False) -> None:
    """Boot (the shared part too unless the zygote did it: ``shared_booted``), say ``ready``, answer requests.

    A sticky device error (``harness.serve.quarantine.sticky_signature``: an illegal address, a trap, a launch
    failure) leaves this process's CUDA context unusable: its reply says ``retire`` (the parent never reuses
    the worker: no reference pool, no warm pool) and every later request gets the same error without touching
    the device, so it stays the outcome of the code that caused it."""
    _early_limits(config)
    from harness.hardware import mark_final_process
    from harness.ipc import (
        BootFailed,
        Exit,
        Failed,
        ProtocolError,
        Ready,
        decode_request,
        encode,
        read_message_blocking,
        send,
        write_message,
    )

    mark_final_process()  # this process forks no more: it may initialise CUDA (harness.hardware)

    try:
        boot_private(config)
        if not shared_booted:
            boot_shared()
    except BaseException as exc:  # say why in the greeting, then stop
        send(fd_out, BootFailed(f"{type(exc).__name__}: {exc}"))
        raise
    send(fd_out, Ready(os.getpid()))
    handler = None
    retired: dict | None = None  # the reply of a sticky device error: every later request gets it
    while True:
        try:
            header, tensors = read_message_blocking(fd_in)
        except Exception:  # the parent went away
            os._exit(0)
        try:
            request = decode_request(header)
        except ProtocolError as exc:  # the parent's own mistake: said, not served
            write_message(fd_out, encode(Failed(error_kind="runtime_error:protocol", message=str(exc))))
            continue
        if isinstance(request, Exit):
            os._exit(0)
        if retired is not None:
            write_message(fd_out, retired)
            continue
        if handler is None:
            try:
                handler = _start_role(request, config, fd_in, fd_out, report_fd)
            except BaseException as exc:
                reply = encode(error_reply(exc, "load"))
                if sticky_error(reply):
                    reply["retire"] = True
                    retired = {k: v for k, v in reply.items() if k in RETIRED_KEYS}
                write_message(fd_out, reply)
                continue
        try:
            answer, out_tensors = handler.handle(request, tensors)
        except BaseException as exc:  # candidate code may raise anything, SystemExit included
            answer, out_tensors = error_reply(exc, getattr(handler, "phase", "run")), []
        reply = encode(answer)
        if not reply.get("ok", True) and sticky_error(reply):
            reply["retire"] = True
            retired = {k: v for k, v in reply.items() if k in RETIRED_KEYS}
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # the candidate may have closed or replaced them
            pass
        write_message(fd_out, reply, out_tensors)


def open_device(profile: dict) -> None:
    """A GPU profile's worker initialises CUDA now, before seccomp and before any candidate code: the driver
    opens its device nodes and maps its memory here (this process forks no more: ``harness.hardware``), and
    the CUDA allocator gets the device-memory cap (``device_memory_fraction``) that replaces ``RLIMIT_AS``."""
    if not profile.get("devices") and profile.get("device_memory_fraction") is None:
        return
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return  # no device here (a CPU machine): the rest of the profile still applies
    torch.cuda.init()
    fraction = profile.get("device_memory_fraction")
    if fraction:
        torch.cuda.set_per_process_memory_fraction(float(fraction))
    torch.zeros(1, device="cuda").add_(1)
    torch.cuda.synchronize()


def _start_role(request: Message, config: dict, fd_in: int, fd_out: int, report_fd: int):
    from harness.ipc import Load

    if not isinstance(request, Load):
        raise ValueError(f"the first request must be load, not {request.kind!r}")
    role = request.role or ("reference" if request.candidate is None else "candidate")
    from harness import cpu

    if config.get("sandboxed"):
        cpu.use_remote_compiler(fd_in, fd_out)
    profile = config.get("profile", {})
    open_device(profile)
    if role == "reference":
        apply_memory_limit(config)
        from harness.worker_reference import ReferenceWorker

        return ReferenceWorker()
    if role == "candidate":
        if config.get("sandboxed"):
            from harness.seccomp import lock_down

            lock_down(report_fd, spawn=bool(profile.get("spawn")), scratch=config.get("scratch", ""))
        apply_memory_limit(config)
        from harness.worker_candidate import CandidateWorker

        return CandidateWorker()
    raise ValueError(f"unknown worker role {role!r}")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except BaseException:  # a failure of the worker itself: say so on stderr and exit non-zero
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(70)
