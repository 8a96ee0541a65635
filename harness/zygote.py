"""The zygote: one booted, sandboxed process that forks sandboxed workers, so a worker's boot costs a fork.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import sys
import traceback
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.ipc import Spawn

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


# -- CUDA must never be touched here --------------------------------------------------------------------

_TRIPPED: list[str] = []  # torch CUDA entry points called in this process (by name)
_ORIGINALS: list[tuple[object, str, object]] = []  # (owner, name, original) of every wrapped entry point
_BAD_FORK: list[str] = []  # what the boot-time probe fork said, when it found a poisoned fork


def install_tripwire() -> None:
    """Record every call of a torch entry point that initialises CUDA or poisons forks (and let it run: refusing
    to fork afterwards is the remedy, not a broken import)."""
    import torch

    def wrap(owner: object, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None or getattr(original, "__kope_tripwire__", False):
            return

        def tripped(*args: object, **kwargs: object) -> object:
            _TRIPPED.append(f"{getattr(owner, '__name__', owner)}.{name}")
            return original(*args, **kwargs)

        tripped.__kope_tripwire__ = True  # type: ignore[attr-defined]
        _ORIGINALS.append((owner, name, original))
        setattr(owner, name, tripped)

    for name in ("is_available", "device_count", "init", "_lazy_init", "current_device", "get_device_properties"):
        wrap(torch.cuda, name)
    for name in ("_cuda_getDeviceCount", "_cuda_init"):
        wrap(torch._C, name)


def remove_tripwire() -> None:
    """In a forked worker: torch's own entry points back (the worker may use CUDA)."""
    for owner, name, original in _ORIGINALS:
        setattr(owner, name, original)
    _ORIGINALS.clear()


def probe_fork() -> None:
    """Fork once and ask torch, in the child, whether it is in a bad fork (CUDA used before the fork)."""
    import torch

    pid = os.fork()
    if pid == 0:
        try:
            os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
        finally:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        _BAD_FORK.append(f"a probe fork found itself in a bad fork (exit {os.waitstatus_to_exitcode(status)})")


def cuda_state() -> dict:
    """This process's CUDA state: everything that would make a fork of it unable to use the GPU."""
    torch = sys.modules.get("torch")
    initialized = False
    if torch is not None:
        try:
            initialized = bool(torch.cuda.is_initialized())
        except Exception:  # a torch without CUDA
            initialized = False
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            libcuda = sorted({line.split()[-1] for line in maps if "libcuda.so" in line or "libnvidia-ml" in line})
    except OSError:
        libcuda = []
    devices = []
    for fd in _open_fds():
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/nvidia"):
            devices.append(target)
    return {
        "initialized": initialized,
        "calls": list(_TRIPPED),
        "libcuda": libcuda,
        "device_fds": devices,
        "bad_fork": list(_BAD_FORK),
    }


def cuda_touched(state: dict | None = None) -> str | None:
    """Why a fork of this process could not use CUDA (None: it never touched CUDA)."""
    state = cuda_state() if state is None else state
    why = []
    if state["initialized"]:
        why.append("torch.cuda.is_initialized() is True")
    if state["calls"]:
        why.append("called " + ", ".join(sorted(set(state["calls"]))))
    if state["libcuda"]:
        why.append("mapped " + ", ".join(state["libcuda"]))
    if state["device_fds"]:
        why.append("holds " + ", ".join(state["device_fds"]))
    why.extend(state["bad_fork"])
    return "; ".join(why) or None


def _child(request: Spawn, fds: list[int]) -> None:
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
    remove_tripwire()
    sandbox.unshare_worker_namespaces()
    if os.fork() != 0:
        os._exit(0)  # the zygote reaps this child; PID 1 of the new namespace goes on
    os.setsid()  # one process group: the parent stops (SIGSTOP) or kills PID 1 and the worker together
    sandbox.mount_proc()
    with socket.socket(fileno=cred) as sock:
        sock.sendall(b"1")  # the parent reads this process's id from the message's credentials
    _be_init(to_worker, from_worker, report)  # PID 1 stays in there; the worker returns
    map_constants()
    serve(to_worker, from_worker, report, request.config, shared_booted=True)


