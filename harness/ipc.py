"""Messages between the harness and its worker processes: a JSON header plus raw tensor bytes; every message
a typed record (below: ``Load`` ... ``ZygoteState``) with one encode/decode pair.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields
from typing import Any, ClassVar, TypeVar

import torch

MAGIC = b"KOPE"
MAX_HEADER = 64 << 20
DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "complex64",
        "complex128",
    )
}


class ProtocolError(Exception):
    """The peer sent something that is not a valid message."""


class PeerClosed(Exception):
    """The peer closed its end (it exited or crashed)."""


class ReadTimeout(Exception):
    """No complete message before the deadline."""


def tensor_bytes(t: torch.Tensor) -> memoryview:
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    return flat.view(torch.uint8).numpy().data


def tensor_spec(t: torch.Tensor, nbytes: int) -> dict[str, Any]:
    """A tensor's ``{"dtype", "shape", "nbytes"}`` description (``check_tensor_spec`` reads one)."""
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "nbytes": nbytes}


def write_message(fd: int, header: dict[str, Any], tensors: Sequence[torch.Tensor] = ()) -> None:
    header = dict(header)
    payloads = [tensor_bytes(t) for t in tensors]
    header["tensors"] = [tensor_spec(t, len(p)) for t, p in zip(tensors, payloads)]
    head = json.dumps(header, allow_nan=True).encode()
    # the sender's CPU so far onto its process clock before the reader wakes: that clock (what the parent reads of a
    # worker, harness.worker_process.cpu_ns) sums each thread's runtime as of its last scheduler update, and a running
    # thread's is brought up to date only by a tick, a context switch or a read of its own thread clock. Without this,
    # a reader woken on another CPU read up to a tick (4 ms at HZ=250) of the sender's work before this message later,
    # in the next untimed window: an honest candidate was flagged by the wait bound in CI (1.87 ms "between the
    # prepare reply and its go request"; docs/harness-workers.md, "Timing from outside, adaptively")
    time.thread_time_ns()
    _write_all(fd, MAGIC + struct.pack("<Q", len(head)) + head)
    for payload in payloads:
        _write_all(fd, payload)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view[: 1 << 24])
        view = view[written:]


def check_tensor_spec(
    spec: Any, error: type[Exception] = ProtocolError, what: str = "tensor"
) -> tuple[torch.dtype, list[int], int]:
    """(dtype, shape, nbytes) of one ``{"dtype", "shape", "nbytes"}`` description a worker sent, or ``error`` for
    the first thing wrong with it (a dtype outside the allow-list, a bad shape, a size that does not match)."""
    if not isinstance(spec, dict):
        raise error(f"bad {what} description {spec!r}")
    dtype, shape, nbytes = spec.get("dtype"), spec.get("shape"), spec.get("nbytes")
    if dtype not in DTYPES or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise error(f"bad {what} description {spec!r}")
    expected = math.prod(shape) * DTYPES[dtype].itemsize
    if type(nbytes) is not int or nbytes != expected:
        raise error(f"tensor of shape {shape} and dtype {dtype} declares {nbytes} bytes, expected {expected}")
    return DTYPES[dtype], shape, nbytes


class MessageReader:
    """Reads messages from a pipe with a deadline; ``on_wait`` runs between polls (e.g. a memory watchdog)."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self.fd = fd
        self.max_bytes = max_bytes

    def read(
        self, timeout: float, on_wait: Callable[[], None] | None = None
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        deadline = time.monotonic() + timeout
        prefix = self._exact(12, deadline, on_wait)
        if prefix[:4] != MAGIC:
            raise ProtocolError(f"bad message prefix {bytes(prefix[:4])!r}")
        (length,) = struct.unpack("<Q", prefix[4:])
        if length > MAX_HEADER:
            raise ProtocolError(f"message header of {length} bytes is over the {MAX_HEADER} limit")
        try:
            header = json.loads(bytes(self._exact(length, deadline, on_wait)))
        except ValueError as exc:
            raise ProtocolError(f"message header is not JSON: {exc}") from None
        if not isinstance(header, dict):
            raise ProtocolError("message header is not a JSON object")
        specs = header.pop("tensors", [])
        total = 0
        for spec in specs:
            total += check_tensor_spec(spec)[2]
        if total > self.max_bytes:
            raise ProtocolError(f"message of {total} bytes is over the {self.max_bytes}-byte limit")
        # all of the tensors' bytes read at once, each read taking all that the pipe holds: read tensor by tensor, the
        # writer was woken hundreds of times a reply on a loaded machine (a fetch's CPU in a worker then went from 2
        # to 200 ms, unlike in the other worker: docs/harness-workers.md, "Timing from outside, adaptively")
        raws = [bytearray(spec["nbytes"]) for spec in specs]
        self._into([memoryview(raw) for raw in raws if raw], deadline, on_wait)
        tensors = [
            torch.frombuffer(raw, dtype=torch.uint8).view(DTYPES[spec["dtype"]]).reshape(spec["shape"])
            if raw
            else torch.empty(spec["shape"], dtype=DTYPES[spec["dtype"]])
            for spec, raw in zip(specs, raws)
        ]
        return header, tensors

    def _exact(self, n: int, deadline: float, on_wait: Callable[[], None] | None) -> bytearray:
        buf = bytearray(n)
        self._into([memoryview(buf)] if n else [], deadline, on_wait)
        return buf

    def _into(self, views: list[memoryview], deadline: float, on_wait: Callable[[], None] | None) -> None:
        """Fill ``views`` (none empty) in order, up to IOV_MAX of them a read."""
        i = 0
        while i < len(views):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ReadTimeout()
            wait = None if (on_wait is None and remaining == float("inf")) else min(remaining, 0.05)
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                if on_wait is not None:
                    on_wait()
                continue
            try:
                got = os.readv(self.fd, views[i : i + 1024])
            except BlockingIOError:
                continue
            if got == 0:
                raise PeerClosed()
            while got:
                used = min(got, len(views[i]))
                views[i], got = views[i][used:], got - used
                if not views[i]:
                    i += 1


def read_message_blocking(fd: int) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """Worker side: wait as long as it takes for the parent's next request."""
    return MessageReader(fd, max_bytes=1 << 62).read(timeout=float("inf"))


