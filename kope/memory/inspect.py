"""Read-only views for people: stats, one run, one lineage tree (``kope memory ...``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kope.db.client import GraphClient
from kope.memory.errors import UnknownDecisionError
from kope.memory.ids import uid
from kope.memory.journal import Journal

LABEL_ORDER = ("Operator", "Hardware", "Task", "Run", "Decision", "Outcome", "Kernel", "Insight", "Knowledge")


@dataclass(frozen=True)
class MemoryStats:
    namespace: str
    nodes: dict[str, int]
    relationships: dict[str, int]
    decisions: list[dict[str, Any]]  # status, label, n
    operators: list[dict[str, Any]]  # operator, family, runs, attempts, correct, best_speedup
    teams: list[dict[str, Any]]
    journal_entries: int | None  # lines in the write-ahead log (None: no journal)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def stats(client: GraphClient, ns: str, journal: Journal | None) -> MemoryStats:
    counts = {row["label"]: row["n"] for row in client.execute("memory/inspect/label_counts", ns=ns)}
    entries = None
    if journal is not None:
        entries = 0
        for path in journal.wal_files():
            with open(path, "rb") as handle:
                entries += sum(1 for line in handle if line.strip())
    return MemoryStats(
        namespace=ns,
        nodes={label: counts.get(label, 0) for label in LABEL_ORDER},
        relationships={row["type"]: row["n"] for row in client.execute("memory/inspect/rel_counts", ns=ns)},
        decisions=client.execute("memory/inspect/decision_breakdown", ns=ns),
        operators=client.execute("memory/inspect/operators", ns=ns),
        teams=client.execute("memory/inspect/teams", ns=ns),
        journal_entries=entries,
    )


def run_evidence(client: GraphClient, ns: str, run_id: str) -> dict[str, dict[str, int]]:
    rows = client.execute("memory/inspect/run_evidence", ns=ns, run_id=run_id)
    return {row["id"]: {"used": row["used"], "used_tokens": row["used_tokens"]} for row in rows}


@dataclass(frozen=True)
class UsedInsight:
    """An insight a decision's prompt used, with the hardware class it was learned on."""

    id: str
    kind: str  # rule | pattern | effect
    hw_class: str | None = None


def insights_used(client: GraphClient, ns: str, run_id: str) -> dict[str, list[UsedInsight]]:
    """Per decision of the run: the insights its prompt used (what a bench's transfer comparison reads)."""
    rows = client.execute("memory/bench/insights_used", ns=ns, run_id=run_id)
    return {
        row["id"]: [UsedInsight(str(i["id"]), str(i["kind"]), i.get("hw_class")) for i in row["insights"]]
        for row in rows
    }


@dataclass
class TreeNode:
    id: str
    data: dict[str, Any]
    children: list[TreeNode] = field(default_factory=list)
    on_path: bool = False


@dataclass(frozen=True)
class LineageTree:
    root: TreeNode
    focus: str
    total: int  # members of the whole tree
    shown: int


def lineage_tree(client: GraphClient, ns: str, decision_id: str, limit: int = 200) -> LineageTree:
    rows = client.execute("memory/inspect/lineage_tree", uid=uid(ns, decision_id), limit=limit)
    if not rows:
        raise UnknownDecisionError(f"no decision {decision_id!r} in namespace {ns!r}")
    row = rows[0]
    path = set(row["path"])
    nodes = {m["id"]: TreeNode(m["id"], m, on_path=m["id"] in path) for m in row["members"]}
    for node in sorted(nodes.values(), key=lambda n: (n.data["run_id"], n.data["step"])):
        parent = node.data["parent_id"]
        if parent in nodes and node.id != row["root"]:
            nodes[parent].children.append(node)
    return LineageTree(nodes[row["root"]], decision_id, row["total"], len(nodes))
