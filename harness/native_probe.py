"""Where a candidate's process spends its time, sampled from outside (Linux perf events).

The parent opens a software CPU-clock sampling event (``perf_event_open``, user space only, so
``perf_event_paranoid`` 2, the usual default, allows it for one's own processes) on every thread
of the candidate's worker, lets it run one probe unit of calls, and maps every sampled
instruction pointer to the library it lies in (``/proc/PID/maps``). Time in the compute code of
libtorch or of a BLAS/LAPACK library (or numpy's loops) is the reference's work, whichever
thread or language reached it: C++ through libtorch, a helper thread, a disabled dispatch
mode, numpy. The candidate cannot see or change any of this (it lives in the kernel and in
the parent).
"""

from __future__ import annotations

import ctypes
import mmap
import os
import re
import struct
from collections import Counter
from dataclasses import dataclass

PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK = 1, 0
SAMPLE_IP = 1
DISABLED, EXCLUDE_KERNEL, EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_DISABLE = 0x2400, 0x2401
RECORD_SAMPLE = 9
_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}
_PAGES = 1 + 64  # header page + ring buffer (16-byte samples: the last 16k of each thread are kept)
# Libraries whose compute code is "the reference" (not allocation: that runs in the kernel or libc).
REFERENCE_LIBRARIES = re.compile(
    r"libtorch_cpu|libtorch_cuda|libmkl|libopenblas|libblas|liblapack|libcblas|_multiarray_umath|libscipy_openblas|libflexiblas"
)

# The interpreter and the C runtime: there whatever runs forward, so left out of the share.
RUNTIME_LIBRARIES = re.compile(
    r"libpython|libtorch_python|^libc\.so|^ld-linux|^\[vdso\]|^\[unknown\]|^\[anon\]|python3"
)

_libc = ctypes.CDLL(None, use_errno=True)


class _Attr(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved", ctypes.c_uint16),
    ]


@dataclass
class Profile:
    samples: int
    by_library: Counter

    @property
    def native_samples(self) -> int:
        """Samples outside the interpreter and the C runtime (the compute of forward, whoever did it)."""
        return sum(n for lib, n in self.by_library.items() if not RUNTIME_LIBRARIES.search(lib))

    @property
    def reference_share(self) -> float:
        """The share of the native samples that lie in libtorch's or a BLAS library's code."""
        hits = sum(n for lib, n in self.by_library.items() if REFERENCE_LIBRARIES.search(lib))
        return hits / self.native_samples if self.native_samples else 0.0

    def top(self, n: int = 4) -> str:
        return ", ".join(
            f"{lib} {count * 100 // max(1, self.samples)}%" for lib, count in self.by_library.most_common(n)
        )


class Sampler:
    """Samples the instruction pointers of every current thread of ``pid`` (every ``period_ns`` of its CPU time).

    ``enabled=False`` opens the events switched off: ``enable()`` and ``disable()`` (one ioctl per
    thread) then bracket what is to be sampled, e.g. only the timed units of an evaluation and not
    the input generation between them; ``profile()`` reads whatever was sampled while enabled."""

    def __init__(self, pid: int, period_ns: int = 200_000, enabled: bool = True) -> None:
        self.pid = pid
        self.fds: list[int] = []
        self.buffers: list[mmap.mmap] = []
        nr = _NR_PERF_EVENT_OPEN.get(os.uname().machine)
        if nr is None:
            raise OSError("perf_event_open: unknown architecture")
        attr = _Attr(type=PERF_TYPE_SOFTWARE, size=ctypes.sizeof(_Attr), config=PERF_COUNT_SW_CPU_CLOCK)
        attr.sample_period, attr.sample_type = period_ns, SAMPLE_IP
        attr.flags = EXCLUDE_KERNEL | EXCLUDE_HV | (0 if enabled else DISABLED)
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                fd = _libc.syscall(nr, ctypes.byref(attr), int(tid), -1, -1, 0)
                if fd < 0:
                    raise OSError(ctypes.get_errno(), f"perf_event_open: {os.strerror(ctypes.get_errno())}")
                self.fds.append(fd)
                self.buffers.append(mmap.mmap(fd, _PAGES * mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ))
        except OSError:
            self.close()
            raise

    def enable(self) -> None:
        self._ioctl(PERF_EVENT_IOC_ENABLE)

    def disable(self) -> None:
        self._ioctl(PERF_EVENT_IOC_DISABLE)

    def _ioctl(self, request: int) -> None:
        for fd in self.fds:
            if _libc.ioctl(fd, request, 0) < 0:
                raise OSError(ctypes.get_errno(), f"perf event ioctl: {os.strerror(ctypes.get_errno())}")

    def profile(self) -> Profile:
        regions = []
        try:
            for line in open(f"/proc/{self.pid}/maps"):
                parts = line.split()
                if len(parts) >= 6 and "x" in parts[1]:
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    regions.append((lo, hi, os.path.basename(parts[5])))
        except OSError:
            pass
        regions.sort()
        counts: Counter = Counter()
        total = 0
        size = (_PAGES - 1) * mmap.PAGESIZE
        for buf in self.buffers:
            head = struct.unpack_from("<Q", buf, 1024)[0]  # perf_event_mmap_page.data_head
            pos, end = max(0, head - size), head
            while pos < end:
                off = mmap.PAGESIZE + pos % size
                if off + 8 > mmap.PAGESIZE + size:
                    break
                kind, _misc, length = struct.unpack_from("<IHH", buf, off)
                if length == 0:
                    break
                if kind == RECORD_SAMPLE and off + 16 <= mmap.PAGESIZE + size:
                    (ip,) = struct.unpack_from("<Q", buf, off + 8)
                    counts[_library(regions, ip)] += 1
                    total += 1
                pos += length
        return Profile(total, counts)

    def close(self) -> None:
        for buf in self.buffers:
            buf.close()
        for fd in self.fds:
            os.close(fd)
        self.buffers, self.fds = [], []


def _library(regions: list[tuple[int, int, str]], ip: int) -> str:
    lo_i, hi_i = 0, len(regions)
    while lo_i < hi_i:
        mid = (lo_i + hi_i) // 2
        lo, hi, name = regions[mid]
        if ip < lo:
            hi_i = mid
        elif ip >= hi:
            lo_i = mid + 1
        else:
            return name or "[anon]"
    return "[unknown]"


def available() -> bool:
    try:
        Sampler(os.getpid()).close()
        return True
    except OSError:
        return False
