"""Prune a namespace by run or by age, never leaving a dangling edge or a cut lineage.

A selection of runs is removed with its decisions and outcomes (DETACH DELETE,
so USED edges from surviving decisions into them go too; the report counts
them). Pruning is refused when a run outside the selection has decisions that
started from decisions inside it (its lineage would lose its ancestors); the
error names those runs so they can be added. Surviving decisions that lose
children get their d(v) recomputed, orphaned kernels, tasks, operators and
hardware are deleted, and the namespace's insights are distilled again.

Do not prune a namespace while processes are recording into it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kope.db.client import GraphClient, Tx
from kope.errors import UsageError
from kope.memory.errors import PruneRefusedError, UnknownRunError
from kope.memory.ids import uid
from kope.memory.insights import distill
from kope.memory.recorder import recompute_scores

BATCH = 5000


@dataclass
class PruneReport:
    runs: list[str] = field(default_factory=list)
    decisions: int = 0
    foreign_used_edges: int = 0  # USED edges from surviving decisions into pruned ones
    rescored: int = 0
    orphans: dict[str, int] = field(default_factory=dict)
    deleted_nodes: int = 0  # prune --all
    dry_run: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def select_runs(
    client: GraphClient, ns: str, run_ids: Sequence[str] = (), older_than_days: float | None = None
) -> list[str]:
    selected: set[str] = set()
    if run_ids:
        present = {row["uid"] for row in client.execute("memory/run/present", uids=[uid(ns, r) for r in run_ids])}
        unknown = [r for r in run_ids if uid(ns, r) not in present]
        if unknown:
            raise UnknownRunError(f"no run {', '.join(sorted(unknown))} in namespace {ns!r}")
        selected.update(run_ids)
    if older_than_days is not None:
        if older_than_days < 0:
            raise UsageError("--older-than must be a non-negative number of days")
        before = time.time() - older_than_days * 86400.0
        selected.update(row["id"] for row in client.execute("memory/prune/old_runs", ns=ns, before=before))
    return sorted(selected)


def prune_runs(client: GraphClient, ns: str, run_ids: Sequence[str], *, dry_run: bool = False) -> PruneReport:
    report = PruneReport(runs=list(run_ids), dry_run=dry_run)
    if not run_ids:
        return report
    run_ids = list(run_ids)
    dependents = [row["run_id"] for row in client.execute("memory/prune/dependents", ns=ns, run_ids=run_ids)]
    if dependents:
        raise PruneRefusedError(
            f"runs {', '.join(dependents)} started from decisions of the selected runs; pruning would cut their lineage",
            hint="add them to the selection (--run ...) or prune fewer runs",
        )
    plan = client.execute("memory/prune/plan", ns=ns, run_ids=run_ids)[0]
    report.decisions = plan["decisions"]
    report.foreign_used_edges = plan["foreign_used"]
    if dry_run:
        return report

    def work(tx: Tx) -> int:
        tx.run("memory/prune/delete_runs", ns=ns, run_ids=run_ids)
        survivors = sorted(plan["surviving_parents"])
        rescored = 0
        if survivors:
            chain = [row["uid"] for row in tx.run("memory/attempt/lock_chains", parent_uids=survivors)]
            rescored = len(recompute_scores(tx, chain))
        return rescored

    report.rescored = client.write(work)
    distill(client, ns)  # insights lose the pruned evidence first; then what nothing refers to goes
    report.orphans = client.write(lambda tx: tx.run("memory/prune/orphans", ns=ns)[0])
    return report


def prune_namespace(client: GraphClient, ns: str) -> PruneReport:
    """Delete everything in the namespace (in batches)."""
    report = PruneReport()
    while True:
        deleted = client.write(lambda tx: tx.run("memory/prune/namespace_batch", ns=ns, limit=BATCH))[0]["deleted"]
        report.deleted_nodes += deleted
        if deleted == 0:
            return report
