"""``ExperienceGraph``: the memory's one entry point for the loop, the context and the CLI.

Write path (journal first, graph second)::

    graph.start_run(RunSpec(...))            -> RunResult
    graph.record_attempt(Attempt(...))       -> RecordResult  (r, label, d, incumbent)
    graph.record_attempts([...])             -> [RecordResult] (batched: UNWIND)
    graph.finish_run(run_id)                 -> RunRecord (and distils the family's insights)
    graph.record_deployed(DeployedFigures(...)) -> bool (the best kernel as deployed, onto its outcome)

Every write is appended to the write-ahead log (fsync) and the Markdown journal
before the graph transaction. When Neo4j cannot be reached the result says so
(``in_graph=False`` with ``pending_reason``); nothing is lost: this object
writes what it holds back as soon as the graph answers again, and
``kope memory sync`` (``graph.sync()``) replays whatever the graph lacks from
the log, in any later process.

Read path: ``retrieve(query, k)`` (lineages + rules), ``step_state(run_id)``
(what one optimization step reads, in one transaction), ``run_state(run_id)``
(resume from the graph alone), ``kernel_source(decision_id)``, and the
maintenance views used by the CLI. ``ExperienceGraph`` implements
``kope.memory.protocol.Memory``, the interface everything above the memory
uses.

Everything is confined to one namespace (``config.memory.namespace``); runs
carry ``team`` as provenance.
"""

from __future__ import annotations

import functools
import io
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

from kope.db.client import GraphClient, Tx
from kope.errors import UsageError
from kope.memory import insights as insights_mod
from kope.memory import inspect as inspect_mod
from kope.memory import present
from kope.memory import prune as prune_mod
from kope.memory import transfer as transfer_mod
from kope.memory.deployed import write_deployed
from kope.memory.errors import UnknownDecisionError, UnknownRunError
from kope.memory.ids import uid
from kope.memory.journal import Journal
from kope.memory.journaling import JournalFirstStore, JournalWriter, knowledge_data
from kope.memory.lineage import OperatorLineages, load_lineages
from kope.memory.ranking import DEFAULT_WEIGHTS, RankingWeights, with_own_team
from kope.memory.recorder import finish_run_tx, write_attempts, write_runs
from kope.memory.records import DecisionRecord, OutcomeNodeRecord, RunRecord
from kope.memory.retrieval import RetrievalQuery, RetrievalResult, retrieve
from kope.memory.schema import SchemaReport, apply_schema, migrate_namespace
from kope.memory.specs import KnowledgeDoc
from kope.memory.state import RunState, StepState
from kope.memory.sync import PRESENT, GraphSync, SyncReport, sync_journal
from kope.memory.tuning import TuningData, TuningQuery, fetch_tuning
from kope.teamweights import check_team_weights

if TYPE_CHECKING:
    from kope.config import KopeConfig

