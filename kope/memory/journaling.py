"""The journal-first half of both memory stores, written once.

``ExperienceGraph`` (Bolt) and ``RemoteMemory`` (a memory server) journal the same
things in the same way before they write: run starts, attempts (with the evidence
they cite, which become USED edges), run ends (and whether the family was distilled
there), knowledge documents (each version once), explicit distillations and imports. This
module builds those entries and Markdown blocks (``JournalWriter``; ``kope.memory.journal``
stores them), and holds the write path both stores share (``JournalFirstStore``): journal
first, then the store; while the store cannot be reached, hold the write back (the journal
has it), say why, and send what was held back before the next write once it answers.
"""

from __future__ import annotations

import abc
import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kope.errors import DatabaseUnavailableError, KopeError, UsageError
from kope.memory import markdown, scoring
from kope.memory.errors import UnknownDecisionError, UnknownRunError
from kope.memory.ids import content_hash
from kope.memory.journal import DISTILL, IMPORTS, KNOWLEDGE, Journal, JournalEntry
from kope.memory.recorder import RecordResult, RunResult
from kope.memory.records import RunRecord
from kope.memory.specs import Attempt, DeployedFigures, KnowledgeDoc, RunSpec
from kope.memory.transfer import export_ids

if TYPE_CHECKING:
    from kope.memory.state import RunState
    from kope.memory.sync import SyncReport

log = logging.getLogger("kope.memory")
RUN_STATUSES = ("finished", "interrupted", "failed", "budget_exhausted", "target_reached")


def knowledge_data(doc: KnowledgeDoc) -> dict[str, Any]:
    """A knowledge document as the journal (and ``memory/knowledge/upsert``, with uid and ns) holds it."""
    return {
        "id": doc.id,
        "title": doc.title,
        "text": doc.text,
        "targets": list(doc.targets),
        "families": list(doc.families),
    }


class JournalWriter:
    """Appends each write of one namespace to its journal, before the store writes it."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def runs(self, specs: Sequence[RunSpec], team: str) -> None:
        self.journal.append(
            [
                JournalEntry(
                    "run", s.run_id, s.task.operator, {"spec": s.model_dump(mode="json", by_alias=True), "team": team}
                )
                for s in specs
            ],
            [(s.task.operator, markdown.run_block(s, team)) for s in specs],
        )

    def attempts(self, attempts: Sequence[Attempt], known_a: Mapping[str, float | None]) -> None:
        """Attempts, with their parents' speedups where known (``known_a``: decision id -> a) for the Markdown."""
        entries, blocks = [], []
        local_a = dict(known_a)
        for at in attempts:
            entries.append(JournalEntry("attempt", at.id, at.outcome.task, at.to_json()))
            known = at.parent_id is None or at.parent_id in local_a
            parent_a = local_a.get(at.parent_id) if at.parent_id else None
            blocks.append((at.outcome.task, markdown.attempt_block(at, parent_a, known)))
            local_a[at.id] = scoring.absolute_speedup(at.outcome)
        self.journal.append(entries, blocks)

    def run_end(self, run_id: str, operator: str, status: str, ended_at: float, *, distill: bool) -> None:
        """A run's end; ``distill``: the store distils the run's family right after (a replay does too)."""
        data = {"run_id": run_id, "status": status, "ended_at": ended_at, "distill": distill}
        self.journal.append(
            [JournalEntry("run_end", run_id, operator, data)],
            [(operator, markdown.run_end_block(run_id, status, ended_at, f"- status: {status}"))],
        )

    def deployed(self, figures: DeployedFigures, operator: str) -> None:
        """The as-deployed figures of a run's best kernel (key: its decision id), in its operator's journal."""
        self.journal.append(
            [JournalEntry("deployed", figures.decision_id, operator, figures.to_json())],
            [(operator, markdown.deployed_block(figures))],
        )

    def knowledge(self, docs: Sequence[KnowledgeDoc]) -> None:
        """Knowledge documents not journaled yet (each version once: key ``<id>#<content hash>``)."""
        known = self.journal.knowledge_keys()
        entries = []
        for doc in docs:
            data = knowledge_data(doc)
            key = f"{doc.id}#{content_hash(data, 12)}"
            if key not in known:
                known.add(key)
                entries.append(JournalEntry("knowledge", key, KNOWLEDGE, data))
        if entries:
            self.journal.append(entries)

    def distill(self, family: str | None) -> None:
        """An explicit distillation of one family (None: the whole namespace)."""
        self.journal.append([JournalEntry("distill", family or "*", DISTILL, {"family": family})])

    def import_(self, text: str, source: str, *, distill: bool) -> None:
        """An import of an export file (validated first: a file the import would refuse is not journaled); the
        file is kept in the journal, so a replay can import it again."""
        runs, decisions = export_ids(text, source)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]
        self.journal.keep_import(digest, text)
        data = {"file": digest, "source": source, "distill": distill, "runs": runs, "decisions": decisions}
        self.journal.append([JournalEntry("import", digest, IMPORTS, data)])


