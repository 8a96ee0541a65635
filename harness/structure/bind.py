"""Binding a match's parameters to where the task keeps them.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import keyword
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.structure.graph import CaseGraph


@dataclass(frozen=True)
class ScalarBinding:
    name: str
    source: str  # input | attr | literal | shape
    expr: str  # the Python expression in ModelNew.forward
    value: Any  # the first case's value

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "expr": self.expr, "value": _jsonable(self.value)}


@dataclass(frozen=True)
class TensorBinding:
    role: str
    source: str  # input | param | buffer | attr | stage
    name: str  # forward parameter name, state-dict name, attribute path, or stage value id
    expr: str
    shape: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"role": self.role, "source": self.source, "name": self.name, "shape": list(self.shape)}


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    return value


def same(a: Any, b: Any) -> bool:
    a, b = _plain(a), _plain(b)
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return False
        return all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (type(a) is type(b) and a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=0.0)
    return a == b


def attribute_expr(path: str, base: str = "self") -> str:
    """``norms.0.weight`` -> ``self.norms[0].weight``; parts that are not identifiers use getattr."""
    expr = base
    for part in path.split("."):
        if part.isdigit():
            expr += f"[{part}]"
        elif part.isidentifier() and not keyword.iskeyword(part):
            expr += f".{part}"
        else:
            expr = f"getattr({expr}, {part!r})"
    return expr


def _name_score(name: str, path: str) -> int:
    last = path.split(".")[-1].lower()
    key = name.lower()
    if last == key:
        return 3
    tokens = set(re.split(r"[_\W]+", last)) & set(re.split(r"[_\W]+", key))
    if tokens - {""}:
        return 2
    if key in path.lower() or last in key:
        return 1
    return 0


def _scope(path: str, module: str | None) -> int:
    """2: an attribute of the module that dispatched the op; 1: of one of its submodules; 0: elsewhere."""
    if module is None:
        return 1
    parent = path.rpartition(".")[0]
    if parent == module:
        return 2
    return 1 if not module or path.startswith(module + ".") else 0


def bind_scalar(
    name: str,
    values: Sequence[Any],
    cases: Sequence[CaseGraph],
    input_names: Sequence[str],
    module: str | None = None,
) -> ScalarBinding | None:
    """Where the scalar ``name`` (traced as ``values``, one per case) comes from; None if nowhere.

    ``module`` is the submodule whose forward dispatched the op: only its attributes (and its
    submodules') are candidates, so a pool's literal stride 2 never binds to a convolution's.
    """
    first = _plain(values[0])
    constant = all(same(v, first) for v in values)
    for index, arg in enumerate(input_names):  # a Python number passed to forward (get_inputs() -> [x, 3.5])
        if all(index in c.scalar_inputs and same(c.scalar_inputs[index], v) for c, v in zip(cases, values)):
            return ScalarBinding(name, "input", arg, first)

    def fits(attr: Any, value: Any) -> bool:  # an int attribute read as (k, k): kernel_size=3 -> [3, 3]
        value = _plain(value)
        uniform = isinstance(value, tuple) and bool(value) and len(set(value)) == 1
        return same(attr, value) or (uniform and not isinstance(attr, (list, tuple)) and same(attr, value[0]))

    candidates = [
        path
        for path in cases[0].attrs
        if _scope(path, module) > 0 and all(path in c.attrs and fits(c.attrs[path], v) for c, v in zip(cases, values))
    ]
    if candidates:
        best = max(candidates, key=lambda p: (_scope(p, module), _name_score(name, p), -p.count("."), -len(p)))
        score, scope = _name_score(name, best), _scope(best, module)
        own = [p for p in candidates if _scope(p, module) == 2]
        # An attribute that changes with the value from case to case is where it comes from; one that merely has
        # the same constant value is trusted only if it belongs to the module that computed the op, and its name
        # says so (conv.stride for a stride) or it is that module's only such attribute (`x * self.multiplier`).
        if not constant or (scope == 2 and (score > 0 or len(own) == 1)):
            expr = attribute_expr(best)
            if isinstance(first, tuple) and not isinstance(cases[0].attrs[best], (list, tuple)):
                expr = f"({expr},) * {len(first)}"
            return ScalarBinding(name, "attr", expr, first)
    if constant:
        return ScalarBinding(name, "literal", repr(first), first)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        for i, arg in enumerate(input_names):
            shapes = [[v.shape for v in c.values.values() if v.kind == "input" and v.index == i] for c in cases]
            if not all(shapes):
                continue
            rank = len(shapes[0][0])
            for d in range(-1, -rank - 1, -1):
                for form, expr in (
                    (lambda s: s, f"{arg}.shape[{d}]"),
                    (math.sqrt, f"math.sqrt({arg}.shape[{d}])"),
                    (lambda s: 1 / math.sqrt(s), f"1.0 / math.sqrt({arg}.shape[{d}])"),
                ):
                    if all(len(s[0]) == rank and same(form(s[0][d]), v) for s, v in zip(shapes, values)):
                        return ScalarBinding(name, "shape", expr, first)
    return None


def tensor_binding(role: str, value_id: str, case: CaseGraph, input_names: Sequence[str]) -> TensorBinding | None:
    value = case.values.get(value_id)
    if value is None:
        return TensorBinding(role, "stage", value_id, f"_{value_id}", ())
    if value.kind == "input":
        index = value.index or 0
        return TensorBinding(role, "input", input_names[index], input_names[index], value.shape)
    if value.kind in ("param", "buffer"):
        expr = attribute_expr(value.name or "")
        return TensorBinding(role, value.kind, value.name or "", f"{expr}.detach()", value.shape)
    if value.kind == "attr":
        return TensorBinding(role, "attr", value.name or "", attribute_expr(value.name or ""), value.shape)
    if value.kind == "op":
        return TensorBinding(role, "stage", value_id, f"_{value_id}", value.shape)
    return None  # a tensor the trace cannot place (made outside the model and its inputs)


def input_names(case: CaseGraph) -> list[str]:
    """Forward parameter names for the inputs (``x0``... where the signature does not say)."""
    names = [n for n in case.forward_args if n.isidentifier() and not keyword.iskeyword(n) and n != "self"]
    count = max([v.index or 0 for v in case.values.values() if v.kind == "input"] + [*case.scalar_inputs, -1])
    count = max(count + 1, len(case.inputs))
    out = []
    for i in range(count):
        name = names[i] if i < len(names) else f"x{i}"
        if name in out or name in ("torch", "nn", "math", "_KERNELS"):
            name = f"x{i}"
        out.append(name)
    return out
