"""Reading a worker's tensors straight out of its memory (``process_vm_readv``), instead of through its pipe.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Sequence
from typing import Any

import torch

from harness.ipc import check_tensor_spec

IOV_MAX = 1024  # iovecs per call (Linux's UIO_MAXIOV)
_CHUNK = 1 << 30  # bytes per iovec at most (the kernel caps one call at MAX_RW_COUNT, ~2 GiB)


class RemoteMemoryError(Exception):
    """The worker's description of its tensors does not hold (bad spec, unmapped address, short read)."""


class RemoteUnavailable(RemoteMemoryError):
    """The kernel does not let this process read the worker's memory (EPERM, ENOSYS): use the pipe."""


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_readv = getattr(_libc, "process_vm_readv", None)
if _readv is not None:
    _readv.restype = ctypes.c_ssize_t
    _readv.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(_Iovec),
        ctypes.c_ulong,
        ctypes.POINTER(_Iovec),
        ctypes.c_ulong,
        ctypes.c_ulong,
    ]


def check_specs(specs: Any, max_bytes: int) -> list[tuple[int, torch.dtype, list[int], int]]:
    """(addr, dtype, shape, nbytes) per description, or RemoteMemoryError for the first one that is malformed."""
    if not isinstance(specs, list):
        raise RemoteMemoryError("remote tensor descriptions are not a list")
    out, total = [], 0
    for spec in specs:
        dtype, shape, nbytes = check_tensor_spec(spec, RemoteMemoryError, "remote tensor")
        addr = spec.get("addr")
        if type(addr) is not int or addr < 0:
            raise RemoteMemoryError(f"bad remote tensor description {spec!r}")
        total += nbytes
        if total > max_bytes:
            raise RemoteMemoryError(f"remote tensors of more than {max_bytes} bytes in one reply")
        out.append((addr, dtype, shape, nbytes))
    return out


def read_into(pid: int, pieces: Sequence[tuple[int, torch.Tensor]]) -> None:
    """Copy ``dest.nbytes`` bytes from ``addr`` in process ``pid`` into each contiguous CPU tensor ``dest``."""
    if _readv is None:
        raise RemoteUnavailable("this C library has no process_vm_readv")
    local: list[tuple[int, int]] = []
    remote: list[tuple[int, int]] = []
    for addr, dest in pieces:
        size = dest.numel() * dest.element_size()
        base = dest.data_ptr()
        for off in range(0, size, _CHUNK):
            n = min(_CHUNK, size - off)
            local.append((base + off, n))
            remote.append((addr + off, n))
    for start in range(0, len(local), IOV_MAX):
        loc, rem = local[start : start + IOV_MAX], remote[start : start + IOV_MAX]
        want = sum(n for _, n in loc)
        liov = (_Iovec * len(loc))(*[_Iovec(b, n) for b, n in loc])
        riov = (_Iovec * len(rem))(*[_Iovec(b, n) for b, n in rem])
        got = _readv(pid, liov, len(loc), riov, len(rem), 0)
        if got < 0:
            err = ctypes.get_errno()
            if err in (errno.EPERM, errno.ENOSYS, errno.EACCES):
                raise RemoteUnavailable(f"process_vm_readv: {os.strerror(err)}")
            raise RemoteMemoryError(f"process_vm_readv: {os.strerror(err)} (a tensor address that is not mapped)")
        if got != want:
            raise RemoteMemoryError(f"process_vm_readv read {got} of {want} bytes (a tensor beyond mapped memory)")


def usable(pid: int) -> bool:
    """Whether this process may read ``pid``'s memory: a few bytes of its first readable mapping, read for real."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                span, perms = line.split()[:2]
                if perms.startswith("r"):
                    start = int(span.split("-")[0], 16)
                    read_into(pid, [(start, torch.empty(8, dtype=torch.uint8))])
                    return True
    except (OSError, ValueError, RemoteMemoryError):
        return False
    return False


class Staging:
    """Parent-side tensors reused from one fetch to the next (same slot, dtype and shape), so a unit's
    outputs land in memory that is already mapped instead of a fresh allocation per unit."""

    def __init__(self) -> None:
        self._slots: dict[tuple[str, int], torch.Tensor] = {}

    def read(self, who: str, pid: int, specs: Any, max_bytes: int) -> list[torch.Tensor]:
        """The worker's tensors, checked (``check_specs``) and copied out of its memory."""
        checked = check_specs(specs, max_bytes)
        tensors, pieces = [], []
        for i, (addr, dtype, shape, nbytes) in enumerate(checked):
            slot = self._slots.get((who, i))
            if slot is None or slot.dtype != dtype or list(slot.shape) != shape:
                slot = torch.empty(shape, dtype=dtype)
                self._slots[(who, i)] = slot
            tensors.append(slot)
            if nbytes:
                pieces.append((addr, slot))
        read_into(pid, pieces)
        return tensors
