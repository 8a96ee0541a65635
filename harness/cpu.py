"""The ``cpu`` target's fast compile path: C++ source -> shared library -> Python callables.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import hmac
import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from harness import compile_flags
from harness._cdecl import Function, extern_c_functions
from harness.commands import cache_root, default_compile_timeout, run_with_timeout, sandboxed_command, secret_file
from harness.errors import CompileError

FAST_PATH_VERSION = "1"
BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17")

# Read by the harness worker to report compile_time_s (seconds inside compile_cpp, cache hits included).
STATS = {"calls": 0, "seconds": 0.0, "cache_hits": 0, "compiled": 0}


def threads() -> int:
    """The thread count the harness fixed for this evaluation."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else (os.cpu_count() or 1)


_REMOTE: tuple[int, int] | None = None  # (fd from parent, fd to parent) when compiling is the parent's job


def use_remote_compiler(fd_in: int, fd_out: int) -> None:
    """In a sandboxed worker: every compile_cpp / load_inline goes to the parent over the worker's channel."""
    global _REMOTE
    _REMOTE = (fd_in, fd_out)


def compiles_remotely() -> bool:
    """True in a sandboxed worker (its compiler is the parent's)."""
    return _REMOTE is not None


def ask_parent(request: dict[str, Any]) -> dict[str, Any]:
    """Send a compile request to the parent and wait for its answer (worker side)."""
    from harness.ipc import CompileReply, CompileRequest, decode, read_message_blocking, send

    assert _REMOTE is not None
    send(_REMOTE[1], CompileRequest(request))
    return decode(CompileReply, read_message_blocking(_REMOTE[0])[0]).body


@functools.cache
def find_compiler() -> str:
    for candidate in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate) or candidate
    raise CompileError("no C++ compiler found (set CXX or install g++)")


@functools.cache
def _compiler_identity(cxx: str) -> str:
    try:
        proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
        return proc.stdout.splitlines()[0] if proc.stdout else cxx
    except (OSError, subprocess.TimeoutExpired):
        return cxx


@functools.cache
def _cpu_identity() -> str:
    from harness.hardware import cpu_fingerprint

    return cpu_fingerprint().id


def source_key(source: str, flags: Sequence[str], cxx: str) -> str:
    text = "\0".join([FAST_PATH_VERSION, source, *BASE_FLAGS, *flags, _compiler_identity(cxx), _cpu_identity()])
    return hashlib.sha256(text.encode()).hexdigest()


class CppFunction:
    """One ``extern "C"`` function, callable with tensors for pointer parameters."""

    def __init__(self, handle: Any, fn: Function) -> None:
        self.fn = fn
        self.__name__ = fn.name
        self.__doc__ = fn.signature
        self._c = None
        if fn.unsupported is None:
            try:
                self._c = getattr(handle, fn.name)
            except AttributeError:
                self.fn = fn = replace(fn, unsupported="declared but not defined in the library")
                return
            self._c.argtypes = [
                ctypes.c_void_p if p.pointer else getattr(ctypes, cast(str, p.scalar)) for p in fn.params
            ]
            self._c.restype = getattr(ctypes, fn.returns) if fn.returns else None

    def __call__(self, *args: Any) -> Any:
        fn = self.fn
        if self._c is None:
            raise TypeError(f"{fn.signature}: cannot be called from Python: {fn.unsupported}")
        if len(args) != len(fn.params):
            raise TypeError(f"{fn.name}() takes {len(fn.params)} arguments ({fn.signature}), got {len(args)}")
        return self._c(*[_convert(fn, i, p, a) for i, (p, a) in enumerate(zip(fn.params, args))])

    def __repr__(self) -> str:
        return f"<CppFunction {self.fn.signature}>"


def _convert(fn: Function, index: int, param: Any, arg: Any) -> Any:
    if not param.pointer:
        if hasattr(arg, "data_ptr"):
            raise TypeError(f"{fn.name}: argument {index} ({param.ctype} {param.name}) is a scalar, got a tensor")
        return arg
    if arg is None or isinstance(arg, int):
        return arg
    if not hasattr(arg, "data_ptr"):
        raise TypeError(
            f"{fn.name}: argument {index} ({param.ctype} {param.name}) needs a tensor, got {type(arg).__name__}"
        )
    dtype = str(arg.dtype).removeprefix("torch.")
    if "*" not in param.accepts and dtype not in param.accepts:
        raise TypeError(
            f"{fn.name}: argument {index} ({param.ctype} {param.name}) needs a {'/'.join(param.accepts)} tensor, "
            f"got {dtype}"
        )
    if arg.device.type != "cpu":
        raise TypeError(
            f"{fn.name}: argument {index} ({param.name}) is on {arg.device}, the cpu fast path needs CPU tensors"
        )
    if not arg.is_contiguous():
        raise TypeError(f"{fn.name}: argument {index} ({param.name}) is not contiguous: call .contiguous() first")
    return arg.data_ptr()


class CppLibrary:
    """A compiled shared library; its ``extern "C"`` functions are attributes."""

    def __init__(self, path: Path, key: str, functions: list[Function], cached: bool) -> None:
        self.path, self.key, self.cached = path, key, cached
        self._handle = ctypes.CDLL(str(path), mode=os.RTLD_NOW | getattr(os, "RTLD_LOCAL", 0))
        self.functions = {f.name: CppFunction(self._handle, f) for f in functions}

    def __getattr__(self, name: str) -> CppFunction:
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        known = ", ".join(sorted(functions)) or "none"
        raise AttributeError(f'no extern "C" function {name!r} in this library (found: {known})')

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.functions))

    def __repr__(self) -> str:
        return f"<CppLibrary {self.path.name} functions={sorted(self.functions)}>"