# -- the messages: one typed record per kind, one encode/decode pair -------------------------------------------
#
# On the wire a message is the JSON header above (its tensors travel beside it). A request names its kind in
# ``op``; a reply says ``ok`` and is decoded as the reply to the request it answers. ``encode`` writes a record's
# fields as the header's keys (an optional field left at None is left out); ``decode_*`` checks every key and its
# type (anything else: ``ProtocolError``, a broken worker; docs/architecture.md, "The harness's own layers").


@dataclass
class Message:
    kind: ClassVar[str]


# -- parent -> worker (``op``) --


@dataclass
class Load(Message):
    """The first request: the role, the task (and for a candidate its file and first case)."""

    kind: ClassVar[str] = "load"
    task: str
    target: str
    target_options: dict[str, Any]
    threads: int
    role: str | None = None
    candidate: str | None = None
    case: int | None = None
    init_seed: int | None = None
    deployed: bool | None = None  # as deployed: the worker keeps torch's default thread count (EvalOptions.deployed)


@dataclass
class Reference(Message):
    """The reference's outputs for ``seeds``; ``precise``: recomputed in float64 (model and floating-point inputs
    upcast; a timed call's ring seed names its inputs too), for the tolerance rule of ``harness.compare``."""

    kind: ClassVar[str] = "reference"
    case: int
    init_seed: int
    seeds: list[int]
    retries: int | None = None
    precise: bool | None = None


@dataclass
class TimeReference(Message):
    kind: ClassVar[str] = "time_reference"
    case: int
    init_seed: int
    seed: int
    reps: int | None = None


@dataclass
class Run(Message):
    kind: ClassVar[str] = "run"
    case: int
    init_seed: int
    seeds: list[int]
    lazy_check: bool | None = None
    remote: bool | None = None


@dataclass
class Prepare(Message):
    kind: ClassVar[str] = "prepare"
    case: int
    init_seed: int
    seeds: list[int]


@dataclass
class Go(Message):
    kind: ClassVar[str] = "go"


@dataclass
class Calibrate(Message):
    """Reference worker only: an honest kernel's unavoidable libtorch work for ``cpu_ms`` (``harness.dispatch_allowance``)."""

    kind: ClassVar[str] = "calibrate"
    cpu_ms: float


@dataclass
class Fetch(Message):
    kind: ClassVar[str] = "fetch"
    remote: bool | None = None


@dataclass
class Exit(Message):
    kind: ClassVar[str] = "exit"


@dataclass
class CompileReply(Message):
    """The parent's answer to a worker's ``compile`` request: the compile service's own reply, as it made it."""

    kind: ClassVar[str] = "compile_reply"
    body: dict[str, Any]


# -- worker -> parent --


@dataclass
class Ready(Message):
    """A worker's (or the zygote's) greeting: booted."""

    kind: ClassVar[str] = "ready"
    pid: int


@dataclass
class BootFailed(Message):
    """A worker's (or the zygote's) greeting: its boot failed, and why."""

    kind: ClassVar[str] = "failed"
    message: str


@dataclass
class CompileRequest(Message):
    """A sandboxed worker asks the parent to compile (``harness.compile_service`` checks the body: its language)."""

    kind: ClassVar[str] = "compile"
    body: dict[str, Any]


