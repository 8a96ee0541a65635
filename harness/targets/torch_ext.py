"""``torch.utils.cpp_extension.load_inline`` / ``load`` for candidates: cached, timed, errors typed.

The worker wraps both functions before importing a candidate (``install``):
each build goes to a build directory keyed by a hash of its sources and
options under the harness cache, so the same source is compiled once per
machine (a rebuild takes ~30 s here; reuse takes milliseconds), the time is
added to ``compile_time_s``, and a build failure raises ``CompileError`` with
the compiler output.
"""

from __future__ import annotations

import functools
import hashlib
import json
import platform
import time
from collections.abc import Callable
from typing import Any

from harness.errors import CompileError

STATS = {"calls": 0, "seconds": 0.0}
_originals: dict[str, Callable[..., Any]] = {}


def _key(kind: str, args: tuple, kwargs: dict) -> str:
    import torch

    from harness.cpu import _cpu_identity

    material = {
        "kind": kind,
        "args": args,
        "kwargs": {k: v for k, v in kwargs.items() if k not in ("verbose", "build_directory")},
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": _cpu_identity(),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=repr).encode()).hexdigest()


def _wrap(kind: str, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from harness.cpu import cache_root

        started = time.perf_counter()
        STATS["calls"] += 1
        key = _key(kind, args, kwargs)
        build = cache_root() / "torch_ext" / key[:24]
        build.mkdir(parents=True, exist_ok=True)
        kwargs["build_directory"] = str(build)
        try:
            return original(*args, **kwargs)
        except (RuntimeError, OSError, ImportError, ValueError) as exc:  # build or load failure of the extension
            raise CompileError(f"torch.utils.cpp_extension.{kind} failed: {exc}") from None
        finally:
            STATS["seconds"] += time.perf_counter() - started

    wrapper.__kope_wrapped__ = True  # type: ignore[attr-defined]  # a marker attribute on a function object
    return wrapper


def install() -> None:
    """Wrap load_inline and load (idempotent)."""
    import torch.utils.cpp_extension as ext

    for kind in ("load_inline", "load"):
        current = getattr(ext, kind)
        if getattr(current, "__kope_wrapped__", False):
            continue
        _originals[kind] = current
        setattr(ext, kind, _wrap(kind, current))
