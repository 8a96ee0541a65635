"""The lineages of a namespace as typed data: what the lineage page draws.

``load_lineages(client, ns)`` reads every decision (with its outcome, class,
incumbent and backtrack marks), run and piece of evidence of a namespace (or
of one operator) and groups them per operator: a forest of FROM trees (the
children of a node are the branches tried from its state) and the runs in
start order. Nothing here knows about HTML (``kope.memory.lineage_page``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kope.db.client import GraphClient
from kope.memory.present import CLASS_LABELS
from kope.memory.records import GraphRecord


@dataclass(frozen=True)
class EvidenceItem(GraphRecord):
    tier: str
    rank: int
    tokens: int
    kind: str
    id: str
    what: str | None = None


@dataclass(frozen=True)
class LineageNode(GraphRecord):
    id: str
    run_id: str
    operator: str
    family: str
    step: int
    parent_id: str | None
    title: str
    status: str
    a: float | None
    r: float
    d: float
    layer: str = "other"
    caption: str | None = None
    thought: str | None = None
    diff: str | None = None
    error_kind: str | None = None
    error_excerpt: str | None = None
    cls: str | None = None  # outcome class (None: the graph has no class labels yet)
    incumbent: bool = False
    backtrack: bool = False
    cases_json: str | None = None
    cases_passed: int | None = None
    cases_total: int | None = None
    replayed: bool = False  # the outcome came from a recorded space (--evaluator replay:DIR), not a measurement
    # a run's best kernel timed again as deployed after the run (kope.memory.deployed); None: not measured so
    deployed_speedup: float | None = None
    deployed_error: str | None = None
    deployed_at: float | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> LineageNode:
        label = row.get("class")
        return cls.from_record({**row, "cls": label.lower() if label else None})

    @property
    def cases(self) -> list[dict[str, Any]]:
        return json.loads(self.cases_json) if self.cases_json else []


@dataclass(frozen=True)
class RunInfo(GraphRecord):
    id: str
    operator: str
    family: str
    team: str
    proposer: str
    started_at: float
    steps: int
    caption: str | None = None
    policy: str | None = None
    memory: bool | None = None
    incumbent_id: str | None = None
    best_speedup: float | None = None
    status: str | None = None


@dataclass
class OperatorLineages:
    operator: str
    family: str
    nodes: dict[str, LineageNode] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)  # parent id -> child ids, step order
    roots: list[str] = field(default_factory=list)  # no parent in this operator's decisions
    runs: list[RunInfo] = field(default_factory=list)
    evidence: dict[str, list[EvidenceItem]] = field(default_factory=dict)

    @property
    def best(self) -> LineageNode | None:
        correct = [n for n in self.nodes.values() if n.status == "correct"]
        return min(correct, key=lambda n: (-(n.a if n.a is not None else -1.0), n.step, n.id)) if correct else None

    def run_steps(self, run_id: str) -> list[LineageNode]:
        return sorted((n for n in self.nodes.values() if n.run_id == run_id), key=lambda n: n.step)


def load_lineages(client: GraphClient, ns: str, operator: str | None = None) -> list[OperatorLineages]:
    classes = list(CLASS_LABELS.values())
    rows = client.execute("memory/report/decisions", ns=ns, operator=operator, classes=classes)
    ops: dict[str, OperatorLineages] = {}
    for row in rows:
        node = LineageNode.from_row(row)
        group = ops.setdefault(node.operator, OperatorLineages(node.operator, node.family))
        group.nodes[node.id] = node
    for group in ops.values():
        for node in sorted(group.nodes.values(), key=lambda n: (n.run_id, n.step)):
            if node.parent_id in group.nodes:
                group.children.setdefault(node.parent_id, []).append(node.id)
            else:
                group.roots.append(node.id)
    for row in client.execute("memory/report/runs", ns=ns, operator=operator):
        run = RunInfo.from_record(row)
        if run.operator in ops:
            ops[run.operator].runs.append(run)
    owner = {node_id: group for group in ops.values() for node_id in group.nodes}
    for row in client.execute("memory/report/evidence", ns=ns, operator=operator):
        cited_by = owner.get(row["decision"])
        if cited_by is not None:
            cited_by.evidence.setdefault(row["decision"], []).append(EvidenceItem.from_record(row))
    return [ops[name] for name in sorted(ops)]
