"""Device-to-host traffic during forward on a GPU target: a CPU fallback is a cheat.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

LIMIT_FRACTION = 0.125
LIMIT_FLOOR_BYTES = 1 << 16


def _nbytes(t: Any) -> int:
    return t.numel() * t.element_size()


class _CopyCounter:
    """A dispatch mode counting bytes copied from ``source`` device type to the host."""

    def __init__(self, source: str) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        counter = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                counter.note(func, args, kwargs, out)
                return out

        self.source = source
        self.bytes = 0
        self.mode = Mode()

    def note(self, func: Any, args: tuple, kwargs: dict, out: Any) -> None:
        import torch

        name = getattr(func, "__name__", "")
        if name.startswith("_to_copy") and args and isinstance(args[0], torch.Tensor) and isinstance(out, torch.Tensor):
            if args[0].device.type == self.source and out.device.type == "cpu":
                self.bytes += _nbytes(out)
        elif name.startswith("copy_") and len(args) >= 2 and all(isinstance(a, torch.Tensor) for a in args[:2]):
            dst, src = args[0], args[1]
            if src.device.type == self.source and dst.device.type == "cpu":
                self.bytes += _nbytes(dst)


def is_dtoh(name: str) -> bool:
    """Whether a profiler activity's name is a device-to-host copy (CUPTI: ``Memcpy DtoH (Device -> Pageable)``)."""
    return "DtoH" in name or "Device -> Pageable" in name or "Device -> Pinned" in name


def trace_dtoh_bytes(trace: dict[str, Any]) -> int:
    """Bytes of the device-to-host copies in a Chrome trace exported by ``torch.profiler`` (offline use)."""
    total = 0
    for event in trace.get("traceEvents", []):
        if is_dtoh(str(event.get("name", ""))):
            total += int((event.get("args") or {}).get("bytes", 0) or 0)
    return total


def event_bytes(nbytes: int, metadata_json: str) -> int:
    """The bytes of one profiler activity: its ``nbytes`` where kineto fills it, else ``"bytes"`` in its
    metadata (the same field the Chrome trace's ``args`` carry)."""
    if nbytes > 0:
        return nbytes
    if not metadata_json:
        return 0
    try:
        meta = json.loads("{" + metadata_json.strip().strip("{}").rstrip(",") + "}")
    except ValueError:
        return 0
    value = meta.get("bytes", 0) if isinstance(meta, dict) else 0
    return int(value) if isinstance(value, (int, float)) else 0


def events_dtoh_bytes(events: Iterable[Any]) -> int:
    """Bytes of the device-to-host copies among ``torch.profiler``'s in-memory events (``kineto_results.events()``)."""
    total = 0
    for event in events:
        if is_dtoh(str(event.name())):
            total += event_bytes(int(event.nbytes() or 0), str(event.metadata_json() or ""))
    return total


class HostTraffic:
    """Context manager around one forward: ``bytes`` copied from the device to the host during it."""

    def __init__(self, source: str = "cuda", profile: bool = True, activities: Sequence[str] = ("CUDA",)) -> None:
        self.counter = _CopyCounter(source)
        self.profile = profile
        self.activities = tuple(activities)  # ProfilerActivity names (tests use "CPU": no device needed)
        self._profiler: Any = None
        self.profiler_bytes = 0
        self.profiler_error: str | None = None
        self.profiler_events = 0  # how many events the profiler recorded (0 with a profiler that saw nothing)

    @classmethod
    def for_target(cls, target: Any) -> HostTraffic | None:
        """A monitor for a GPU target; None on a CPU target (there is no device to fall back from)."""
        return None if target.device == "cpu" else cls(target.device)

    def start_profiler(self) -> None:
        """Start the profiler (before the guarded window is armed; ``__enter__`` does it if nobody did)."""
        if not self.profile or self._profiler is not None:
            return
        try:
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[getattr(ProfilerActivity, a) for a in self.activities])
            self._profiler.__enter__()
        except Exception as exc:  # CUPTI may be missing: say so, keep the dispatcher layer
            self._profiler, self.profiler_error = None, f"{type(exc).__name__}: {exc}"
            print(f"kope harness: no CUDA profiler for the device-to-host check ({exc})", file=sys.stderr)

    def stop_profiler(self) -> None:
        """Stop the profiler and count the device-to-host bytes from its events in memory (no file)."""
        profiler, self._profiler = self._profiler, None
        if profiler is None:
            return
        try:
            profiler.__exit__(None, None, None)
            events = profiler.profiler.kineto_results.events()
            self.profiler_events = len(events)
            self.profiler_bytes = events_dtoh_bytes(events)
        except Exception as err:  # the dispatcher layer's count still stands
            self.profiler_error = f"{type(err).__name__}: {err}"

    def __enter__(self) -> HostTraffic:
        self._own_profiler = self._profiler is None
        if self._own_profiler:
            self.start_profiler()
        self.counter.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.counter.mode.__exit__(*exc)
        if self._own_profiler:
            self.stop_profiler()

    @property
    def bytes(self) -> int:
        return max(self.counter.bytes, self.profiler_bytes)

    def problem(self, inputs: list[Any]) -> str | None:
        return verdict(self.bytes, sum(_nbytes(x) for x in inputs if hasattr(x, "element_size")))


def verdict(dtoh_bytes: int, input_bytes: int) -> str | None:
    """Why this much device-to-host traffic in one forward is a CPU fallback (None: it is not)."""
    limit = max(LIMIT_FLOOR_BYTES, int(LIMIT_FRACTION * input_bytes))
    if dtoh_bytes <= limit:
        return None
    return (
        f"forward copied {dtoh_bytes:,} bytes from the device to the host (the inputs are {input_bytes:,} bytes; "
        f"at most {limit:,} allowed): computing on the CPU is not a GPU kernel"
    )
