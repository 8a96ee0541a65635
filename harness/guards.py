"""Run-time anti-cheat checks, used inside the candidate's worker process.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import builtins
import ctypes
import gc
import hashlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterable
from operator import is_
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

import numpy as np
import torch
import torch.utils._python_dispatch as _python_dispatch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.worker_common import flat_tensors

# torch's C dispatch-mode stack, read through the functions as they were when the harness was imported (a
# candidate that replaces torch._C's attributes later does not change these)
_stack_len = torch._C._len_torch_dispatch_stack
_stack_at = torch._C._get_dispatch_stack_at

ALLOWED_ATEN = frozenset(
    # allocation and initialisation
    "empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like new_zeros ones "
    "ones_like new_ones full full_like new_full zero_ fill_ scalar_tensor lift_fresh lift_fresh_copy arange resize_ "
    "set_ record_stream "
    # views and metadata
    "view _unsafe_view reshape _reshape_alias as_strided as_strided_ permute transpose transpose_ t t_ expand "
    "squeeze squeeze_ unsqueeze unsqueeze_ select slice narrow split split_with_sizes unbind alias detach detach_ "
    "diagonal unfold view_as_real view_as_complex _has_compatible_shallow_copy_type is_same_size sym_size "
    "sym_stride sym_numel sym_storage_offset _local_scalar_dense "
    # copies and dtype/device moves
    "clone copy_ _to_copy _copy_from _copy_from_and_resize contiguous to cat stack constant_pad_nd".split()
)


class AtenRecorder(TorchDispatchMode):
    """Counts the aten ops dispatched while active; ``forbidden`` lists those outside the allow-list."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # torch's signature
        name = func.overloadpacket.__name__
        self.counts[name] = self.counts.get(name, 0) + 1
        return func(*args, **(kwargs or {}))

    @property
    def forbidden(self) -> dict[str, int]:
        return {k: v for k, v in self.counts.items() if k not in ALLOWED_ATEN}

    def on_stack(self) -> bool:
        """Whether this recorder is on torch's dispatch-mode stack now (read from C, not through its methods)."""
        return any(_stack_at(i) is self for i in range(_stack_len()))


def dispatch_depth() -> int:
    """How many modes torch's dispatch-mode stack holds now (read from C)."""
    return int(_stack_len())


def prime() -> None:
    """Run every guard once, so that torch's lazy imports (``torch._dynamo`` rebinds
    ``torch.manual_seed`` the first time a dispatch mode is entered) happen before the
    patch snapshot, not during the candidate's forward."""
    x = torch.ones(3)
    with AtenRecorder():
        (x + x).sum()
    same_bits(x, x.clone())
    digest([x, 1])
    native_thread_count()
    child_processes()


# -- monkey-patching ------------------------------------------------------------------------------