def compile_cpp(source: str, *, flags: Sequence[str] = (), timeout: float | None = None) -> CppLibrary:
    """Compile ``source`` (C++ with ``extern "C"`` entry points) to a cached shared library and load it."""
    started = time.perf_counter()
    STATS["calls"] += 1
    try:
        if _REMOTE is not None:  # the parent checks the flags (and records an escape attempt)
            reply = ask_parent(
                {"kind": "cpp", "source": source, "flags": list(flags), "timeout": timeout or default_compile_timeout()}
            )
            if not reply.get("ok"):
                raise CompileError(str(reply.get("message")), timed_out=bool(reply.get("timed_out")))
            functions = extern_c_functions(reply["expanded"])
            STATS["cache_hits" if reply["cached"] else "compiled"] += 1
            return CppLibrary(Path(reply["path"]), reply["key"], functions, reply["cached"])
        library, key, expanded, cached = _library(source, list(flags), timeout, sandboxed=False)
        STATS["cache_hits" if cached else "compiled"] += 1
        return CppLibrary(library, key, extern_c_functions(expanded), cached)
    finally:
        STATS["seconds"] += time.perf_counter() - started


def _library(source: str, flags: list[str], timeout: float | None, *, sandboxed: bool) -> tuple[Path, str, str, bool]:
    """(library path, key, macro-expanded source, was cached); builds when the cache has no valid entry."""
    compile_flags.check(flags)  # the parent checks again: the worker's own check is the candidate's to skip
    cxx = find_compiler()
    expanded = _expand_macros(source, cxx, sandboxed)
    if not extern_c_functions(expanded):
        raise CompileError('no extern "C" function found in the source: mark the entry points extern "C"')
    key = source_key(source, flags, cxx)
    folder = cache_root() / "cpu" / key[:2] / key
    library = folder / "kernel.so"
    cached = verified(folder, library, key)
    if not cached:
        _build(source, flags, cxx, folder, library, timeout, sandboxed, key)
    return library, key, expanded, cached


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def library_key() -> bytes:
    """The secret the harness signs its cache entries with (``keys/library-key`` under the cache root: hidden
    from every sandbox, so neither a candidate nor its compiler can sign a library of its own)."""
    return secret_file(cache_root() / "keys" / "library-key")


def signature(entry: str, sha256: str) -> str:
    """The HMAC of one cache entry: its key (what it was built from) and its library's SHA-256."""
    return hmac.new(library_key(), f"kope-library/1\0{entry}\0{sha256}".encode(), hashlib.sha256).hexdigest()


def verified(folder: Path, library: Path, entry: str) -> bool:
    """True when ``library`` exists and matches the SHA-256 and the harness's HMAC its folder's manifest records."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
        if not library.is_file():
            return False
        sha = file_sha256(library)
        return manifest.get("sha256") == sha and hmac.compare_digest(
            str(manifest.get("hmac", "")), signature(entry, sha)
        )
    except (OSError, ValueError, AttributeError):
        return False


def write_manifest(folder: Path, library: Path, entry: str) -> None:
    sha = file_sha256(library)
    tmp = folder / f".manifest-{os.getpid()}.json"
    tmp.write_text(json.dumps({"sha256": sha, "hmac": signature(entry, sha), "file": library.name}))
    os.replace(tmp, folder / "manifest.json")


def _expand_macros(source: str, cxx: str, sandboxed: bool = False) -> str:
    """The source with its own #defines expanded (so macro-generated entry points are found).

    Includes are left out of the expansion (system headers declare thousands of
    extern "C" functions); if expansion fails, the source is used as written.
    """
    if "#define" not in source:
        return source
    stripped = "\n".join("" if line.lstrip().startswith("#include") else line for line in source.splitlines())
    cmd, env = [cxx, "-E", "-P", "-x", "c++", "-"], None
    if sandboxed:
        cmd, env = sandboxed_command(cmd, [])
    try:
        proc = subprocess.run(cmd, input=stripped, capture_output=True, text=True, timeout=30, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return source
    return proc.stdout if proc.returncode == 0 and proc.stdout.strip() else source


def _build(
    source: str,
    flags: list[str],
    cxx: str,
    folder: Path,
    library: Path,
    timeout: float | None,
    sandboxed: bool,
    entry: str,
) -> None:
    """Compile into a fresh build folder (the only place a sandboxed compiler may write), then install."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cpp").write_text(source)
    build = Path(tempfile.mkdtemp(dir=folder.parent, prefix=".build-"))
    try:
        (build / "kernel.cpp").write_text(source)
        cmd = [cxx, *BASE_FLAGS, *flags, "-x", "c++", str(build / "kernel.cpp"), "-o", str(build / "kernel.so")]
        env = None
        run = cmd
        if sandboxed:
            run, env = sandboxed_command(cmd, [str(build)])
        limit = timeout if timeout is not None else default_compile_timeout()
        returncode, output = run_with_timeout(run, limit, env=env)
        if returncode is None:
            raise CompileError(f"compilation timed out after {limit:g} s: {' '.join(cmd)}", timed_out=True)
        if returncode != 0 or not (build / "kernel.so").is_file():
            raise CompileError(
                f"the C++ compiler failed (exit {returncode}):\n{output.strip()}\ncommand: {' '.join(cmd)}"
            )
        tmp = folder / f".kernel-{os.getpid()}-{build.name}.so"
        os.replace(build / "kernel.so", tmp)
        os.replace(tmp, library)
        write_manifest(folder, library, entry)
    finally:
        shutil.rmtree(build, ignore_errors=True)
