"""Worker process entry point: ``python -m harness.worker ROLE FD_IN FD_OUT``.

Two roles. The *reference* worker loads only the task and computes reference
outputs (it never sees the candidate). The *candidate* worker loads the task
and the candidate, runs the candidate's forward under the run-time guards and
times reference and candidate interleaved. Both answer one request at a time
(``op`` in the JSON header); every exception, ``SystemExit`` included, becomes
an error reply, so only a real crash, a kill or ``os._exit`` ends the process
early. The worker never runs atexit handlers (it leaves through ``os._exit``).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback


def _early_limits() -> None:
    import resource

    file_bytes = int(os.environ.get("KOPE_WORKER_FILE_BYTES", str(256 << 20)))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def apply_memory_limit() -> None:
    """Cap the address space at (size now) + the memory budget, soft and hard (the candidate cannot raise it)."""
    if os.environ.get("KOPE_WORKER_RLIMIT_AS") != "1":
        return
    import resource

    budget = int(os.environ.get("KOPE_WORKER_MEMORY_BYTES", str(8 << 30)))
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
    except Exception:  # noqa: BLE001 - the reply matters more than the number
        pass
    return reply


def main(argv: list[str]) -> None:
    _early_limits()
    role, fd_in, fd_out = argv[1], int(argv[2]), int(argv[3])
    import torch  # noqa: F401  (before the limit: the baseline includes torch)

    apply_memory_limit()
    from harness.ipc import read_message_blocking, write_message

    if role == "reference":
        from harness.worker_reference import ReferenceWorker as Handler
    elif role == "candidate":
        from harness.worker_candidate import CandidateWorker as Handler
    else:
        sys.stderr.write(f"unknown worker role {role!r}\n")
        os._exit(2)
    handler = Handler()
    while True:
        try:
            header, tensors = read_message_blocking(fd_in)
        except Exception:  # the parent went away
            os._exit(0)
        op = header.get("op")
        if op == "exit":
            os._exit(0)
        try:
            reply, out_tensors = handler.handle(op, header, tensors)
        except BaseException as exc:  # noqa: BLE001 - candidate code may raise anything, SystemExit included
            reply, out_tensors = error_reply(exc, getattr(handler, "phase", "run")), []
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # the candidate may have closed or replaced them
            pass
        write_message(fd_out, reply, out_tensors)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except BaseException:  # a failure of the worker itself: say so on stderr and exit non-zero
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(70)
