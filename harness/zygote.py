"""The zygote: one booted, sandboxed process that forks sandboxed workers, so a worker's boot costs a fork.

A worker's boot is mostly the same for every worker: the interpreter, torch, the harness's
worker modules and torch's lazy imports (``harness.worker.boot_shared``: 3-5 s of CPU). The
zygote does that once, inside the sandbox's namespaces (started with ``harness.sandbox.launcher()``
like a worker, with the worker's clean environment and a read-only view of its own), then
waits on its control socket. It never loads a task or a candidate.

For each request (a worker's config, and its pipes, output files and a credentials socket as
``SCM_RIGHTS``) it forks; the child closes every other descriptor, unshares new mount, PID,
IPC and network namespaces and forks again: that grandchild is PID 1 of the new PID namespace
(``harness.worker._be_init``: it forks the worker, reaps it and reports how it ended). PID 1
sends one message on the credentials socket, so the parent learns its process id (the kernel
translates it into the parent's PID namespace) and holds a pidfd for it. The worker then boots
its private part as a worker started on its own does (``harness.worker.boot_private``: its
read-only view, its own scratch tmpfs, the hidden folders, Landlock, rlimits) and serves its
one role; seccomp follows before candidate code is imported, as before.

So every worker still has namespaces, a scratch folder, a ``/proc`` and a Landlock domain of
its own, nothing it can use of another worker's or the zygote's (no shared descriptors; the
zygote is outside its PID namespace and its ``/proc``), and nothing outlives it (killing its
PID 1 ends the namespace). When the parent goes away the control socket closes, the zygote (PID
1 of its own namespace) exits, and every worker it forked dies with it.

``python -m harness.zygote CONTROL_FD CONFIG_JSON``; the parent side is ``harness.worker_pool.Zygote``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import traceback

MAX_REQUEST = 1 << 16
FDS_PER_WORKER = 6  # to the worker, from the worker, report, stdout, stderr, credentials


def _reap(_signum: int = 0, _frame: object = None) -> None:
    """Reap every ended child: the forking children, and the workers' PID 1s (orphans reparented to the zygote)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _open_fds() -> list[int]:
    return [int(name) for name in os.listdir("/proc/self/fd")]


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: keep only this worker's descriptors, new namespaces, then PID 1 and the worker."""
    from harness import sandbox
    from harness.worker import _be_init, serve

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # PID 1 waits for its worker itself
    to_worker, from_worker, report, out, err, cred = fds
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    keep = {0, 1, 2, to_worker, from_worker, report, cred}
    for fd in _open_fds():
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    sandbox.unshare_worker_namespaces()
    if os.fork() != 0:
        os._exit(0)  # the zygote reaps this child; PID 1 of the new namespace goes on
    os.setsid()  # one process group: the parent stops (SIGSTOP) or kills PID 1 and the worker together
    sandbox.mount_proc()
    with socket.socket(fileno=cred) as sock:
        sock.sendall(b"1")  # the parent reads this process's id from the message's credentials
    _be_init(to_worker, from_worker, report)  # PID 1 stays in there; the worker returns
    serve(to_worker, from_worker, report, request["config"], shared_booted=True)


def _spawn(request: dict, fds: list[int]) -> None:
    pid = os.fork()
    if pid == 0:
        try:
            _child(request, fds)
        except BaseException:  # say why on the worker's stderr, then go
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(71)
    for fd in fds:
        os.close(fd)


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[1]))
    config = json.loads(argv[2])
    try:
        from harness import sandbox
        from harness.worker import boot_shared

        sandbox.enter_view(config["scratch"], config.get("hidden", ()))
        boot_shared()
    except BaseException as exc:  # say why in the greeting, then stop
        control.send(json.dumps({"op": "failed", "message": f"{type(exc).__name__}: {exc}"}).encode())
        raise
    signal.signal(signal.SIGCHLD, _reap)
    control.send(json.dumps({"op": "ready", "pid": os.getpid()}).encode())
    while True:
        try:
            message, fds, _flags, _addr = socket.recv_fds(control, MAX_REQUEST, FDS_PER_WORKER)
        except InterruptedError:
            continue
        except OSError:
            os._exit(0)
        if not message:  # the parent went away: as PID 1, the zygote takes every worker it forked with it
            os._exit(0)
        try:
            request = json.loads(message)
        except ValueError:
            request = None
        if request is None or len(fds) != FDS_PER_WORKER:
            for fd in fds:
                os.close(fd)
            continue
        _spawn(request, fds)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except BaseException:  # a failure of the zygote itself: say so on stderr and exit non-zero
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(70)
