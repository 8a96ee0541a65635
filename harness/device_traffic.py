"""Device-to-host traffic during forward on a GPU target: a CPU fallback is a cheat.

A "GPU kernel" that copies its inputs to the host, computes there and copies
the result back is not a GPU kernel (and on a machine with a fast CPU may even
look fast). During one guarded correctness trial the candidate worker
watches every copy from the device to the host, in two layers:

* the dispatcher: ``aten._to_copy`` / ``aten.copy_`` (``.cpu()``, ``.to("cpu")``,
  ``.numpy()`` on a device tensor, ``copy_`` into a host tensor), with exact
  byte counts;
* the CUDA profiler (CUPTI through ``torch.profiler``): every ``Memcpy DtoH``
  the device executed, whoever issued it (a native extension calling
  ``cudaMemcpy`` included), with the bytes from the trace.

More than ``LIMIT_FRACTION`` of the inputs' bytes (and at least
``LIMIT_FLOOR_BYTES``) copied to the host is ``cheat_detected:device_to_host``;
reading back a few scalars (a shape, a flag) stays allowed.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
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


def trace_dtoh_bytes(trace: dict[str, Any]) -> int:
    """Bytes of the device-to-host copies in a Chrome trace exported by ``torch.profiler``."""
    total = 0
    for event in trace.get("traceEvents", []):
        name = str(event.get("name", ""))
        if "DtoH" in name or "Device -> Pageable" in name or "Device -> Pinned" in name:
            total += int((event.get("args") or {}).get("bytes", 0) or 0)
    return total


class HostTraffic:
    """Context manager around one forward: ``bytes`` copied from the device to the host during it."""

    def __init__(self, source: str = "cuda", profile: bool = True) -> None:
        self.counter = _CopyCounter(source)
        self.profile = profile
        self._profiler: Any = None
        self.profiler_bytes = 0
        self.profiler_error: str | None = None

    @classmethod
    def for_target(cls, target: Any) -> HostTraffic | None:
        """A monitor for a GPU target; None on a CPU target (there is no device to fall back from)."""
        return None if target.device == "cpu" else cls(target.device)

    def __enter__(self) -> HostTraffic:
        if self.profile:
            try:
                from torch.profiler import ProfilerActivity, profile

                self._profiler = profile(activities=[ProfilerActivity.CUDA])
                self._profiler.__enter__()
            except Exception as exc:  # CUPTI may be missing: say so, keep the dispatcher layer
                self._profiler, self.profiler_error = None, f"{type(exc).__name__}: {exc}"
                print(f"kope harness: no CUDA profiler for the device-to-host check ({exc})", file=sys.stderr)
        self.counter.mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.counter.mode.__exit__(*exc)
        if self._profiler is not None:
            self._profiler.__exit__(None, None, None)
            fd, path = tempfile.mkstemp(suffix=".json")
            os.close(fd)
            try:
                self._profiler.export_chrome_trace(path)
                with open(path, encoding="utf-8") as handle:
                    self.profiler_bytes = trace_dtoh_bytes(json.load(handle))
            except (OSError, ValueError) as err:
                self.profiler_error = str(err)
            finally:
                os.unlink(path)

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