T = TypeVar("T")
log = logging.getLogger("kope.memory")
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class ExperienceGraph(JournalFirstStore):
    def __init__(
        self,
        client: GraphClient,
        *,
        namespace: str = "default",
        team: str = "local",
        journal: Journal | None = None,
        weights: RankingWeights = DEFAULT_WEIGHTS,
        owns_client: bool = False,
        schema_ready: bool = False,
        team_weights: Mapping[str, float] | None = None,
    ) -> None:
        for value, what in ((namespace, "namespace"), (team, "team")):
            if not _NAMESPACE.match(value):
                raise UsageError(f"{what} must be 1-64 letters, digits, '_', '.', '-' (got {value!r})")
        self.client = client
        self.namespace = namespace
        self.team = team
        self.journal = journal
        self.weights = weights
        self.team_weights = check_team_weights(team_weights or {})  # for a query that brings none
        self._owns_client = owns_client
        self._schema_ready = schema_ready  # True: the caller applied the schema (the memory server, at start)
        self._init_journal_first()

    @classmethod
    def from_config(
        cls,
        config: KopeConfig | None = None,
        *,
        namespace: str | None = None,
        team: str | None = None,
        journal: bool = True,
        client: GraphClient | None = None,
    ) -> ExperienceGraph:
        """The graph of ``config`` (default: ``load_config()``), journaling under ``<data dir>/memory``."""
        from kope.config import load_config

        config = config or load_config()
        ns = namespace or config.memory.namespace
        return cls(
            client or GraphClient.from_config(config),
            namespace=ns,
            team=team or config.memory.team,
            journal=Journal(config.data_dir / "memory", ns) if journal else None,
            owns_client=client is None,
            team_weights=config.memory.team_weights,
        )

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> ExperienceGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def uid(self, local_id: str) -> str:
        return uid(self.namespace, local_id)

    # -- plumbing -------------------------------------------------------------------------------
    def init_schema(self) -> SchemaReport:
        report = apply_schema(self.client)
        self._schema_ready = True
        return report

    def migrate(self) -> dict[str, int]:
        """Bring the namespace's properties up to the current shape (``kope memory migrate``); per migration,
        how many nodes changed. Idempotent."""
        self._ensure_schema()
        return migrate_namespace(self.client, self.namespace)

    def refresh_presentation(self) -> dict[str, int]:
        """Derive the outcome-class labels, captions and datetimes of the whole namespace
        again (``kope memory init``: for graphs recorded before KOPE wrote them)."""
        self._ensure_schema()
        return present.refresh_namespace(self.client, self.namespace)

    def _ensure_schema(self) -> None:
        if not self._schema_ready:
            self.init_schema()

    # -- kope.memory.journaling.JournalFirstStore --------------------------------------------------
    def _prepare(self) -> None:
        self._ensure_schema()

    def _send(self, kind: str, item: Any) -> Any:
        ns = self.namespace
        work: Callable[[Tx], Any]
        if kind == "run":
            work = functools.partial(write_runs, ns=ns, team=self.team, specs=item)
        elif kind == "attempts":
            work = functools.partial(write_attempts, ns=ns, attempts=item)
        elif kind == "deployed":
            work = functools.partial(write_deployed, ns=ns, figures=item)
        else:
            run_id, status, ended_at, _distill = item  # the family is distilled in _ended
            work = functools.partial(finish_run_tx, ns=ns, run_id=run_id, status=status, ended_at=ended_at)
        return self.client.write(work)

    def _offline_hint(self) -> str:
        return f"run `kope memory sync --namespace {self.namespace}` once Neo4j at {self.client.uri} is back"

    def _ended(self, run_id: str, sent: Any, distill: bool) -> RunRecord | None:
        if distill and sent:  # sent: the run's family
            self._ensure_schema()
            insights_mod.distill(self.client, self.namespace, sent)  # journaled with the run's end
        return self.run(run_id)

    # -- runs ------------------------------------------------------------------------------------
    def run(self, run_id: str) -> RunRecord:
        rows = self.client.execute("memory/run/get", uid=self.uid(run_id))
        if not rows:
            raise UnknownRunError(f"no run {run_id!r} in namespace {self.namespace!r}")
        return RunRecord.from_record(rows[0])

    def run_state(self, run_id: str) -> RunState:
        """The run and its decisions from the graph alone (what ``--resume`` reads)."""
        run = self.run(run_id)
        rows = self.client.execute("memory/run/decisions", ns=self.namespace, run_id=run_id)
        state = RunState(run, tuple(DecisionRecord.from_record(r) for r in rows))
        self._remember(state)
        return state

    def step_state(self, run_id: str, *, history_code: bool = False) -> StepState:
        """What one optimization step reads, in one read transaction of two statements: the run with every
        decision and its outcome, then the kernels of the states a step can start from (``start_candidates``;
        every attempt's kernel with ``history_code``)."""

        def work(tx: Tx) -> StepState:
            rows = tx.run("memory/run/state", uid=self.uid(run_id), ns=self.namespace, run_id=run_id)
            if not rows:
                raise UnknownRunError(f"no run {run_id!r} in namespace {self.namespace!r}")
            attempts = rows[0]["attempts"]
            decisions = tuple(DecisionRecord.from_record(a["decision"]) for a in attempts)
            outcomes = {
                a["decision"]["id"]: OutcomeNodeRecord.from_record(a["outcome"])
                for a in attempts
                if a["outcome"] is not None
            }
            partial = RunState(RunRecord.from_record(rows[0]["run"]), decisions)
            wanted = [d.id for d in decisions] if history_code else partial.start_candidates()
            kernels: dict[str, str | None] = {}
            if wanted:
                found = tx.run("memory/kernel/by_decisions", uids=[self.uid(i) for i in wanted])
                kernels = {row["id"]: row["source"] for row in found}
            return StepState(partial.run, decisions, outcomes, kernels, history_code)

        state = self.client.read(work)
        self._remember(state)
        return state

    # -- reading ---------------------------------------------------------------------------------
    def retrieve(self, query: RetrievalQuery, k: int = 8) -> RetrievalResult:
        weights = with_own_team(query.team_weights or self.team_weights, self.team)
        if weights != query.team_weights:
            query = replace(query, team_weights=weights)
        return retrieve(self.client, self.namespace, query, k, self.weights)

    def tuning_records(self, query: TuningQuery) -> TuningData:
        """The cost model's training sample: ranked, bounded attempts of one kernel template."""
        return fetch_tuning(self.client, self.namespace, query)

    def outcome(self, decision_id: str) -> OutcomeNodeRecord:
        """What the target said about a decision (status, error, per-case results)."""
        rows = self.client.execute("memory/outcome/get", uid=self.uid(decision_id))
        if not rows:
            raise UnknownDecisionError(f"no decision {decision_id!r} in namespace {self.namespace!r}")
        return OutcomeNodeRecord.from_record(rows[0])

    def kernel_source(self, decision_id: str) -> str | None:
        rows = self.client.execute("memory/kernel/by_decision", uid=self.uid(decision_id))
        if not rows:
            raise UnknownDecisionError(f"no decision {decision_id!r} in namespace {self.namespace!r}")
        source: str | None = rows[0]["source"]
        return source

    def candidates(self) -> list[dict[str, Any]]:
        """Every decision with its ranking fields (the naive ranking's input)."""
        return self.client.execute("memory/retrieve/candidates", ns=self.namespace)

    # -- insights and knowledge ------------------------------------------------------------------
    def distill(self, family: str | None = None) -> insights_mod.DistillReport:
        """Distil the insights of one family (None: every family); journaled, so a replay distils here too."""
        if self.journal is not None:
            JournalWriter(self.journal).distill(family)
        self._ensure_schema()
        return insights_mod.distill(self.client, self.namespace, family)

    def upsert_knowledge(self, docs: Iterable[KnowledgeDoc | dict[str, Any]]) -> int:
        """Knowledge documents as nodes (journaled first, each version once, so a replay can restore USED edges)."""
        parsed = [KnowledgeDoc.parse(doc) for doc in docs]
        if not parsed:
            return 0
        if self.journal is not None:
            JournalWriter(self.journal).knowledge(parsed)
        rows = [{**knowledge_data(doc), "uid": self.uid(doc.id), "ns": self.namespace} for doc in parsed]
        self._ensure_schema()
        written: int = self.client.write(lambda tx: tx.run("memory/knowledge/upsert", rows=rows))[0]["written"]
        return written

    # -- maintenance -----------------------------------------------------------------------------
    def sync(self, operator: str | None = None, *, dry_run: bool = False) -> SyncReport:
        if self.journal is None:
            raise UsageError("this ExperienceGraph has no journal to sync from")
        target = GraphSync(self.client, self.namespace, self._ensure_schema)
        return sync_journal(target, self.journal, operator=operator, dry_run=dry_run)

    def verify(self) -> None:
        """Fail with a typed error unless the graph answers (``DatabaseUnavailableError`` when it does not)."""
        self.client.verify()

    def present(self, kind: str, uids: Sequence[str]) -> list[dict[str, Any]]:
        """Which of these runs (``kind="run"``: uid, status, ended_at), attempts (``"attempt"``: uid), knowledge
        documents (``"knowledge"``: uid) or insights (``"insight"``: uid) the graph holds, or the relationships of
        these decisions (``"edges"``): what ``sync`` asks before it replays."""
        if kind not in PRESENT:
            raise UsageError(f"present: kind must be one of {', '.join(PRESENT)} (got {kind!r})")
        return GraphSync(self.client, self.namespace).present(kind, uids)

    def journal_dir(self) -> Path | None:
        return self.journal.root if self.journal else None

    def stats(self) -> inspect_mod.MemoryStats:
        return inspect_mod.stats(self.client, self.namespace, self.journal)

    def run_evidence(self, run_id: str) -> dict[str, dict[str, int]]:
        return inspect_mod.run_evidence(self.client, self.namespace, run_id)

    def insights_used(self, run_id: str) -> dict[str, list[inspect_mod.UsedInsight]]:
        return inspect_mod.insights_used(self.client, self.namespace, run_id)

    def lineage(self, decision_id: str, limit: int = 200) -> inspect_mod.LineageTree:
        return inspect_mod.lineage_tree(self.client, self.namespace, decision_id, limit)

    def lineages(self, operator: str | None = None) -> list[OperatorLineages]:
        """Every decision, run and piece of evidence of the namespace (or one operator), per operator."""
        return load_lineages(self.client, self.namespace, operator)

    def export_to(self, out: IO[str]) -> transfer_mod.TransferReport:
        return transfer_mod.export_namespace(self.client, self.namespace, out)

    def import_from(
        self, stream: IO[str], source: str = "<input>", *, distill: bool = True
    ) -> transfer_mod.TransferReport:
        """Import an export into this namespace (journaled first, with the file: a replay imports it again)."""
        text = transfer_mod.read_export(stream, source)
        if self.journal is not None:
            JournalWriter(self.journal).import_(text, source, distill=distill)
        self._ensure_schema()
        report = transfer_mod.import_namespace(self.client, self.namespace, io.StringIO(text), source)
        if distill:  # journaled with the import
            insights_mod.distill(self.client, self.namespace, None)
        return report

    def prune(
        self,
        run_ids: Sequence[str] = (),
        *,
        older_than_days: float | None = None,
        everything: bool = False,
        dry_run: bool = False,
    ) -> prune_mod.PruneReport:
        if everything:
            if run_ids or older_than_days is not None:
                raise UsageError("prune everything or a selection of runs, not both")
            if dry_run:
                stats = self.stats()
                return prune_mod.PruneReport(deleted_nodes=sum(stats.nodes.values()), dry_run=True)
            return prune_mod.prune_namespace(self.client, self.namespace)
        if not run_ids and older_than_days is None:
            raise UsageError("say what to prune: run ids, an age (older than N days), or everything")
        selected = prune_mod.select_runs(self.client, self.namespace, run_ids, older_than_days)
        return prune_mod.prune_runs(self.client, self.namespace, selected, dry_run=dry_run)
