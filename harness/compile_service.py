"""Parent side of compiling for a sandboxed worker: the worker sends a compile request over its channel
(``harness.cpu.compile_cpp`` or ``torch.utils.cpp_extension`` in the worker), the parent compiles it in the
compile sandbox and answers with the library's path in the read-only cache.
"""

from __future__ import annotations

from typing import Any

from harness.cpu import _library
from harness.errors import CompileError
from harness.targets import torch_ext


def serve_compile(request: dict[str, Any]) -> dict[str, Any]:
    """Parent side: compile what a sandboxed worker asks for, in the compile sandbox; the reply it gets back."""
    kind = request.get("kind")
    try:
        if kind == "cpp":
            source, flags, timeout = request.get("source"), request.get("flags", []), request.get("timeout")
            if not isinstance(source, str) or not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
                return {"ok": False, "message": "malformed compile request"}
            limit = float(timeout) if isinstance(timeout, (int, float)) else None
            library, key, expanded, cached = _library(source, flags, limit, sandboxed=True)
            return {"ok": True, "path": str(library), "key": key, "expanded": expanded, "cached": cached}
        if kind == "torch_ext":
            return torch_ext.serve(request)
    except CompileError as exc:  # ``cheat``: the request itself was an escape attempt (harness.compile_flags)
        return {"ok": False, "message": str(exc), "timed_out": exc.timed_out, "cheat": exc.cheat}
    return {"ok": False, "message": f"unknown compile request {kind!r}"}
