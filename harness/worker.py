"""Worker process entry point: ``python -m harness.worker FD_IN FD_OUT FD_REPORT CONFIG_JSON``.

Boot (before any request, so that a warm worker is ready when an evaluation starts): rlimits
on files and core dumps; inside the sandbox the read-only view with its scratch tmpfs and
Landlock (``harness.sandbox``); torch and the harness imported (by the zygote, once, for a
worker it forks: ``harness.zygote``); then one ``ready`` message.

The first request is ``load`` with a ``role``. The *reference* worker loads only the task and
computes reference outputs (it never sees a candidate). The *candidate* worker is locked down
first (seccomp, address-space limit), then loads the task and the candidate and runs the
candidate's forward under the run-time guards. Both answer one request at a time (``op`` in
the JSON header); every exception, ``SystemExit`` included, becomes an error reply, so only a
real crash, a kill or ``os._exit`` ends the process early. The worker never runs atexit
handlers (it leaves through ``os._exit``).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import traceback


def _early_limits(config: dict) -> None:
    import resource

    file_bytes = int(config.get("file_bytes", 256 << 20))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def apply_memory_limit(config: dict) -> None:
    """Cap the address space at (size now) + the memory budget, soft and hard (the candidate cannot raise it)."""
    if not config.get("rlimit_as"):
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


def error_reply(exc: BaseException, phase: str) -> dict:
    kind, message = classify(exc, phase)
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    reply = {"ok": False, "error_kind": kind, "message": message, "traceback": tb[-6000:]}
    try:
        from harness.targets.base import compile_seconds

        reply["compile_time_s"] = compile_seconds()
    except Exception:  # the reply matters more than the number
        pass
    return reply


def boot_private(config: dict) -> None:
    """This worker's own part of the boot: inside the sandbox its read-only view with its scratch tmpfs and
    Landlock; the compile cache it reads."""
    if config.get("sandboxed"):
        from harness import sandbox

        sandbox.enter_view(config["scratch"], config.get("hidden", ()))
        sandbox.restrict_writes(config["scratch"])
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
    """Boot (the shared part too unless the zygote did it: ``shared_booted``), say ``ready``, answer requests."""
    _early_limits(config)
    from harness.ipc import read_message_blocking, write_message

    try:
        boot_private(config)
        if not shared_booted:
            boot_shared()
    except BaseException as exc:  # say why in the greeting, then stop
        write_message(fd_out, {"op": "failed", "message": f"{type(exc).__name__}: {exc}"})
        raise
    write_message(fd_out, {"op": "ready", "pid": os.getpid()})
    handler = None
    while True:
        try:
            header, tensors = read_message_blocking(fd_in)
        except Exception:  # the parent went away
            os._exit(0)
        op = header.get("op")
        if op == "exit":
            os._exit(0)
        if handler is None:
            try:
                handler = _start_role(header, config, fd_in, fd_out, report_fd)
            except BaseException as exc:
                write_message(fd_out, error_reply(exc, "load"))
                continue
        try:
            reply, out_tensors = handler.handle(op, header, tensors)
        except BaseException as exc:  # candidate code may raise anything, SystemExit included
            reply, out_tensors = error_reply(exc, getattr(handler, "phase", "run")), []
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # the candidate may have closed or replaced them
            pass
        write_message(fd_out, reply, out_tensors)


def _start_role(header: dict, config: dict, fd_in: int, fd_out: int, report_fd: int):
    role = header.get("role", "reference" if "candidate" not in header else "candidate")
    from harness import cpu

    if config.get("sandboxed"):
        cpu.use_remote_compiler(fd_in, fd_out)
    if role == "reference":
        apply_memory_limit(config)
        from harness.worker_reference import ReferenceWorker

        return ReferenceWorker()
    if role == "candidate":
        if config.get("sandboxed"):
            from harness.seccomp import lock_down

            lock_down(report_fd)
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
