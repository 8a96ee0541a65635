"""The memory operations of the server, each confined to one namespace the ACL allowed.

Writes use the memory's own write path (``kope.memory.recorder``: MERGE on namespaced ids,
a, r, label, d(v), incumbents computed here, on the server, never taken from a client), in
one transaction together with the provenance stamp (``cypher/server/stamp_*``): the team
and key id of the authenticated key, the harness version the client reports, the server's
clock. Reads go through ``ExperienceGraph`` of that namespace (no journal: the client keeps
the journal). Every statement run here is scoped by the namespace: by ``$ns`` or by the
namespaced uid the server builds from validated local ids.
"""

from __future__ import annotations

import functools
import io
import math
import secrets
import time
from collections.abc import Sequence
from typing import IO, Any

from kope.db.client import GraphClient, Tx
from kope.memory import present, scoring, transfer
from kope.memory.deployed import write_deployed
from kope.memory.errors import ExportFormatError
from kope.memory.graph import ExperienceGraph
from kope.memory.ids import check_local_id, kernel_id, uid
from kope.memory.ranking import DEFAULT_WEIGHTS, RankingWeights
from kope.memory.recorder import (
    RecordResult,
    RunResult,
    _relink_next,
    finish_run_tx,
    recompute_scores,
    write_attempts,
    write_runs,
)
from kope.memory.records import RunRecord
from kope.memory.schema import SchemaReport, apply_schema
from kope.memory.specs import Attempt, DeployedFigures, RunSpec
from kope.server.auth import Identity


class MemoryStore:
    def __init__(self, client: GraphClient, weights: RankingWeights = DEFAULT_WEIGHTS) -> None:
        self.client = client
        self.weights = weights
        self.schema: SchemaReport | None = None

    def init_schema(self) -> SchemaReport:
        self.schema = apply_schema(self.client)
        return self.schema

    def graph(self, ns: str, team: str = "server") -> ExperienceGraph:
        """The namespace's graph (no journal; schema applied at server start)."""
        return ExperienceGraph(
            self.client, namespace=ns, team=team, journal=None, weights=self.weights, schema_ready=True
        )

    def holds_data(self, ns: str) -> bool:
        """Whether the graph holds any node under the name ``ns`` (written by anyone, e.g. over Bolt)."""
        return bool(self.client.execute("server/holds_data", prefix=f"{ns}/")[0]["held"])

    # -- writes -------------------------------------------------------------------------------
    def start_runs(
        self, ns: str, who: Identity, specs: Sequence[RunSpec], harness_version: str | None
    ) -> list[RunResult]:
        def work(tx: Tx) -> list[RunResult]:
            results = write_runs(tx, ns, who.team, list(specs))
            created = [uid(ns, r.run_id) for r in results if r.created]
            if created:
                tx.run("server/stamp_runs", **self._stamp(ns, who, created, harness_version))
            return results

        return self.client.write(work)

    def record_attempts(
        self,
        ns: str,
        who: Identity,
        attempts: Sequence[Attempt],
        harness_version: str | None,
        *,
        relink: bool = False,
    ) -> list[RecordResult]:
        """Write attempts; ``relink``: restore the relationships of those recorded before with the same content
        (an attempt's relationships are part of its content, checked by hash: nothing new is taken)."""

        def work(tx: Tx) -> list[RecordResult]:
            results = write_attempts(tx, ns, list(attempts), relink=relink)
            created = [uid(ns, r.decision_id) for r in results if r.created]
            if created:
                tx.run("server/stamp_decisions", **self._stamp(ns, who, created, harness_version))
            return results

        return self.client.write(work)

    @staticmethod
    def _stamp(ns: str, who: Identity, uids: list[str], harness_version: str | None) -> dict[str, Any]:
        return {
            "uids": uids,
            "ns": ns,
            "team": who.team,
            "key_id": who.key_id,
            "harness_version": harness_version,
            "now": time.time(),
        }

    def finish_run(
        self, ns: str, run_id: str, status: str, ended_at: float, *, distill: bool
    ) -> tuple[RunRecord, str | None]:
        """End the run (idempotent); distil its family's insights; the run and its family."""
        check_local_id(run_id, "run id")
        graph = self.graph(ns)
        family = self.client.write(
            functools.partial(finish_run_tx, ns=ns, run_id=run_id, status=status, ended_at=ended_at)
        )
        if distill and family:
            graph.distill(family)
        return graph.run(run_id), family

    def record_deployed(self, ns: str, figures: DeployedFigures) -> str:
        """The as-deployed figures of a run's best kernel onto its decision's outcome (idempotent)."""
        return self.client.write(functools.partial(write_deployed, ns=ns, figures=figures))

    def export(self, ns: str) -> str:
        buffer = io.StringIO()
        self.graph(ns).export_to(buffer)
        return buffer.getvalue()

    def import_(self, ns: str, who: Identity, stream: IO[str], *, distill: bool) -> Any:
        """Merge an export into ``ns`` without taking any fact from the file a client cannot be trusted with
        (``import_export``); then distil the namespace's insights again."""
        report = import_export(self.client, ns, who, stream, f"upload by team {who.team}")
        if distill:
            self.graph(ns, who.team).distill()
        return report