# Libraries whose read-only data is GPU code (fatbins) or GPU-side tables: no CPU kernel reads it (354 MB of
# libtorch_cuda.so, 170 MB of libcusparseLt here); mapping it in would cost ~0.2 s per worker for nothing.
_GPU_LIBRARIES = re.compile(r"cuda|cublas|cudnn|cusparse|cufft|curand|cusolver|nccl|nvrtc|nvjitlink|nvshmem|cupti")
_MADV_POPULATE_READ = 22  # Linux 5.14+


def map_constants() -> None:
    """Map in the forked worker's page tables every page of the libraries' read-only data (``MADV_POPULATE_READ``).

    ``fork`` copies no page-table entries for file mappings that were never written (the child faults them in on
    first use), and a masked AVX-512 load whose mask is all zeros suppresses that fault: the page then stays
    unmapped and every such load takes the slow path, on every call, for the whole life of the worker. PyTorch's
    float32 ``expm1`` (Sleef, AVX-512) ends with one, a broadcast of a constant from libtorch_cpu.so under a mask
    that is almost always empty: in a forked worker ``F.elu`` on 7.3M float32 elements took 70 ms of CPU per call
    against 4.8 ms in a process started fresh (or after this call); float64 was not affected. Whether the reference
    worker was forked or started fresh then decided elu's speedup (0.14x against 0.88x for the same kernel). Not
    done: a kernel without such loads, pages already mapped, a system without the call (older kernels)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as maps:
            lines = maps.read().splitlines()
    except (OSError, AttributeError):
        return
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or fields[1] != "r--p" or not fields[5].startswith("/"):
            continue
        if _GPU_LIBRARIES.search(fields[5].rsplit("/", 1)[-1].lower()):
            continue
        lo, hi = (int(v, 16) for v in fields[0].split("-"))
        libc.madvise(lo, hi - lo, _MADV_POPULATE_READ)  # an error (an older kernel: EINVAL) leaves it as it was


def _refuse(fds: list[int], reason: str) -> None:
    """Answer a fork request with ``0`` and why on its credentials socket (the parent boots the worker fresh)."""
    try:
        with socket.socket(fileno=os.dup(fds[-1])) as sock:
            sock.sendall(b"0" + reason.encode())
    except OSError:
        pass
    for fd in fds:
        os.close(fd)


def _spawn(request: Spawn, fds: list[int]) -> None:
    touched = cuda_touched()
    if touched is not None:  # checked before every fork: a fork of this process could not use the GPU
        _refuse(fds, f"CUDA was touched in the zygote ({touched})")
        return
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

        sandbox.enter_view(config["scratch"], config.get("hidden", ()))
        from harness.worker import boot_shared, keep_heap

        keep_heap()
        install_tripwire()  # torch first, so that nothing of the harness or torch's lazy imports slips past it
        boot_shared()
        probe_fork()
    except BaseException as exc:  # say why in the greeting, then stop
        from harness.ipc import BootFailed, encode

        control.send(json.dumps(encode(BootFailed(f"{type(exc).__name__}: {exc}"))).encode())
        raise
    from harness.ipc import ProtocolError, Ready, Spawn, ZygoteState, decode_zygote_request, encode

    signal.signal(signal.SIGCHLD, _reap)
    control.send(json.dumps(encode(Ready(os.getpid()))).encode())
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
            request = decode_zygote_request(json.loads(message))
        except (ValueError, ProtocolError):  # not one of the parent's requests: dropped
            request = None
        if request is not None and not isinstance(request, Spawn) and not fds:  # the state request
            state = cuda_state()
            control.send(json.dumps(encode(ZygoteState(**state, touched=cuda_touched(state)))).encode())
            continue
        if not isinstance(request, Spawn) or len(fds) != FDS_PER_WORKER:
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
