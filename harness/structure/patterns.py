"""What a template declares: the structures it computes, and the function a matched task calls.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.structure.lifted import Lifted, Node, Operand

COMMUTATIVE = ("binary:add", "binary:mul", "binary:max", "binary:min")


@dataclass(frozen=True)
class Step:
    signature: str  # "kind:fn", or just "kind" (any fn)
    operands: tuple[str, ...]
    static: dict[str, str] = field(default_factory=dict)  # binding name -> node attribute
    scalars: dict[str, str] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)  # read by ``where`` in each case; may change between cases
    fn: str | None = None  # binding name for the node's fn (when the signature leaves it open)


@dataclass(frozen=True)
class Call:
    """The function an adapted forward calls: ``def _call(<params>): <body>`` returning the result."""

    params: tuple[str, ...]
    body: str
    imports: tuple[str, ...] = ()  # extra modules the body uses (e.g. "math")


@dataclass
class Found:
    """A pattern bound at one anchor node of one case."""

    pattern: Pattern
    nodes: tuple[str, ...]  # covered node ids, in step order (the anchor last)
    tensors: dict[str, Operand | None]  # role -> operand
    static: dict[str, Any]
    scalars: dict[str, Any]
    shapes: dict[str, tuple[int, ...]]  # role -> traced shape; "out" -> the result's
    dtype: str  # of the first tensor role (what the kernels read)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def output(self) -> str:
        return self.nodes[-1]

    def get(self, name: str, default: Any = None) -> Any:
        """A bound attribute by name, wherever the pattern put it (static, scalars or info)."""
        for table in (self.static, self.scalars, self.info):
            if name in table:
                return table[name]
        return default


@dataclass(frozen=True)
class Pattern:
    operator: str
    steps: tuple[Step, ...]
    where: Callable[[Found], str | None] | None = None
    call: Callable[[Found], Call] | None = None
    dtypes: tuple[str, ...] = ("float32", "float64", "bfloat16", "float16")
    roles: tuple[str, ...] = ()  # call parameter order (default: roles in order of first use)
    whole: tuple[str, ...] = ()  # instead of steps: the whole lifted graph's node signatures, in order

    @property
    def size(self) -> int:
        return len(self.whole) or len(self.steps)

    def role_order(self) -> list[str]:
        if self.roles:
            return list(self.roles)
        order: list[str] = []
        for step in self.steps:
            for operand in step.operands:
                name = operand.removesuffix("^T")
                if name not in ("-",) and not name.startswith("$") and name not in order:
                    order.append(name)
        return order


def whole_graph(operator: str, *signatures: str) -> Pattern:
    """A pattern for a template's own built-in operator only: the whole lifted graph, node by node (no call)."""
    return Pattern(operator, (), whole=tuple(signatures))


def pattern(operator: str, *steps: Step | Sequence[Any], **kwargs: Any) -> Pattern:
    """``pattern("relu", ("unary:relu", ["x"]))``: steps as Step or (signature, operands[, options])."""
    built = []
    for step in steps:
        if isinstance(step, Step):
            built.append(step)
            continue
        signature, operands, *rest = step
        options = rest[0] if rest else {}
        built.append(Step(signature, tuple(operands), **options))
    return Pattern(operator, tuple(built), **kwargs)


def _sig_ok(step: Step, node: Node) -> bool:
    kind, _, fn = step.signature.partition(":")
    return node.kind == kind and (not fn or node.fn == fn)