class JournalFirstStore(abc.ABC):
    """The write path of both memory stores: journal first, then the store (Neo4j, or a memory server).

    While the store cannot be reached (``DatabaseUnavailableError``) a write is held back (``pending``, with the
    reason in ``offline_reason``) and the caller is told (``in_graph=False``); the journal has it, so nothing is
    lost. The next write first sends what was held back, in order; ``kope memory sync`` replays whatever the store
    lacks in any later process. Held-back items: ``("run", [RunSpec])``, ``("attempts", [Attempt])``,
    ``("run_end", (run_id, status, ended_at, distill))``, ``("deployed", DeployedFigures)``.

    A store supplies ``_send`` (one write of one kind), ``verify``, ``run``, ``sync`` and the hint it prints while
    offline; it may prepare before each write (``_prepare``: the graph applies its schema) and finish a run's end
    (``_ended``: the graph distils the family there).
    """

    namespace: str
    team: str
    journal: Journal | None

    def _init_journal_first(self) -> None:
        self._offline: str | None = None
        self._pending: list[tuple[str, Any]] = []
        self._known_a: dict[str, float | None] = {}  # decision id -> a, for the journal's Markdown
        self._run_operator: dict[str, str] = {}  # run id -> operator: the journal file a run's end goes to

    # -- what a store supplies -------------------------------------------------------------------
    @abc.abstractmethod
    def _send(self, kind: str, item: Any) -> Any:
        """Write one item of ``kind`` ("run", "attempts", "run_end", "deployed") to the store."""

    @abc.abstractmethod
    def _offline_hint(self) -> str:
        """What to do once the store is back (ends the reason a held-back write gives)."""

    @abc.abstractmethod
    def verify(self) -> None: ...

    @abc.abstractmethod
    def run(self, run_id: str) -> RunRecord: ...

    @abc.abstractmethod
    def sync(self, operator: str | None = None, *, dry_run: bool = False) -> SyncReport: ...

    def _prepare(self) -> None:
        """Before each write, once the store answers (nothing by default)."""
        return None

    def _ended(self, run_id: str, sent: Any, distill: bool) -> RunRecord | None:
        """The run's record after its end was written (``sent``: what ``_send("run_end", ...)`` returned)."""
        record: RunRecord = sent[0]
        return record

    # -- held back while offline -----------------------------------------------------------------
    @property
    def offline_reason(self) -> str | None:
        """Why the last write failed for want of a store (None when it answered)."""
        return self._offline

    @property
    def pending(self) -> int:
        """Items this object journaled that are not in the store yet."""
        return sum(len(item) if kind in ("run", "attempts") else 1 for kind, item in self._pending)

    def _write(self, kind: str, item: Any) -> Any:
        """Write ``item``; first whatever was held back while the store was unreachable."""
        if self._offline is not None:
            self.verify()  # fails fast (no retry loop) while the store is still down
        self._prepare()
        while self._pending:
            held_kind, held = self._pending[0]
            try:
                self._send(held_kind, held)
            except DatabaseUnavailableError:
                raise
            except KopeError:
                self._pending.pop(0)  # it is in the journal; `kope memory sync` reports it
                raise
            self._pending.pop(0)
        result = self._send(kind, item)
        self._offline = None
        return result

    def _unavailable(self, exc: DatabaseUnavailableError, kind: str, item: Any) -> str:
        if self.journal is None:
            raise exc
        self._offline = exc.message
        self._pending.append((kind, item))
        reason = f"{exc.message}; kept in the journal ({self.journal.wal_dir}), {self._offline_hint()}"
        log.warning("memory: %s", reason)
        return reason

    # -- runs ------------------------------------------------------------------------------------
    def start_run(self, spec: RunSpec | dict[str, Any]) -> RunResult:
        return self.start_runs([spec])[0]

    def start_runs(self, specs: Sequence[RunSpec | dict[str, Any]]) -> list[RunResult]:
        """Start runs (journal, then one write)."""
        parsed = [RunSpec.parse(s) for s in specs]
        for spec in parsed:
            self._run_operator[spec.run_id] = spec.task.operator
        if self.journal is not None:
            JournalWriter(self.journal).runs(parsed, self.team)
        try:
            started: list[RunResult] = self._write("run", parsed)
            return started
        except DatabaseUnavailableError as exc:
            reason = self._unavailable(exc, "run", parsed)
            return [RunResult(s.run_id, in_graph=False, pending_reason=reason) for s in parsed]

    def finish_run(self, run_id: str, status: str = "finished", *, distill: bool = True) -> RunRecord | None:
        """End a run (journal, then the store) and distil its family's insights. None while offline."""
        if status not in RUN_STATUSES:
            raise UsageError(f"run status must be one of {', '.join(RUN_STATUSES)} (got {status!r})")
        ended_at = time.time()
        if self.journal is not None:
            operator = self._run_operator.get(run_id) or self._operator_of(run_id)
            JournalWriter(self.journal).run_end(run_id, operator, status, ended_at, distill=distill)
        item = (run_id, status, ended_at, distill)
        try:
            sent = self._write("run_end", item)
        except DatabaseUnavailableError as exc:
            self._unavailable(exc, "run_end", item)
            return None
        return self._ended(run_id, sent, distill)

    def record_deployed(self, figures: DeployedFigures | dict[str, Any]) -> bool:
        """Add the as-deployed figures of a run's best kernel to the outcome of its decision (journal, then the
        store); False while the store cannot be reached (the journal has them: ``kope memory sync`` writes them)."""
        parsed = DeployedFigures.parse(figures)
        if self.journal is not None:
            operator = self._run_operator.get(parsed.run_id) or self._operator_of(parsed.run_id)
            JournalWriter(self.journal).deployed(parsed, operator)
        try:
            self._write("deployed", parsed)
        except DatabaseUnavailableError as exc:
            self._unavailable(exc, "deployed", parsed)
            return False
        return True

    def _operator_of(self, run_id: str) -> str:
        try:
            return self.run(run_id).operator
        except (DatabaseUnavailableError, UnknownRunError):
            return "_runs"

    def _remember(self, state: RunState) -> None:
        self._run_operator[state.run.id] = state.run.operator
        for d in state.decisions:
            self._known_a[d.id] = d.a

    # -- attempts --------------------------------------------------------------------------------
    def record_attempt(self, attempt: Attempt | dict[str, Any]) -> RecordResult:
        return self.record_attempts([attempt])[0]

    def record_attempts(
        self, attempts: Sequence[Attempt | dict[str, Any]], *, batch_size: int = 500
    ) -> list[RecordResult]:
        parsed = [Attempt.parse(a) for a in attempts]
        if self.journal is not None:
            JournalWriter(self.journal).attempts(parsed, self._known_a)
        results: list[RecordResult] = []
        for start in range(0, len(parsed), batch_size):
            results.extend(self._write_attempts(parsed[start : start + batch_size]))
        return results

    def _write_attempts(self, batch: list[Attempt]) -> list[RecordResult]:
        results: list[RecordResult]
        try:
            try:
                results = self._write("attempts", batch)
            except (UnknownRunError, UnknownDecisionError):
                if self.journal is None:
                    raise
                # The run or a parent may be journaled by a process that could not reach the store:
                # replay the journal of these operators, then try once more.
                for operator in sorted({at.outcome.task for at in batch}):
                    self.sync(operator=operator)
                results = self._write("attempts", batch)
        except DatabaseUnavailableError as exc:
            reason = self._unavailable(exc, "attempts", batch)
            return [RecordResult(at.id, in_graph=False, pending_reason=reason) for at in batch]
        for r in results:
            self._known_a[r.decision_id] = r.a
        return results
