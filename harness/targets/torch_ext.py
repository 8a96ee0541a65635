"""``torch.utils.cpp_extension.load_inline`` / ``load`` for candidates: cached, timed, errors typed.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
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
        from harness import cpu
        from harness.commands import cache_root

        started = time.perf_counter()
        STATS["calls"] += 1
        key = _key(kind, args, kwargs)
        if cpu._REMOTE is not None:
            try:
                return _remote(kind, args, kwargs)
            finally:
                STATS["seconds"] += time.perf_counter() - started
        from harness import compile_flags

        compile_flags.check_extension_spec(kind, _call_spec(kind, args, kwargs))  # as the parent would
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


def _call_spec(kind: str, args: tuple, kwargs: dict) -> dict[str, Any]:
    names = ("name", "cpp_sources") if kind == "load_inline" else ("name", "sources")
    spec = dict(zip(names, args))
    spec.update({k: v for k, v in kwargs.items() if k not in ("verbose", "build_directory")})
    for k, v in spec.items():
        if isinstance(v, tuple):
            spec[k] = list(v)
    return spec


def _remote(kind: str, args: tuple, kwargs: dict) -> Any:
    """Worker side: the parent builds; this process imports the result from the read-only build folder."""
    from torch.utils.cpp_extension import _import_module_from_library

    from harness.cpu import ask_parent

    spec = _call_spec(kind, args, kwargs)
    try:
        json.dumps(spec)
    except (TypeError, ValueError) as exc:
        raise CompileError(f"torch.utils.cpp_extension.{kind}: arguments must be plain data here: {exc}") from None
    reply = ask_parent({"kind": "torch_ext", "call": kind, "spec": spec, "timeout": _timeout()})
    if not reply.get("ok"):
        raise CompileError(str(reply.get("message")), timed_out=bool(reply.get("timed_out")))
    try:
        return _import_module_from_library(reply["name"], reply["build_directory"], spec.get("is_python_module", True))
    except (ImportError, OSError, RuntimeError) as exc:
        raise CompileError(f"torch.utils.cpp_extension.{kind} failed: {exc}") from None


def _timeout() -> float:
    from harness.commands import default_compile_timeout

    return default_compile_timeout()


def serve(request: dict[str, Any]) -> dict[str, Any]:
    """Parent side: build a worker's load_inline/load call in the compile sandbox (cached by content)."""
    from harness import compile_flags
    from harness.commands import cache_root, run_with_timeout, sandboxed_command
    from harness.cpu import verified, write_manifest

    kind, spec = request.get("call"), request.get("spec")
    if kind not in ("load_inline", "load") or not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        return {"ok": False, "message": "malformed torch extension request"}
    try:
        compile_flags.check_extension_spec(kind, spec)  # flags on the allow-list, the name an identifier
    except CompileError as exc:
        return {"ok": False, "message": str(exc), "cheat": exc.cheat}
    key = _key(kind, (), spec)
    build = cache_root() / "torch_ext" / key[:24]
    name = spec["name"]
    library = build / f"{name}.so"
    if verified(build, library, key):  # SHA-256 and the harness's HMAC, checked on every load
        return {"ok": True, "build_directory": str(build), "name": name, "cached": True}
    build.mkdir(parents=True, exist_ok=True)
    (build / "kope-request.json").write_text(json.dumps({"call": kind, "spec": spec}))
    root = str(Path(__file__).resolve().parent.parent.parent)
    cmd, env = sandboxed_command([sys.executable, "-m", "harness.targets.torch_ext", "build", str(build)], [str(build)])
    env["PYTHONPATH"] = root
    for var in ("TORCH_CUDA_ARCH_LIST", "MAX_JOBS"):
        if var in os.environ:
            env[var] = os.environ[var]
    limit = float(request.get("timeout") or 300.0)
    code, output = run_with_timeout(cmd, limit, env=env)
    if code is None:
        (build / "lock").unlink(
            missing_ok=True
        )  # torch's build lock, left by the killed builder: later builds wait on it
        return {
            "ok": False,
            "message": f"torch.utils.cpp_extension.{kind} timed out after {limit:g} s",
            "timed_out": True,
        }
    if code != 0 or not library.is_file():
        return {"ok": False, "message": f"torch.utils.cpp_extension.{kind} failed:\n{output.strip()[-4000:]}"}
    write_manifest(build, library, key)
    return {"ok": True, "build_directory": str(build), "name": name, "cached": False}


def _build_main(build: str) -> None:
    """The sandboxed builder: run the real call with the build folder forced, then exit."""
    import torch.utils.cpp_extension as ext

    request = json.loads(Path(build, "kope-request.json").read_text())
    spec = dict(request["spec"])
    spec["build_directory"] = build
    getattr(ext, request["call"])(**spec)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "build":
        try:
            _build_main(sys.argv[2])
        except Exception as exc:  # the parent reports it as the candidate's compile error
            sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
            sys.exit(1)