@dataclass
class Failed(Message):
    """``ok: false``: the request failed (the candidate's error or cheat, or the reference's failure)."""

    kind: ClassVar[str] = "failed_reply"
    error_kind: str | None = None
    message: str | None = None
    traceback: str | None = None
    compile_time_s: float | None = None
    reference_failed: str | None = None
    retire: bool | None = None  # a sticky device error: the worker is never reused
    sticky: str | None = None


@dataclass
class Loaded(Message):
    kind: ClassVar[str] = "load_reply"
    hardware: dict[str, Any] | None = None  # the reference worker's
    compile_time_s: float | None = None  # the candidate worker's
    threads: int | None = None


@dataclass
class Trials(Message):
    """The reply to ``reference`` and ``run``: one trial per seed (its outputs in the tensors, or ``remote``)."""

    kind: ClassVar[str] = "trials"
    trials: list[Any]
    compile_time_s: float | None = None
    remote: Any = None


@dataclass
class Times(Message):
    kind: ClassVar[str] = "times"
    ms: list[float]


@dataclass
class Done(Message):
    kind: ClassVar[str] = "done"


@dataclass
class Went(Message):
    """The reply to ``go``: the calls made, and random elements of their outputs sealed right after them
    (``harness.guards.seal``)."""

    kind: ClassVar[str] = "went"
    n: int
    sealed: Any = None


@dataclass
class Calibrated(Message):
    """The reply to ``calibrate``: how many calls' worth of allocations ran, and output tensors per call."""

    kind: ClassVar[str] = "calibrated"
    calls: int
    outputs: int


@dataclass
class Fetched(Message):
    """The reply to ``fetch``: the timed unit's items (outputs in the tensors, or ``remote``)."""

    kind: ClassVar[str] = "fetched"
    items: list[Any]
    reused: Any
    compile_time_s: float | None = None
    remote: Any = None


# -- the zygote's control socket --


@dataclass
class State(Message):
    kind: ClassVar[str] = "state"


@dataclass
class Spawn(Message):
    """Fork a worker with this config (its descriptors travel beside the message)."""

    kind: ClassVar[str] = "spawn"
    config: dict[str, Any]


@dataclass
class ZygoteState(Message):
    """What the zygote says of its own CUDA state (``harness.zygote.cuda_state``)."""

    kind: ClassVar[str] = "zygote_state"
    initialized: bool
    calls: list[str]
    libcuda: list[str]
    device_fds: list[str]
    bad_fork: list[str]
    touched: str | None  # why a fork of it could not use CUDA (None: it never touched CUDA)


M = TypeVar("M", bound=Message)
Request = Load | Reference | TimeReference | Run | Prepare | Go | Calibrate | Fetch | Exit
Reply = Failed | Loaded | Trials | Times | Done | Went | Calibrated | Fetched
REQUESTS: dict[str, type[Message]] = {
    c.kind: c for c in (Load, Reference, TimeReference, Run, Prepare, Go, Calibrate, Fetch, Exit)
}
GREETINGS: dict[str, type[Message]] = {c.kind: c for c in (Ready, BootFailed)}
REPLIES: dict[str, type[Message]] = {  # the reply a request of each kind gets when it succeeds
    "load": Loaded,
    "reference": Trials,
    "run": Trials,
    "time_reference": Times,
    "prepare": Done,
    "go": Went,
    "calibrate": Calibrated,
    "fetch": Fetched,
}
_OPAQUE = (CompileRequest, CompileReply)  # one field, ``body``: the header itself (less ``op``)
# these say their kind in ``op`` (a ``CompileRequest`` too, as an opaque record)
_TAGGED = (*REQUESTS.values(), *GREETINGS.values(), State)


def encode(message: Message) -> dict[str, Any]:
    """The header a record is sent as."""
    if isinstance(message, _OPAQUE):
        head = {"op": message.kind} if isinstance(message, CompileRequest) else {}
        return {**head, **message.body}
    header: dict[str, Any] = {}
    if isinstance(message, _TAGGED):
        header["op"] = message.kind
    elif isinstance(message, (*REPLIES.values(), Failed)):
        header["ok"] = not isinstance(message, Failed)
    for f in fields(message):
        value = getattr(message, f.name)
        if value is None and f.default is None:
            continue
        header[f.name] = value
    return header


def decode(cls: type[M], header: Any, *, ignore: tuple[str, ...] = (), what: str = "") -> M:
    """``header`` as a ``cls`` record, every key and type checked (``ProtocolError`` for the first thing wrong)."""
    what = what or f"a {cls.kind} message"
    if not isinstance(header, dict):
        raise ProtocolError(f"{what} must be a JSON object, not {type(header).__name__}")
    if cls in _OPAQUE:
        return cls(body={k: v for k, v in header.items() if k != "op"})  # type: ignore[call-arg]
    spec = _spec(cls)
    unknown = sorted(header.keys() - spec.keys() - set(ignore))
    if unknown:
        raise ProtocolError(f"{what} has unknown field(s) {', '.join(map(repr, unknown))}")
    values = {}
    for name, (hint, required) in spec.items():
        if name not in header:
            if required:
                raise ProtocolError(f"{what} lacks its {name!r} field")
            continue
        value = header[name]
        if not _is(value, hint):
            raise ProtocolError(f"{what}: its {name!r} is {_describe(value)}, not {_name(hint)}")
        values[name] = value
    return cls(**values)


