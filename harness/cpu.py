"""The ``cpu`` target's fast compile path: C++ source -> shared library -> Python callables.

This is the API a ``cpu`` candidate uses (about a second per new kernel,
milliseconds when cached; ``torch.utils.cpp_extension.load_inline`` also works
but takes ~30 s per build)::

    import torch
    import torch.nn as nn
    from harness.cpu import compile_cpp

    _lib = compile_cpp(r'''
    #include <cstdint>
    extern "C" void relu_f32(const float* x, float* y, int64_t n) {
        #pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
    }
    ''')

    class ModelNew(nn.Module):
        def forward(self, x):
            x = x.contiguous()
            y = torch.empty_like(x)
            _lib.relu_f32(x, y, x.numel())
            return y

Rules:

* Every ``extern "C"`` function of the source becomes an attribute of the
  returned ``CppLibrary`` (both ``extern "C" void f(...)`` and ``extern "C" {...}``).
* Pointer parameters take a torch tensor (its ``data_ptr()`` is passed) whose
  dtype matches the pointee (``float*`` float32, ``double*`` float64,
  ``int32_t*``/``int*`` int32, ``int64_t*``/``long*`` int64, ``uint8_t*``
  uint8/bool, ``uint16_t*`` any 16-bit dtype such as float16/bfloat16,
  ``_Float16*`` float16, ``void*`` anything); the tensor must be on the CPU and
  contiguous, else a ``TypeError`` names the parameter. ``None`` passes NULL.
  Scalar parameters (``int``, ``int64_t``, ``size_t``, ``float``, ``double``,
  ``bool``, ...) take Python numbers. The return type is ``void`` or a scalar.
* The call releases the GIL; the kernel runs with the harness's fixed thread
  count (``OMP_NUM_THREADS``; ``threads()`` returns it). Do not change it.
* Flags: ``-O3 -march=native -fopenmp -fPIC -shared -std=c++17``; add more with
  ``flags=[...]`` (e.g. ``-ffast-math``, at your own risk for accuracy).
* The library is cached by a hash of (source, flags, compiler, CPU): the same
  source compiles once per machine. Cache: ``$KOPE_HARNESS_CACHE`` or
  ``~/.cache/kope/harness``.
* A compiler error raises ``harness.errors.CompileError`` with the compiler's
  output (the harness reports it as ``compile_error``); the compiler is killed
  after ``timeout`` seconds (default ``$KOPE_HARNESS_COMPILE_TIMEOUT`` or 120).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from harness._cdecl import Function, extern_c_functions
from harness.errors import CompileError

FAST_PATH_VERSION = "1"
BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17")

# Read by the harness worker to report compile_time_s (seconds inside compile_cpp, cache hits included).
STATS = {"calls": 0, "seconds": 0.0, "cache_hits": 0, "compiled": 0}


def threads() -> int:
    """The thread count the harness fixed for this evaluation."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    return int(value) if value.isdigit() and int(value) > 0 else (os.cpu_count() or 1)


def cache_root() -> Path:
    env = os.environ.get("KOPE_HARNESS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kope" / "harness"


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
            self._c.argtypes = [ctypes.c_void_p if p.pointer else getattr(ctypes, p.scalar) for p in fn.params]
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
        raise TypeError(f"{fn.name}: argument {index} ({param.ctype} {param.name}) needs a tensor, got {type(arg).__name__}")
    dtype = str(arg.dtype).removeprefix("torch.")
    if "*" not in param.accepts and dtype not in param.accepts:
        raise TypeError(f"{fn.name}: argument {index} ({param.ctype} {param.name}) needs a {'/'.join(param.accepts)} tensor, "
                        f"got {dtype}")
    if arg.device.type != "cpu":
        raise TypeError(f"{fn.name}: argument {index} ({param.name}) is on {arg.device}, the cpu fast path needs CPU tensors")
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
        raise AttributeError(f"no extern \"C\" function {name!r} in this library (found: {known})")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self.functions))

    def __repr__(self) -> str:
        return f"<CppLibrary {self.path.name} functions={sorted(self.functions)}>"


def compile_cpp(source: str, *, flags: Sequence[str] = (), timeout: float | None = None) -> CppLibrary:
    """Compile ``source`` (C++ with ``extern "C"`` entry points) to a cached shared library and load it."""
    started = time.perf_counter()
    STATS["calls"] += 1
    try:
        functions = extern_c_functions(source)
        if not functions:
            raise CompileError('no extern "C" function found in the source: mark the entry points extern "C"')
        cxx = find_compiler()
        key = source_key(source, flags, cxx)
        folder = cache_root() / "cpu" / key[:2] / key
        library = folder / "kernel.so"
        cached = library.is_file()
        if cached:
            STATS["cache_hits"] += 1
        else:
            _build(source, list(flags), cxx, folder, library, timeout)
            STATS["compiled"] += 1
        return CppLibrary(library, key, functions, cached)
    finally:
        STATS["seconds"] += time.perf_counter() - started


def _default_timeout() -> float:
    value = os.environ.get("KOPE_HARNESS_COMPILE_TIMEOUT", "")
    try:
        return float(value) if value else 120.0
    except ValueError:
        return 120.0


def _build(source: str, flags: list[str], cxx: str, folder: Path, library: Path, timeout: float | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.cpp").write_text(source)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".kernel-", suffix=".so")
    os.close(fd)
    cmd = [cxx, *BASE_FLAGS, *flags, "-x", "c++", str(folder / "kernel.cpp"), "-o", tmp]
    limit = timeout if timeout is not None else _default_timeout()
    returncode, output = run_with_timeout(cmd, limit)
    if returncode is None:
        os.unlink(tmp)
        raise CompileError(f"compilation timed out after {limit:g} s: {' '.join(cmd)}", timed_out=True)
    if returncode != 0:
        os.unlink(tmp)
        raise CompileError(f"{' '.join(cmd)} failed (exit {returncode}):\n{output}")
    os.replace(tmp, library)


def run_with_timeout(cmd: list[str], timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; on timeout kill the whole group (the compiler's children too)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return None, ""
