"""The traced op graph of one case, as typed records (read from the worker's ``kope.trace/1`` JSON).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Ops that pass their input through unchanged (as far as a kernel is concerned).
IDENTITY_OPS = frozenset({"detach", "alias", "lift_fresh", "lift_fresh_copy", "clone", "contiguous"})
FLOATS = frozenset({"float16", "bfloat16", "float32", "float64"})
# Shape/layout ops: the result is the same data seen with another shape or stride.
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "t",
        "transpose",
        "permute",
        "expand",
        "unsqueeze",
        "squeeze",
        "flatten",
    }
)


@dataclass(frozen=True)
class Ref:
    """A tensor argument: the id of a value in the case's value table."""

    id: str


@dataclass(frozen=True)
class Value:
    id: str
    kind: str  # input | param | buffer | attr | op | const
    shape: tuple[int, ...]
    dtype: str
    stride: tuple[int, ...] | None = None
    index: int | None = None  # inputs: position in get_inputs()
    name: str | None = None  # params/buffers: state-dict name; attrs: attribute path
    device: str = "cpu"  # the device type the reference made it on (get_inputs may make cuda tensors)

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Op:
    index: int
    name: str  # the overload packet, e.g. "addmm", "convolution", "_softmax"
    overload: str  # e.g. "default", "Tensor", "Scalar", "dim_IntList"
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    out: tuple[str, ...]  # value ids of the tensor results, in order (non-tensor results dropped)
    module: str = ""  # the submodule whose forward dispatched it ("" the model itself)

    @property
    def qualified(self) -> str:
        return f"aten.{self.name}.{self.overload}"

    def tensor_args(self) -> list[str]:
        found: list[str] = []

        def walk(a: Any) -> None:
            if isinstance(a, Ref):
                found.append(a.id)
            elif isinstance(a, (list, tuple)):
                for x in a:
                    walk(x)

        walk(self.args)
        walk(tuple(self.kwargs.values()))
        return found

    def arg(self, position: int, keyword: str | None = None, default: Any = None) -> Any:
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        return self.args[position] if position < len(self.args) else default


@dataclass
class CaseGraph:
    case: str
    mode: str
    values: dict[str, Value]
    ops: list[Op]
    outputs: tuple[str, ...]
    structure: Any
    attrs: dict[str, Any]
    init: list[Any]
    forward_args: list[str]
    training: bool
    scalar_inputs: dict[int, Any] = field(default_factory=dict)

    def value(self, value_id: str) -> Value:
        return self.values[value_id]

    def producer(self, value_id: str) -> Op | None:
        return self._producers().get(value_id)

    def consumers(self, value_id: str) -> list[Op]:
        return self._consumers().get(value_id, [])

    def _producers(self) -> dict[str, Op]:
        cache = self.__dict__.get("_producer_cache")
        if cache is None:
            cache = {v: op for op in self.ops for v in op.out}
            self.__dict__["_producer_cache"] = cache
        return cache

    def _consumers(self) -> dict[str, list[Op]]:
        cache = self.__dict__.get("_consumer_cache")
        if cache is None:
            cache = {}
            for op in self.ops:
                for v in dict.fromkeys(op.tensor_args()):
                    cache.setdefault(v, []).append(op)
            self.__dict__["_consumer_cache"] = cache
        return cache

    @property
    def inputs(self) -> list[Value]:
        return sorted((v for v in self.values.values() if v.kind == "input"), key=lambda v: v.index or 0)


def _decode(arg: Any) -> Any:
    if isinstance(arg, dict):
        if "t" in arg:
            return Ref(arg["t"])
        if "float" in arg:
            return float(arg["float"])
        if "dtype" in arg:
            return ("dtype", arg["dtype"])
        return ("other", next(iter(arg.values()), None))
    if isinstance(arg, list):
        return tuple(_decode(a) for a in arg)
    return arg


def _split(qualified: str) -> tuple[str, str]:
    parts = qualified.split(".")
    return parts[1], (parts[2] if len(parts) > 2 else "default")


def _is_dead_allocation(op: dict[str, Any], values: dict[str, Value]) -> bool:
    name, _ = _split(op["op"])
    if name not in ("empty", "zeros"):
        return False
    out = [o for o in op["out"] if isinstance(o, str)]
    return bool(out) and all(values[o].numel == 0 for o in out)


def case_graph(data: dict[str, Any]) -> CaseGraph:
    """A CaseGraph from one case of the worker's JSON; identity ops are folded into their input."""
    values = {
        vid: Value(
            id=vid,
            kind=v["kind"],
            shape=tuple(v["shape"]),
            dtype=v["dtype"],
            stride=tuple(v["stride"]) if v.get("stride") is not None else None,
            index=v.get("index"),
            name=v.get("name") or v.get("path"),
            device=v.get("device", "cpu"),
        )
        for vid, v in data["values"].items()
    }
    alias: dict[str, str] = {}

    def resolve(a: Any) -> Any:
        if isinstance(a, Ref):
            return Ref(alias.get(a.id, a.id))
        if isinstance(a, tuple):
            return tuple(resolve(x) for x in a)
        return a

    ops: list[Op] = []
    for raw in data["ops"]:
        if not raw["op"].startswith("aten.") or _is_dead_allocation(raw, values):
            continue
        name, overload = _split(raw["op"])
        args = resolve(_decode(raw["args"]))
        kwargs = {k: resolve(_decode(v)) for k, v in raw["kwargs"].items()}
        out = tuple(o for o in raw["out"] if isinstance(o, str))
        if name in (*IDENTITY_OPS, "_to_copy") and len(out) == 1 and args and isinstance(args[0], Ref):
            source = values[args[0].id]
            result = values[out[0]]
            same_dtype = source.dtype == result.dtype
            # A float <-> float cast is how PyTorch computes 16-bit floats in float32 (F.rms_norm on bfloat16):
            # the kernels do the same inside, so the cast is folded (it is not an op of its own for them).
            float_cast = name == "_to_copy" and source.dtype in FLOATS and result.dtype in FLOATS
            if source.shape == result.shape and (same_dtype or float_cast):
                alias[out[0]] = args[0].id
                continue
        ops.append(Op(len(ops), name, overload, args, kwargs, out, raw.get("module", "")))
    outputs = tuple(alias.get(o, o) for o in data["outputs"])
    ops = _without_dead(ops, outputs)
    return CaseGraph(
        case=data["case"],
        mode=data.get("mode", "fake"),
        values=values,
        ops=ops,
        outputs=outputs,
        structure=data.get("structure"),
        attrs=dict(data.get("attrs") or {}),
        init=list(data.get("init") or []),
        forward_args=list(data.get("forward_args") or []),
        training=bool(data.get("training")),
        scalar_inputs={int(k): v for k, v in (data.get("scalar_inputs") or {}).items()},
    )


def _without_dead(ops: list[Op], outputs: tuple[str, ...]) -> list[Op]:
    """Ops whose results are neither used later nor returned (in-place ops count as used: they write)."""
    live = set(outputs)
    kept: list[Op] = []
    for op in reversed(ops):
        if any(o in live for o in op.out) or op.name.endswith("_") and op.name not in ("zero_", "fill_"):
            kept.append(op)
            live.update(op.tensor_args())
    kept.reverse()
    return [Op(i, o.name, o.overload, o.args, o.kwargs, o.out, o.module) for i, o in enumerate(kept)]