def decode_request(header: Any) -> Message:
    """A request as a worker reads it (``op`` names its kind)."""
    cls = _by_op(header, REQUESTS, "request")
    return decode(cls, header, ignore=("op",), what=f"a {cls.kind} request")


def decode_greeting(header: Any) -> Ready | BootFailed:
    """A worker's or the zygote's first message: ``ready`` or ``failed``."""
    return decode(_by_op(header, GREETINGS, "greeting"), header, ignore=("op",))  # type: ignore[return-value]


def decode_reply(request: str, header: Any) -> Reply | CompileRequest:
    """What a worker sent while the parent waited for its reply to a ``request``: that reply (``Failed`` when it
    says ``ok: false``), or a compile request of its own (``op: compile``)."""
    if isinstance(header, dict) and header.get("op") == CompileRequest.kind:
        return decode(CompileRequest, header)
    if request not in REPLIES:
        raise ProtocolError(f"no reply is expected to a {request!r} request")
    if not isinstance(header, dict) or type(header.get("ok")) is not bool:
        raise ProtocolError(f"the reply to a {request} request must say ok: true or false")
    cls: type[Message] = REPLIES[request] if header["ok"] else Failed
    return decode(cls, header, ignore=("ok",), what=f"the reply to a {request} request")  # type: ignore[return-value]


def decode_zygote_request(header: Any) -> State | Spawn:
    """A request on the zygote's control socket: ``{"op": "state"}`` or ``{"config": ...}``."""
    if isinstance(header, dict) and header.get("op") == State.kind:
        return decode(State, header, ignore=("op",))
    return decode(Spawn, header)


def expect(reply: Message, cls: type[M]) -> M:
    """``reply`` as the record it must be (``decode_reply`` decoded it by the request it answers), or
    ``ProtocolError``."""
    if not isinstance(reply, cls):
        raise ProtocolError(f"expected a {cls.kind} reply, got a {reply.kind} one")
    return reply


def send(fd: int, message: Message, tensors: Sequence[torch.Tensor] = ()) -> None:
    """Write one record (and its tensors) to a pipe."""
    write_message(fd, encode(message), tensors)


def _by_op(header: Any, kinds: dict[str, type[Message]], what: str) -> type[Message]:
    op = header.get("op") if isinstance(header, dict) else None
    if op not in kinds:
        raise ProtocolError(f"unknown {what} kind {op!r} (expected one of {', '.join(sorted(kinds))})")
    return kinds[op]


_SPECS: dict[type, dict[str, tuple[Any, bool]]] = {}


def _spec(cls: type) -> dict[str, tuple[Any, bool]]:
    """Each field of a record: its type, and whether it is required (read once per record class)."""
    if cls not in _SPECS:
        hints = typing.get_type_hints(cls)
        _SPECS[cls] = {f.name: (hints[f.name], f.default is MISSING) for f in fields(cls)}
    return _SPECS[cls]


def _is(value: Any, hint: Any) -> bool:
    """Whether a JSON value has the type ``hint`` (Any, None, bool, int, float, str, unions, list[X], dict[str, X])."""
    if hint is int or hint is bool:
        return type(value) is hint
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is(value, h) for h in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_is(v, item) for v in value)
    if origin is dict:
        _, item = typing.get_args(hint)
        return isinstance(value, dict) and all(isinstance(k, str) and _is(v, item) for k, v in value.items())
    if hint is float:
        return type(value) in (int, float)
    return type(value) is hint


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _renumber(desc: Any, tensors: list, own: list) -> Any:
    if isinstance(desc, dict) and "t" in desc:
        own.append(tensors[desc["t"]])
        return {**desc, "t": len(own) - 1}
    if isinstance(desc, dict) and "seq" in desc:
        return {**desc, "seq": [_renumber(d, tensors, own) for d in desc["seq"]]}
    return desc


def split_trials(trials: list[dict], tensors: list) -> list[tuple[dict, list]]:
    """A ``Trials`` reply's trials, each with only the tensors its output (and, for index outputs, its inputs) refer to (renumbered from 0)."""
    out = []
    for trial in trials:
        own: list = []
        split = {**trial, "output": _renumber(trial["output"], tensors, own)}
        if "inputs" in trial:
            split["inputs"] = _renumber(trial["inputs"], tensors, own)
        out.append((split, own))
    return out