def _watched_namespaces(extra: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    import torch.nn.functional as F
    import torch.nn.modules as nn_modules

    spaces: list[tuple[str, Any]] = [
        ("torch", torch),
        ("torch.nn.functional", F),
        ("torch.Tensor", torch.Tensor),
        ("torch._C.TensorBase", torch._C.TensorBase),
        ("torch.nn.Module", torch.nn.Module),
        ("torch._C._nn", torch._C._nn),
        ("torch._C._VariableFunctions", torch._C._VariableFunctions),
        ("torch.linalg", torch.linalg),
        ("torch.special", torch.special),
        ("torch.fft", torch.fft),
        ("time", time),
        ("hashlib", hashlib),
        ("builtins", builtins),
        ("os", os),
        ("threading", threading),
    ]
    for name, value in vars(nn_modules).items():
        if isinstance(value, type) and issubclass(value, torch.nn.Module):
            spaces.append((f"torch.nn.{name}", value))
    # the dispatch machinery the recorder relies on: a no-op TorchDispatchMode.__enter__ switches it off
    spaces.append(("torch.utils._python_dispatch", _python_dispatch))
    for cls in AtenRecorder.__mro__[1:]:
        if cls is not object:
            spaces.append((f"{cls.__module__}.{cls.__qualname__}", cls))
    for name, module in list(sys.modules.items()):
        if name == "harness" or (name.startswith("harness.") and not name.startswith("harness.suite")):
            spaces.append((name, module))
            # the classes the module defines: a candidate that replaced a method of the harness's own worker
            # classes (TimedCalls.fetch, say) changes what the worker reports without touching a module-level name
            for value in list(vars(module).values()):
                if isinstance(value, type) and value.__module__ == name:
                    spaces.append((f"{name}.{value.__qualname__}", value))
    spaces.extend(extra)
    return spaces


def _members(space: Any) -> dict[str, tuple[Any, Any]]:
    """Each watched member with its code object: replacing a function's ``__code__`` keeps its identity."""
    items = _namespace(space)
    return {k: (v, _code(v)) for k, v in list(items.items()) if _watched(v)}


def _namespace(space: Any) -> dict[str, Any]:
    try:
        return vars(space)
    except TypeError:
        return {}


def _watched(value: Any) -> bool:
    return callable(value) or isinstance(value, (type, ModuleType, staticmethod, classmethod, property))


def _code(value: Any) -> Any:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return tuple(getattr(f, "__code__", None) for f in (value.fget, value.fset, value.fdel))
    return getattr(value, "__code__", None)


class PatchSnapshot:
    """Who is who, before the candidate ran; ``changes()`` lists what was replaced or removed since."""

    def __init__(self, extra: Iterable[tuple[str, Any]] = (), instances: Iterable[tuple[str, Any]] = ()) -> None:
        self.spaces = _watched_namespaces(extra)
        self.members = {label: _members(space) for label, space in self.spaces}
        # harness objects whose methods must stay their class's: an instance attribute named like a method
        # of the class (worker.timed.fetch = ...) shadows it without touching the class
        self.instances = list(instances)
        # on the harness's classes a new method can override an inherited one (or add __getattribute__)
        self.strict = {label for label, space in self.spaces if isinstance(space, type) and label.startswith("harness")}
        self._baseline: Any = self._base()

    def add(self, label: str, space: Any) -> None:
        """Watch ``space`` too (replacing whatever was watched under ``label``)."""
        self.spaces = [(name, s) for name, s in self.spaces if name != label] + [(label, space)]
        self.members[label] = _members(space)
        self._baseline = None  # taken afresh after the next full check (candidate code may have run since)

    def _base(self) -> tuple:
        """What ``_unchanged`` compares with, taken where the full check holds (at the start, or after it found
        nothing: a function's ``__dict__`` made, a name added)."""
        spaces = [(space, tuple(_namespace(space)), tuple(_namespace(space).values())) for _, space in self.spaces]
        plain: list[Any] = []
        others: list[tuple[Any, Any]] = []
        for members in self.members.values():
            plain.extend(value for value, code in members.values() if code is not None and type(value) is FunctionType)
            others.extend((v, code) for v, code in members.values() if code is not None and type(v) is not FunctionType)
        return spaces, plain, gc.get_referents(*plain), others

    def _unchanged(self) -> bool:
        """Whether the full check would find nothing, decided by identity in C loops: every watched namespace's
        names and values the same objects in the same order, every plain function's referents (its code among them)
        too. In the candidate's worker ``id()`` and ``__code__`` reads are audit events its hook sees (the full check
        read ~1,500 codes: ~2.2 ms of every fetch) and its memory is cold after each unit (a lookup per member: 0.8
        ms); this reads each namespace's table in order: ~1.4 ms there, 0.3 ms warm."""
        if self._baseline is None:
            return False
        spaces, plain, referents, others = self._baseline
        for space, names, values in spaces:
            now = _namespace(space)
            if len(now) != len(names) or not (all(map(is_, now, names)) and all(map(is_, now.values(), values))):
                return False
        now_referents = gc.get_referents(*plain)
        if len(now_referents) != len(referents) or not all(map(is_, now_referents, referents)):
            return False
        return all(_code(value) == code for value, code in others)

    def changes(self, limit: int = 10) -> list[str]:
        found = [] if self._unchanged() else self._space_changes(limit)
        for label, obj in self.instances:
            for name in list(vars(obj)):
                if callable(getattr(type(obj), name, None)):
                    found.append(f"{label}.{name} shadows the method of {type(obj).__qualname__}")
                if len(found) >= limit:
                    return found
        return found

    def _space_changes(self, limit: int) -> list[str]:
        found = []
        missing = object()
        for label, space in self.spaces:
            # each member is looked up in the namespace as it is now, and only functions' code compared
            now, members = _namespace(space), self.members[label]
            for name, (before, code) in members.items():
                value = now.get(name, missing)
                if value is not before:
                    found.append(f"{label}.{name} was {'replaced' if _watched(value) else 'deleted'}")
                elif code is not None and _code(value) != code:  # None: a builtin, class or module (no code to swap)
                    found.append(f"{label}.{name} had its code replaced")
                if len(found) >= limit:
                    return found
            if label in self.strict:
                found.extend(
                    f"{label}.{name} was added" for name, v in list(now.items()) if name not in members and _watched(v)
                )
                if len(found) >= limit:
                    return found[:limit]
        if not found:
            self._baseline = self._base()
        return found


# -- audit hook: files, network, processes during forward ---------------------------------------

_PROCESS_EVENTS = (
    "subprocess.Popen",
    "os.system",
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.exec",
    "os.spawn",
    "pty.spawn",
)
_NETWORK_EVENTS = (
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
    "socket.getaddrinfo",
    "socket.__new__",
    "urllib.Request",
)


_DELETE_EVENTS = ("os.remove", "os.rmdir", "os.rename", "shutil.rmtree")
_PROC_MEM = re.compile(r"/proc/(\d+)/(task/\d+/)?mem$")


class AuditGuard:
    """One per process. ``arm()``/``disarm()`` around forward; ``take()`` returns (check, detail) pairs seen."""

    _installed: AuditGuard | None = None

    def __init__(self, allowed_roots: Iterable[str | Path] = (), scratch: Iterable[str | Path] = ()) -> None:
        self.armed = False
        self.events: list[tuple[str, str]] = []
        self.sticky: list[tuple[str, str]] = []  # recorded whether armed or not (see the module's docstring)
        # where deleting is the worker's own business: its scratch folder (none given: deletions are not judged)
        self.scratch = tuple(str(Path(p).resolve()).rstrip(os.sep) + os.sep for p in scratch)
        harness_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        roots = {
            sys.prefix,
            sys.base_prefix,
            sys.exec_prefix,
            os.path.dirname(torch.__file__),
            harness_root,
            *map(str, allowed_roots),
        }
        self.allowed_roots = tuple(str(Path(r).resolve()) + os.sep for r in roots if r)
        sys.addaudithook(self._hook)
        AuditGuard._installed = self

    def _hook(self, event: str, args: tuple) -> None:
        if event in _DELETE_EVENTS or event == "open":
            self._never(event, args)
        if not self.armed:
            return
        if event == "open":
            path = args[0] if args else None
            if isinstance(path, int) or path is None:
                return
            text = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            full = os.path.realpath(text)
            writing = any(c in mode for c in "wax+")
            # Reading a path that does not exist yields nothing (the import system probes such paths).
            if not full.startswith(self.allowed_roots) and (writing or os.path.exists(full)):
                self.events.append(("file_access", f"opened {text!r} (mode {mode!r})"))
        elif event.startswith(_NETWORK_EVENTS):
            self.events.append(("network_access", f"{event}{_short(args)}"))
        elif event.startswith(_PROCESS_EVENTS):
            self.events.append(("process_spawn", f"{event}{_short(args)}"))

    def _never(self, event: str, args: tuple) -> None:
        """Record what no phase does: a deletion outside scratch, another process's memory file opened."""
        path = args[0] if args else None
        if path is None or isinstance(path, int):
            return  # a descriptor: nothing to judge it by
        try:
            text = os.fsdecode(path) if isinstance(path, (bytes, os.PathLike)) else str(path)
            full = os.path.realpath(text)
        except (TypeError, ValueError, OSError):
            return
        dir_fd = args[2] if event == "os.rename" and len(args) > 2 else args[1] if len(args) > 1 else None
        if event != "open" and not os.path.isabs(text) and isinstance(dir_fd, int) and dir_fd >= 0:
            return  # relative to a directory descriptor: where it points is not known here
        if event == "open":
            m = _PROC_MEM.match(os.path.abspath(text)) or _PROC_MEM.match(full)
            if m and int(m.group(1)) != os.getpid() and os.path.exists(full):
                self.sticky.append(("memory_access", f"opened {text!r}, the memory of another process"))
            return
        if self.scratch and not (full + os.sep).startswith(self.scratch) and os.path.lexists(full):
            self.sticky.append(("file_access", f"tried to delete or rename {text!r}, outside its scratch folder"))

    def take_sticky(self) -> list[tuple[str, str]]:
        found, self.sticky = self.sticky, []
        return found

    def arm(self) -> None:
        self.events = []
        self.armed = True

    def disarm(self) -> list[tuple[str, str]]:
        self.armed = False
        events, self.events = self.events, []
        return events


def _short(args: tuple) -> str:
    text = repr(args)
    return text if len(text) < 120 else text[:117] + "..."


# -- interpreter hooks -----------------------------------------------------------------------------


def hooks() -> dict[str, Any]:
    """The interpreter's profile and trace hooks now: what a ``sys.setprofile``/``settrace`` (of this thread or,
    through ``threading``, of every new one) or a ``sys.monitoring`` tool installed."""
    found: dict[str, Any] = {"sys.getprofile": sys.getprofile(), "sys.gettrace": sys.gettrace()}
    for name in ("getprofile", "gettrace"):
        getter = getattr(threading, name, None)
        found[f"threading.{name}"] = getter() if getter else getattr(threading, f"_{name[3:]}_hook", None)
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:  # Python 3.12+
        for tool in range(6):
            name = monitoring.get_tool(tool)
            if name is not None:
                found[f"sys.monitoring tool {tool}"] = (name, monitoring.get_events(tool))
    return found


def hook_changes(before: dict[str, Any]) -> list[str]:
    """What differs from ``before`` (an earlier ``hooks()``)."""
    now = hooks()
    return [
        f"{name} is {now.get(name)!r} (was {before.get(name)!r})"
        for name in sorted(set(before) | set(now))
        if now.get(name) is not before.get(name) and now.get(name) != before.get(name)
    ]


# -- what is left running --------------------------------------------------------------------------


def python_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


def native_thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def child_processes() -> list[int]:
    """Live (non-zombie) children of this process."""
    me, children = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[1] == str(me) and fields[0] != "Z":
            children.append(int(entry))
    return children


# -- outputs ---------------------------------------------------------------------------------------


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def aliases(outputs: list[Any], inputs: list[Any]) -> str | None:
    """A description of the first output that shares memory with an input, else None."""
    spans = [
        (i, _storage_span(x))
        for i, x in enumerate(inputs)
        if isinstance(x, torch.Tensor) and x.untyped_storage().nbytes()
    ]
    for j, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor) or out.untyped_storage().nbytes() == 0:
            continue
        lo, hi = _storage_span(out)
        for i, (a, b) in spans:
            if lo < b and a < hi:
                return f"output {j} shares memory with input {i}"
    return None


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN-safe): used for mutation and lazy-output checks."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(a.detach().reshape(-1).view(torch.uint8), b.detach().reshape(-1).view(torch.uint8))