# What a server import never takes from the file: provenance (stamped from the key, as on every write) and what
# the server derives from the outcomes (a, r, label, confidence, d(v); the runs' totals and incumbents).
PROVENANCE = frozenset({"team", "key_id", "recorded_at", "harness_version"})
DECISION_DERIVED = frozenset({"a", "r", "label", "conf", "d"})
RUN_DERIVED = frozenset({"steps", "last_step", "prompt_tokens", "completion_tokens", "best_speedup", "incumbent_id"})
OUTCOME_DERIVED = frozenset({"speedup_usable"})  # the decision's a, as the write path copies it
DERIVED_RELS = frozenset({"INCUMBENT", "NEXT"})  # derived again from the decisions, never taken from a file


def import_export(client: GraphClient, ns: str, who: Identity, stream: IO[str], source: str) -> Any:
    """The server's import: the file adds what ``ns`` lacks and changes nothing it holds.

    The whole file is validated first (a bad one is ``ExportFormatError``, 422, and writes nothing). A node is
    created only when its uid is new: an attempt, run or kernel that exists keeps every property (attempts are
    immutable, as when they are recorded), and relationships are written only from nodes this import created.
    New decisions and runs get the importing key's team and key id and the server's time; a, r, label and
    confidence of new decisions are computed from their outcomes and parents as the write path does; d(v), run
    totals, incumbents and NEXT chains are derived again afterwards."""
    nodes, rels = transfer.parse_export(stream, source)
    by_key = {(obj["node"], obj["id"]): obj for obj in nodes}
    outcome_of: dict[str, dict[str, Any]] = {}
    parent_of: dict[str, str] = {}
    run_of: dict[str, str] = {}
    for rel in rels:
        frm, to = rel["from"][1], rel["to"][1]
        if rel["rel"] == "PRODUCED":
            outcome_of[frm] = by_key[("Outcome", to)]["props"]
        elif rel["rel"] == "FROM":
            if parent_of.setdefault(frm, to) != to:
                raise ExportFormatError(f"{source}: decision {frm!r} has two parents")
        elif rel["rel"] == "IN_RUN":
            run_of[frm] = to
    decisions = {obj["id"]: obj["props"] for obj in nodes if obj["node"] == "Decision"}
    for obj in nodes:
        if obj["node"] == "Kernel" and kernel_id(obj["props"]["source"]) != obj["id"]:
            raise ExportFormatError(f"{source}: kernel {obj['id']!r} is not the hash of its source")
    for did, props in decisions.items():
        if props.get("parent_id") != parent_of.get(did):
            raise ExportFormatError(f"{source}: decision {did!r}: its parent_id and its FROM relationship disagree")

    def existing_decisions(tx: Tx) -> list[dict[str, Any]]:
        return tx.run("memory/attempt/existing", uids=[uid(ns, d) for d in decisions])

    existing = {row["uid"] for row in client.write(existing_decisions)}
    new = [d for d in decisions if uid(ns, d) not in existing]
    old_parents = sorted({uid(ns, parent_of[d]) for d in new if d in parent_of and uid(ns, parent_of[d]) in existing})

    def parents(tx: Tx) -> list[dict[str, Any]]:
        return tx.run("memory/attempt/parents", parent_uids=old_parents) if old_parents else []

    graph_a = {row["uid"]: row["a"] for row in client.write(parents)}
    scores = _score_new(ns, new, decisions, outcome_of, parent_of, graph_a, source)
    now = time.time()
    stamp = {"team": who.team, "key_id": who.key_id, "recorded_at": now}
    rows = []
    for obj in nodes:
        props = {k: v for k, v in obj["props"].items() if k not in PROVENANCE}
        if obj["node"] == "Decision":
            props = {k: v for k, v in props.items() if k not in DECISION_DERIVED} | scores.get(obj["id"], {}) | stamp
        elif obj["node"] == "Run":
            props = {k: v for k, v in props.items() if k not in RUN_DERIVED} | stamp
        elif obj["node"] == "Outcome":
            usable = scores.get(obj["id"], {}).get("a")
            props = {k: v for k, v in props.items() if k not in OUTCOME_DERIVED}
            props |= {"speedup_usable": usable} if usable is not None else {}
        props |= {"ns": ns, "id": obj["id"], "uid": uid(ns, obj["id"])}
        rows.append({"label": obj["node"], "uid": props["uid"], "props": props})
    report = transfer.TransferReport(ns)
    created: set[tuple[str, str]] = set()
    nonce = secrets.token_hex(8)
    for start in range(0, len(rows), transfer.BATCH):
        batch = rows[start : start + transfer.BATCH]

        def create(tx: Tx, batch: list[dict[str, Any]] = batch) -> list[dict[str, Any]]:
            return tx.run("memory/transfer/import_new_nodes", rows=batch, nonce=nonce)

        for label, node_uid in client.write(create)[0]["created"]:
            created.add((label, node_uid))
            report.nodes[label] = report.nodes.get(label, 0) + 1
    rel_rows = []
    for rel in rels:
        if rel["rel"] in DERIVED_RELS or (rel["from"][0], uid(ns, rel["from"][1])) not in created:
            continue
        key = f"{rel['rel']}:{rel['from'][0]}:{rel['to'][0]}"
        frm, to = uid(ns, rel["from"][1]), uid(ns, rel["to"][1])
        rel_rows.append({"key": key, "from": frm, "to": to, "props": rel.get("props", {})})
        report.relationships[rel["rel"]] = report.relationships.get(rel["rel"], 0) + 1
    for start in range(0, len(rel_rows), transfer.BATCH):
        batch = rel_rows[start : start + transfer.BATCH]

        def link(tx: Tx, batch: list[dict[str, Any]] = batch) -> int:
            return int(tx.run("memory/transfer/import_rels", rows=batch)[0]["linked"])

        if client.write(link) != len(batch):
            raise ExportFormatError(f"{source}: some relationships could not be linked")
    made = sorted(node_uid for label, node_uid in created if label == "Decision")
    runs = {run_of[d] for d in new if d in run_of} | {u.split("/", 1)[1] for lbl, u in created if lbl == "Run"}

    def derive(tx: Tx) -> None:
        if made:
            tx.run("server/import_decisions", ns=ns, uids=made)
            chain = [row["uid"] for row in tx.run("memory/attempt/lock_chains", parent_uids=made)]
            recompute_scores(tx, chain)
        if runs:
            _relink_next(tx, ns, sorted(runs))
            tx.run("memory/attempt/refresh_runs", run_uids=sorted(uid(ns, r) for r in runs))

    client.write(derive)
    present.refresh_namespace(client, ns)
    return report


