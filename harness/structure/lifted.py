"""The lifted graph of semantic ops: what ``lift`` builds and ``patterns`` and ``match`` read.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.structure.graph import CaseGraph, Value


@dataclass(frozen=True)
class Operand:
    """A tensor operand of a lifted node: a value, seen with its last two dims swapped when ``transposed``."""

    value: str
    transposed: bool = False


@dataclass
class Node:
    id: str  # the value id of the node's result
    kind: str  # unary | binary | matmul | conv | reduce | softmax | cumsum | layer_norm | batch_norm | group_norm |
    # instance_norm | max_pool | avg_pool | adaptive_avg_pool | sdpa | view | stack | other
    fn: str  # relu, add, sum, ... (kind-specific)
    operands: list[Operand | None]
    attrs: dict[str, Any]
    shape: tuple[int, ...]
    dtype: str
    ops: tuple[int, ...]  # indices of the aten ops it covers

    module: str = ""  # the submodule whose forward dispatched its first op

    def operand(self, i: int) -> Operand | None:
        return self.operands[i] if i < len(self.operands) else None

    @property
    def signature(self) -> str:
        return f"{self.kind}:{self.fn}"


@dataclass
class Lifted:
    graph: CaseGraph
    nodes: list[Node]
    outputs: tuple[str, ...]
    by_id: dict[str, Node] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.by_id = {n.id: n for n in self.nodes}
        for n in self.nodes:
            if n.ops:
                n.module = self.graph.ops[n.ops[0]].module

    def node(self, value_id: str) -> Node | None:
        return self.by_id.get(value_id)

    def value(self, value_id: str) -> Value:
        return self.graph.values[value_id]

    def users(self, value_id: str) -> list[Node]:
        return [n for n in self.nodes if any(o is not None and o.value == value_id for o in n.operands)]

    def is_output(self, value_id: str) -> bool:
        return value_id in self.outputs