def digest(values: list[Any]) -> str:
    """A content hash of tensors (dtype, shape, bytes) and plain values."""
    h = hashlib.blake2b(digest_size=16)
    for v in values:
        if isinstance(v, torch.Tensor):
            t = v.detach().to("cpu").contiguous()
            h.update(f"{t.dtype}{tuple(t.shape)}".encode())
            if t.numel():
                h.update(t.reshape(-1).view(torch.uint8).numpy().data)
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


# -- outputs filled after the timed call (the seal) ----------------------------------------------------

# Kept small: the seal is taken inside the timed request (both workers alike, ~4-5 us of CPU a sealed tensor), and
# every unit pays for it (with 64 outputs and 2048 elements per unit, ~5 ms a unit, fewer units fit in a case's budget)
SEAL_CALLS = 4  # timed calls whose outputs are sealed per unit: the last one and up to three drawn at random
SEAL_ELEMENTS = 32  # elements sealed per output tensor
_INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` flattened as raw integers of its element size (NaN-safe), None where there is none."""
    if t.is_complex() or t.element_size() not in _INTS:
        return None
    return t.detach().reshape(-1).view(_INTS[t.element_size()])


def seal(outputs: list[Any]) -> list[dict[str, Any]]:
    """Random elements of the outputs of a unit's last call and of up to SEAL_CALLS - 1 calls drawn at random, chosen
    now from fresh randomness (inside the ``go`` request, microseconds after the calls returned: a candidate cannot
    know them in advance nor fill its outputs in between): ``{"call", "k" (tensor of its output), "at", "bits"}``,
    positions and raw values in hex (cheap to send: this is on the parent's clock, in both workers alike), for
    ``unseal`` and ``sealed_mismatch``. An output left a fraction f unfilled is caught with probability
    1 - (1 - f)^SEAL_ELEMENTS when sealed; the last call's always is.

    The last call's elements are read first, with the least work before them (its positions drawn and its elements
    read, by the native reader where loaded: ``use_seal_reader``; the other calls, the hex and the records come
    after): a fill that lands a fixed delay after forward returned races this read alone. docs/harness-workers.md,
    "The seal's latency"."""
    if not outputs:
        return []
    last = len(outputs) - 1
    read = [(last, k, *_seal_read(t)) for k, t in enumerate(flat_tensors(outputs[last]))]
    drawn = [v % len(outputs) for v in memoryview(os.urandom(8 * SEAL_CALLS)).cast("Q")]
    for call in sorted(set(drawn[1:]) - {last}, reverse=True):
        read.extend((call, k, *_seal_read(t)) for k, t in enumerate(flat_tensors(outputs[call])))
    return [
        {"call": call, "k": k, "at": b"".join(i.to_bytes(8, "little") for i in at).hex(), "bits": got.hex()}
        for call, k, at, got in read
    ]


# The seal's reader: positions from getrandom and the elements read, in one call. Right after a kernel that swept
# megabytes the worker's interpreter runs from cold caches: from forward's return to the last call's elements read,
# 84 / 117 / 221 us (p10 / median / p90) in Python after leaving no_grad; 43 / 58 / 85 us with this reader, inside it
# (wide_relu's cases, 6 Dec; docs/harness-workers.md, "The seal's latency").
SEAL_READER_SOURCE = r"""
#include <cstdint>
#include <cstring>
#include <sys/random.h>
template <int64_t S> static void gather(const unsigned char* base, const uint64_t* at, int64_t count, unsigned char* out) {
    for (int64_t i = 0; i < count; ++i) __builtin_prefetch(base + at[i] * S);  // the misses overlap
    for (int64_t i = 0; i < count; ++i) std::memcpy(out + i * S, base + at[i] * S, S);
}
extern "C" int64_t kope_seal_read(const unsigned char* base, int64_t n, int64_t size, int64_t count, uint64_t* at,
                                  unsigned char* out) {
    int64_t want = count * 8;
    if (n <= 0 || count > 64 || getrandom(at, want, 0) != want) return -1;
    for (int64_t i = 0; i < count; ++i) at[i] %= (uint64_t)n;
    switch (size) {
        case 1: gather<1>(base, at, count, out); return 0;
        case 2: gather<2>(base, at, count, out); return 0;
        case 4: gather<4>(base, at, count, out); return 0;
        case 8: gather<8>(base, at, count, out); return 0;
    }
    return -1;
}
"""
# Set once, before the candidate's code is imported (``harness.worker_timed.TimedCalls``): the reader is a watched
# module-level callable, so a candidate that swaps it is named by the patch check like any harness function
_seal_native: Any = None
_seal_at = (ctypes.c_uint64 * SEAL_ELEMENTS)()
_seal_bytes = ctypes.create_string_buffer(8 * SEAL_ELEMENTS)


def seal_reader_loaded() -> bool:
    return _seal_native is not None


def use_seal_reader(library: str) -> None:
    """Seal contiguous CPU outputs through the native reader, ``SEAL_READER_SOURCE`` built at ``library``
    (``harness.worker_timed.native_seal``; without it the Python reader reads the same elements, later)."""
    global _seal_native
    function = ctypes.CDLL(library).kope_seal_read
    function.restype = ctypes.c_int64
    pointer, count = ctypes.c_void_p, ctypes.c_int64  # (base, n, size, elements, positions out, bytes out)
    function.argtypes = [pointer, count, count, count, pointer, pointer]
    _seal_native = function


def _seal_read(t: torch.Tensor) -> tuple[list[int], bytes]:
    """SEAL_ELEMENTS random positions of ``t`` and their raw bytes as they are now (none for an unsealable tensor)."""
    n = t.numel()
    if not n or t.is_complex() or t.element_size() not in _INTS:
        return [], b""
    if _seal_native is not None and t.device.type == "cpu" and t.is_contiguous():
        size = t.element_size()
        if _seal_native(t.data_ptr(), n, size, SEAL_ELEMENTS, _seal_at, _seal_bytes) == 0:
            return list(_seal_at), _seal_bytes.raw[: SEAL_ELEMENTS * size]
    at = [v % n for v in memoryview(os.urandom(8 * SEAL_ELEMENTS)).cast("Q")]
    if t.device.type == "cpu":
        return at, _read_in_place(t, at)
    raw = t.detach().view(_INTS[t.element_size()])
    return at, raw.reshape(-1)[torch.tensor(at, dtype=torch.int64, device=raw.device)].cpu().numpy().tobytes()


def _read_in_place(t: torch.Tensor, at: list[int]) -> bytes:
    """The raw bytes of ``t``'s elements at logical (C-order) positions ``at``, read where they lie: no copy, and no
    torch or numpy compute (inside ``go`` the native probe counts those libraries' time as the reference's work)."""
    size, shape, strides = t.element_size(), tuple(t.shape), t.stride()
    span = (sum((n - 1) * st for n, st in zip(shape, strides)) + 1) * size
    memory = memoryview((ctypes.c_char * span).from_address(t.data_ptr())).cast("B")
    contiguous = t.is_contiguous()
    parts = []
    for i in at:
        offset = i
        if not contiguous:
            offset = 0
            for n, st in zip(reversed(shape), reversed(strides)):
                i, r = divmod(i, n)
                offset += r * st
        parts.append(memory[offset * size : (offset + 1) * size])
    return b"".join(parts)


def unseal(sealed: Any, items: Any) -> Any:
    """``seal``'s record as ``sealed_mismatch`` reads it: ``{"i": index among the fetched tensors, "at": [positions],
    "bits": [raw values]}``, the index found in the fetched items' descriptions of each call's output; an entry that
    does not decode stays as it came (``sealed_mismatch`` names it malformed)."""
    if not isinstance(sealed, list) or not isinstance(items, list):
        return sealed
    out: list[Any] = []
    for entry in sealed:
        try:
            at = np.frombuffer(bytes.fromhex(entry["at"]), np.uint64).astype(np.int64)
            raw = bytes.fromhex(entry["bits"])
            kind = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}[len(raw) // len(at)] if len(at) else np.uint8
            index = _tensor_ids(items[entry["call"]]["output"])[entry["k"]]
            out.append({"i": index, "at": at.tolist(), "bits": np.frombuffer(raw, kind).tolist()})
        except (KeyError, IndexError, TypeError, ValueError):
            out.append(entry)
    return out


def _tensor_ids(encoded: Any) -> list[Any]:
    """The indices of the tensors of one call's output, in order (``harness.worker_common.encode``'s description)."""
    if isinstance(encoded, dict):
        return [encoded["t"]] if "t" in encoded else [t for v in encoded.get("seq", []) for t in _tensor_ids(v)]
    return []


def sealed_mismatch(sealed: Any, tensors: list[torch.Tensor]) -> str | None:
    """Why ``tensors`` (as read now) are not what ``seal`` saw, else None."""
    if not isinstance(sealed, list) or (tensors and not sealed):
        return "the worker sealed none of its outputs"
    for entry in sealed:
        try:
            i, at, bits = int(entry["i"]), torch.tensor(entry["at"], dtype=torch.int64), entry["bits"]
            t = tensors[i]
            now = _bits(t)
            if now is None or not len(at):
                continue
            if at.numel() != len(bits) or int(at.max()) >= t.numel() or int(at.min()) < 0:
                return f"the seal of output {i} is malformed"
            if now[at].tolist() != bits:
                return f"output {i} changed after the timed call returned"
        except (KeyError, IndexError, TypeError, ValueError, RuntimeError) as exc:
            return f"a seal entry is malformed ({exc})"
    return None