def _score_new(
    ns: str,
    new: list[str],
    decisions: dict[str, dict[str, Any]],
    outcome_of: dict[str, dict[str, Any]],
    parent_of: dict[str, str],
    graph_a: dict[str, Any],
    source: str,
) -> dict[str, dict[str, Any]]:
    """a, r, label, confidence and a first d(v) of each new decision, from its outcome and its parent's a
    (``kope.memory.scoring``, as ``write_attempts`` computes them), parents first."""
    wanted = set(new)
    scores: dict[str, dict[str, Any]] = {}
    for start in new:
        stack, visiting = [start], set()
        while stack:
            did = stack[-1]
            if did in scores:
                stack.pop()
                continue
            parent = parent_of.get(did)
            if parent in wanted and parent not in scores:
                if parent in visiting:
                    raise ExportFormatError(f"{source}: the FROM relationships of decision {did!r} form a cycle")
                visiting.add(did)
                stack.append(parent)
                continue
            stack.pop()
            props, outcome = decisions[did], outcome_of.get(did, {})
            correct = props["status"] == "correct"
            a: float | None = 0.0
            if correct:
                raw, valid = outcome.get("speedup"), outcome.get("timings_valid", True)
                speed = float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
                if speed is not None and not (math.isfinite(speed) and speed >= 0):
                    raise ExportFormatError(f"{source}: decision {did!r}: its outcome's speedup is not a speed")
                a = speed if valid is not False else None
            if parent is None:
                a_parent = None
            elif parent in wanted:
                a_parent = scores[parent].get("a")
            else:
                a_parent = graph_a.get(uid(ns, parent))
            r = scoring.step_ratio(a, correct, a_parent, parent is not None)
            claimed = props.get("conf")
            if not correct:
                conf = 1.0
            elif a is None:
                conf = scoring.UNKNOWN_SPEED_CONFIDENCE
            elif isinstance(claimed, int | float) and math.isfinite(claimed):
                conf = min(max(float(claimed), 0.0), 1.0)  # timing noise is not exported: the file's, at most 1
            else:
                conf = 1.0
            row: dict[str, Any] = {"r": r, "label": scoring.label_for(r, correct), "conf": conf}
            row["d"] = scoring.downstream(r, [])
            if a is not None:
                row["a"] = a
            scores[did] = row
    return scores