def find(p: Pattern, lifted: Lifted, anchor: Node) -> Found | None:
    """Bind ``p`` with its last step at ``anchor`` (None when the structure differs)."""
    if p.whole:
        if anchor is not lifted.nodes[-1] or tuple(n.signature for n in lifted.nodes) != p.whole:
            return None
        shapes = {"out": anchor.shape}
        return Found(p, tuple(n.id for n in lifted.nodes), {}, {}, {}, shapes, lifted.nodes[0].dtype)
    last = len(p.steps) - 1
    assigned: dict[int, Node] = {last: anchor}
    if not _sig_ok(p.steps[last], anchor):
        return None
    roles: dict[str, Operand | None] = {}
    # Resolve steps from the last backwards: "$k" operands name their producers.
    for index in range(last, -1, -1):
        node = assigned.get(index)
        if node is None:
            return None  # a step nothing refers to: the pattern is malformed for this graph
        step = p.steps[index]
        if not _sig_ok(step, node):
            return None
        bindings = _bind_operands(step, node, lifted, assigned, roles)
        if bindings is None:
            return None
        roles = bindings
    covered = [assigned[i].id for i in range(len(p.steps))]
    # interior results must not escape the pattern
    inside = set(covered)
    for node_id in covered[:-1]:
        if lifted.is_output(node_id) or any(u.id not in inside for u in lifted.users(node_id)):
            return None
    static: dict[str, Any] = {}
    scalars: dict[str, Any] = {}
    info: dict[str, Any] = {}
    for i, step in enumerate(p.steps):
        node = assigned[i]
        for name, attr in step.static.items():
            static[name] = node.attrs.get(attr)
        for name, attr in step.scalars.items():
            scalars[name] = node.attrs.get(attr)
        for name, attr in step.info.items():
            info[name] = node.attrs.get(attr)
        if step.fn:
            static[step.fn] = node.fn
    shapes = {role: lifted.value(op.value).shape for role, op in roles.items() if op is not None}
    shapes["out"] = anchor.shape
    first = next((op for op in roles.values() if op is not None), None)
    dtype = lifted.value(first.value).dtype if first is not None else anchor.dtype  # what the kernels read
    return Found(p, tuple(covered), roles, static, scalars, shapes, dtype, info)


def _bind_operands(
    step: Step, node: Node, lifted: Lifted, assigned: dict[int, Node], roles: dict[str, Operand | None]
) -> dict[str, Operand | None] | None:
    orders = [list(node.operands)]
    if step.signature in COMMUTATIVE and len(node.operands) == 2 and node.attrs.get("alpha", 1) == 1:
        orders.append(list(reversed(node.operands)))
    for operands in orders:
        trial = dict(roles)
        trial_assigned: dict[int, Node] = {}
        ok = len(operands) >= len(step.operands) and all(o is None for o in operands[len(step.operands) :])
        for spec, operand in zip(step.operands, operands):
            if not ok:
                break
            if spec == "-":
                ok = operand is None
            elif spec.startswith("$"):
                k = int(spec[1:])
                producer = lifted.node(operand.value) if operand is not None else None
                if (
                    producer is None
                    or operand is None
                    or operand.transposed
                    or not _sig_ok_index(k, producer, assigned, trial_assigned)
                ):
                    ok = False
                else:
                    trial_assigned[k] = producer
            else:
                transposed = spec.endswith("^T")
                name = spec.removesuffix("^T")
                if operand is None or operand.transposed != transposed:
                    ok = False
                elif name in trial:
                    ok = trial[name] == Operand(operand.value, False)
                else:
                    trial[name] = Operand(operand.value, False)
        if ok:
            assigned.update(trial_assigned)
            return trial
    return None


def _sig_ok_index(k: int, producer: Node, assigned: dict[int, Node], trial: dict[int, Node]) -> bool:
    existing = assigned.get(k) or trial.get(k)
    return existing is None or existing.id == producer.id


def check(found: Found) -> str | None:
    """Why the bound pattern cannot be used (dtype, the template's own conditions), or None."""
    p = found.pattern
    if found.dtype not in p.dtypes:
        return f"dtype {found.dtype} (the kernels take {', '.join(p.dtypes)})"
    if p.where is not None:
        return p.where(found)
    return None


# -- helpers for templates' call functions ---------------------------------------------------------
def indent(body: str, spaces: int = 4) -> str:
    return "".join((" " * spaces + line if line.strip() else "") + "\n" for line in body.strip("\n").splitlines())


def last_dim_rows(x: str = "x", dim: str = "dim") -> tuple[str, str]:
    """Code moving dimension ``dim`` of ``x`` last (a copy when needed), and code moving the result back."""
    before = (
        f"{dim} = {dim} % {x}.dim()\n"
        f"_moved = {dim} != {x}.dim() - 1\n"
        f"{x} = ({x}.movedim({dim}, -1) if _moved else {x}).contiguous()\n"
    )
    after = f"y = y.movedim(-1, {dim}).contiguous() if _moved else y\n"
    return before, after
