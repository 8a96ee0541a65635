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
import time
from collections.abc import Sequence
from typing import IO, Any

from kope.db.client import GraphClient, Tx
from kope.memory.graph import ExperienceGraph
from kope.memory.ids import check_local_id, uid
from kope.memory.ranking import DEFAULT_WEIGHTS, RankingWeights
from kope.memory.recorder import RecordResult, RunResult, finish_run_tx, write_attempts, write_runs
from kope.memory.records import RunRecord
from kope.memory.schema import SchemaReport, apply_schema
from kope.memory.specs import Attempt, RunSpec
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

    def export(self, ns: str) -> str:
        buffer = io.StringIO()
        self.graph(ns).export_to(buffer)
        return buffer.getvalue()

    def import_(self, ns: str, who: Identity, stream: IO[str], *, distill: bool) -> Any:
        return self.graph(ns, who.team).import_from(stream, f"upload by team {who.team}", distill=distill)
