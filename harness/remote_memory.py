"""Reading a worker's tensors straight out of its memory (``process_vm_readv``), instead of through its pipe.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Sequence
from typing import Any

import numpy
import torch

from harness.ipc import check_tensor_spec

IOV_MAX = 1024  # iovecs per call (Linux's UIO_MAXIOV)
_CHUNK = 1 << 30  # bytes per iovec at most (the kernel caps one call at MAX_RW_COUNT, ~2 GiB)
# Sampled checks of timed outputs (docs/harness-workers.md): an output with a fraction f >= 1 % of its elements wrong
# escapes SAMPLES uniformly drawn elements (each read in its block of SPAN) with probability <= 0.99^1375 < 1e-6;
# outputs under SAMPLE_MIN_BYTES are read whole (~0.4 us per block read against ~0.12 ms per MB)
SAMPLES, SPAN, SAMPLE_MIN_BYTES = 1375, 64, 4 << 20


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
        if type(addr) is not int or not 0 <= addr < (1 << 62):
            raise RemoteMemoryError(f"bad remote tensor description {spec!r}")
        total += nbytes
        if total > max_bytes:
            raise RemoteMemoryError(f"remote tensors of more than {max_bytes} bytes in one reply")
        out.append((addr, dtype, shape, nbytes))
    return out


def read_into(pid: int, rows: torch.Tensor) -> None:
    """Copy each (local address, remote address, bytes) row (int64) from process ``pid`` into this one."""
    if _readv is None:
        raise RemoteUnavailable("this C library has no process_vm_readv")
    for start in range(0, len(rows), IOV_MAX):
        part = rows[start : start + IOV_MAX]
        local, remote = part[:, [0, 2]].contiguous(), part[:, [1, 2]].contiguous()  # struct iovec {base, len}
        want = int(part[:, 2].sum())
        iovecs = [ctypes.cast(t.data_ptr(), ctypes.POINTER(_Iovec)) for t in (local, remote)]
        got = _readv(pid, iovecs[0], len(part), iovecs[1], len(part), 0)
        if got < 0:
            err = ctypes.get_errno()
            if err in (errno.EPERM, errno.ENOSYS, errno.EACCES):
                raise RemoteUnavailable(f"process_vm_readv: {os.strerror(err)}")
            raise RemoteMemoryError(f"process_vm_readv: {os.strerror(err)} (a tensor address that is not mapped)")
        if got != want:
            raise RemoteMemoryError(f"process_vm_readv read {got} of {want} bytes (a tensor beyond mapped memory)")


def sample_blocks(numel: int, itemsize: int, generator: torch.Generator, extra: Sequence[int] = ()) -> Any:
    """The blocks of a timed output the parent reads and compares, sorted (a tensor): the first, the last, those of
    the ``extra`` positions and of ``SAMPLES`` uniformly random elements; None (all) below ``SAMPLE_MIN_BYTES``."""
    if numel * itemsize < SAMPLE_MIN_BYTES or numel <= (SAMPLES + 2) * SPAN:
        return None
    drawn = torch.randint(numel, (SAMPLES,), generator=generator)
    ends = torch.tensor([0, numel - 1, *(p for p in extra if 0 <= p < numel)], dtype=torch.int64)
    return torch.cat([drawn, ends]).div(SPAN, rounding_mode="floor").unique()


def gather(t: torch.Tensor, blocks: torch.Tensor | None) -> torch.Tensor:
    """The elements of ``blocks`` of ``t`` (flattened), back to back; all of them for None. Gathered as rows of bytes
    in numpy: torch's index ops on this many elements go parallel, and on a loaded machine their waits cost more."""
    flat = t.reshape(-1)
    if blocks is None:
        return flat
    step, data, picked = SPAN * t.element_size(), flat.view(torch.uint8).numpy(), blocks.numpy()
    whole = len(data) // step
    out = data[: whole * step].reshape(whole, step)[picked[picked < whole]].reshape(-1)
    if picked[-1] >= whole:  # the last, partial block
        out = numpy.concatenate([out, data[whole * step :]])
    return torch.from_numpy(out).view(t.dtype)


def usable(pid: int) -> bool:
    """Whether this process may read ``pid``'s memory: a few bytes of its first readable mapping, read for real."""
    try:
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                span, perms = line.split()[:2]
                if perms.startswith("r"):
                    here = torch.empty(8, dtype=torch.uint8)
                    read_into(pid, torch.tensor([[here.data_ptr(), int(span.split("-")[0], 16), 8]]))
                    return True
    except (OSError, ValueError, RemoteMemoryError):
        return False
    return False


class Staging:
    """Parent-side tensors reused from one fetch to the next (same slot, dtype and shape), so a unit's
    outputs land in memory that is already mapped instead of a fresh allocation per unit."""

    def __init__(self) -> None:
        self._slots: dict[tuple[str, int], torch.Tensor] = {}

    def read(self, who: str, pid: int, specs: Any, max_bytes: int, blocks: Any = None) -> list[torch.Tensor]:
        """The worker's tensors, checked (``check_specs``) and copied out of its memory; with ``blocks`` (per tensor,
        ``sample_blocks``'s) only those, into their places."""
        checked = check_specs(specs, max_bytes)
        tensors, rows = [], []
        for i, (addr, dtype, shape, nbytes) in enumerate(checked):
            slot = self._slots.get((who, i))
            if slot is None or slot.dtype != dtype or list(slot.shape) != shape:
                slot = torch.empty(shape, dtype=dtype)
                self._slots[(who, i)] = slot
            tensors.append(slot)
            if not nbytes:
                continue
            mine = None if blocks is None else blocks[i]
            step = _CHUNK if mine is None else SPAN * slot.element_size()
            starts = torch.arange(0, nbytes, step) if mine is None else mine * step
            if len(starts) and int(starts[-1]) >= nbytes:
                raise RemoteMemoryError(f"remote tensor {i}: a block beyond its {nbytes} bytes")
            sizes = (nbytes - starts).clamp(max=step)
            rows.append(torch.stack([slot.data_ptr() + starts, addr + starts, sizes], 1))
        if rows:
            read_into(pid, torch.cat(rows))
        return tensors
