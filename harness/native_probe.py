"""Where a candidate's process spends its time, sampled from outside (Linux perf events).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import re
import struct
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK = 1, 0
SAMPLE_IP = 1
DISABLED, INHERIT, EXCLUDE_KERNEL, EXCLUDE_HV = 1 << 0, 1 << 1, 1 << 5, 1 << 6
PERF_EVENT_IOC_ENABLE, PERF_EVENT_IOC_DISABLE, PERF_EVENT_IOC_SET_OUTPUT = 0x2400, 0x2401, 0x2405
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
    def reference_samples(self) -> int:
        """Samples in libtorch's, numpy's or a BLAS library's code: an absolute amount of CPU time (samples x
        the period), which spinning elsewhere does not dilute."""
        return sum(n for lib, n in self.by_library.items() if REFERENCE_LIBRARIES.search(lib))

    @property
    def reference_share(self) -> float:
        """The share of the native samples that lie in libtorch's or a BLAS library's code."""
        return self.reference_samples / self.native_samples if self.native_samples else 0.0

    @property
    def reference_share_of_all(self) -> float:
        """The share of every sample (the interpreter's too) that lies in those libraries: CPU time, however the
        rest of it was spent."""
        return self.reference_samples / self.samples if self.samples else 0.0

    def top(self, n: int = 4) -> str:
        return ", ".join(
            f"{lib} {count * 100 // max(1, self.samples)}%" for lib, count in self.by_library.most_common(n)
        )


class Sampler:
    """Samples the instruction pointers of every thread of ``pid`` (every ``period_ns`` of its CPU time): those
    running now and every thread they start later. The events are per (thread, CPU) pair (docs/harness-workers.md
    says why); those of one CPU all write to the buffer of its first (``PERF_EVENT_IOC_SET_OUTPUT``), one buffer
    per CPU. An ioctl on an event reaches its inherited copies too.

    ``enabled=False`` opens the events switched off: ``enable()`` and ``disable()`` (one ioctl per
    event) then bracket what is to be sampled, e.g. only the timed units of an evaluation and not
    the input generation between them; ``collect()`` (after each ``disable()``) moves what the buffers
    hold into this object, so a long evaluation does not overrun them; ``profile()`` reads whatever was
    sampled while enabled."""

    def __init__(self, pid: int, period_ns: int = 200_000, enabled: bool = True) -> None:
        self.pid = pid
        self.fds: list[int] = []
        self.buffers: list[mmap.mmap] = []
        self.read_to: list[int] = []  # per buffer: the position up to which its records were collected
        self.ips: Counter = Counter()  # instruction pointer -> samples collected so far
        self.lost = 0  # samples overwritten before they were collected
        nr = _NR_PERF_EVENT_OPEN.get(os.uname().machine)
        if nr is None:
            raise OSError("perf_event_open: unknown architecture")
        attr = _Attr(type=PERF_TYPE_SOFTWARE, size=ctypes.sizeof(_Attr), config=PERF_COUNT_SW_CPU_CLOCK)
        attr.sample_period, attr.sample_type = period_ns, SAMPLE_IP
        attr.flags = INHERIT | EXCLUDE_KERNEL | EXCLUDE_HV | (0 if enabled else DISABLED)
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
            _room_for(len(tids) * _cpu_count() + 16)
            for cpu in _online_cpus():
                leader = -1
                for tid in tids:
                    fd = _libc.syscall(nr, ctypes.byref(attr), tid, cpu, -1, 0)
                    if fd < 0:
                        err = ctypes.get_errno()
                        if err == errno.ESRCH:  # the thread exited since it was listed
                            continue
                        raise OSError(err, f"perf_event_open: {os.strerror(err)}")
                    self.fds.append(fd)
                    if leader < 0:
                        leader = fd
                        self.buffers.append(mmap.mmap(fd, _PAGES * mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ))
                        self.read_to.append(0)
                    elif _libc.ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, leader) < 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"perf event set output: {os.strerror(err)}")
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

    def collect(self) -> None:
        """Moves the samples written since the last call out of the ring buffers (read-only maps: the kernel
        overwrites the oldest records when a buffer is full, so read them while the events are off)."""
        size = (_PAGES - 1) * mmap.PAGESIZE
        for i, buf in enumerate(self.buffers):
            head = struct.unpack_from("<Q", buf, 1024)[0]  # perf_event_mmap_page.data_head
            pos = self.read_to[i]
            if head - pos > size:  # overwritten: start at the oldest record still whole (a guess at a boundary)
                self.lost += (head - pos - size) // 16
                pos = head - size
            data = buf[mmap.PAGESIZE :] if pos < head else b""
            while pos < head:
                at = pos % size  # a record may wrap around the buffer's end
                rec = data[at : at + 16] if at + 16 <= size else data[at:] + data[: at + 16 - size]
                kind, _misc, length = struct.unpack_from("<IHH", rec)
                if length < 8:
                    break
                if kind == RECORD_SAMPLE and length >= 16:
                    self.ips[struct.unpack_from("<Q", rec, 8)[0]] += 1
                pos += length
            self.read_to[i] = head

    def profile(self) -> Profile:
        self.collect()
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
        for ip, n in self.ips.items():
            counts[_library(regions, ip)] += n
        return Profile(sum(self.ips.values()), counts)

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


def _online_cpus() -> list[int]:
    """The CPUs the kernel has online (``/sys/devices/system/cpu/online``: ``0-3,6``), else 0..cpu_count-1."""
    try:
        text = open("/sys/devices/system/cpu/online").read().strip()
        cpus: list[int] = []
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus.extend(range(int(lo), int(hi or lo) + 1))
        return cpus
    except (OSError, ValueError):
        return list(range(os.cpu_count() or 1))


def _cpu_count() -> int:
    return len(_online_cpus())


def _room_for(descriptors: int) -> None:
    """Raises this process's soft limit on open files towards its hard limit when the events need more."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = len(os.listdir("/proc/self/fd")) + descriptors
    if soft != resource.RLIM_INFINITY and wanted > soft:
        new = wanted if hard == resource.RLIM_INFINITY else min(hard, max(wanted, 2 * soft))
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))


def unavailable_reason() -> str | None:
    """Why the probe cannot sample on this machine (None: it can): perf events refused to this user
    (``kernel.perf_event_paranoid`` above 2 without CAP_PERFMON), no syscall, or no architecture support."""
    try:
        Sampler(os.getpid()).close()
        return None
    except OSError as exc:
        try:
            paranoid = Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
        except OSError:
            paranoid = "unknown"
        return f"{exc.strerror or exc} (kernel.perf_event_paranoid={paranoid})"


def available() -> bool:
    return unavailable_reason() is None
