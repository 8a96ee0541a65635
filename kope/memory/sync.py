"""Replay the write-ahead log into the memory: everything it lacks, nothing twice.

``kope memory sync`` (``Memory.sync``) reads every log entry of the namespace
(or one operator), asks the memory which runs, attempts, run ends and knowledge
documents it already holds, and writes the rest in journal order (which is causal
order: a parent is journaled before its children, a knowledge document before the
attempts citing it). Writes are idempotent MERGEs, so a sync interrupted half-way
can simply be run again. Knowledge documents and explicit distillations are
journaled apart (``kope.memory.journal.SHARED``), so a sync of one operator reads
them too.

Insights are distilled where the journal says they were (a run end with
``distill``, a ``distill`` entry), in journal order, so the insights a later
attempt cited exist when it is replayed and its USED edges to them are restored.

Relationships are compared too: for every journaled attempt the memory holds,
the relationships the attempt says it has (IN_RUN, FROM, PRODUCED, WROTE and one
USED per cited piece of evidence) are checked against the graph, counted by type
in ``SyncReport.relationships`` where the other end is there (or is replayed by
this sync) and the relationship is not, and restored (``replay_attempts(...,
relink=True)``). A USED edge whose evidence is in neither the memory nor the
journal is reported in ``SyncReport.unlinked`` (the attempt itself is restored),
never dropped silently.

The memory is reached through ``SyncTarget``, the few public operations a
replay needs: ``GraphSync`` (below) implements them on a Neo4j client with the
recorder's own write functions, for ``ExperienceGraph``; ``RemoteMemory``
implements them over HTTP. This module does not know ``ExperienceGraph``.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kope.db.client import GraphClient
from kope.errors import DatabaseUnavailableError, KopeError
from kope.memory import insights, transfer
from kope.memory.deployed import write_deployed
from kope.memory.ids import uid
from kope.memory.journal import SHARED, Journal, JournalEntry
from kope.memory.recorder import RecordResult, finish_run_tx, write_attempts, write_runs
from kope.memory.schema import apply_schema
from kope.memory.specs import Attempt, DeployedFigures, RunSpec

CHUNK = 1000
PRESENT = {  # SyncTarget.present kinds -> statements
    "run": "memory/run/present",
    "attempt": "memory/attempt/present",
    "knowledge": "memory/knowledge/present",
    "insight": "memory/insight/present",
    "edges": "memory/attempt/edges",
    "deployed": "memory/deployed/present",
}


@dataclass
class SyncReport:
    scanned: int = 0
    present: int = 0
    pending: int = 0  # entries the graph lacked
    replayed: dict[str, int] = field(
        default_factory=lambda: {
            "run": 0,
            "attempt": 0,
            "run_end": 0,
            "knowledge": 0,
            "distill": 0,
            "import": 0,
            "deployed": 0,
        }
    )
    failed: list[str] = field(default_factory=list)  # "kind key: why"
    problems: list[str] = field(default_factory=list)  # torn / unreadable log lines
    dry_run: bool = False
    unlinked: list[str] = field(default_factory=list)  # "attempt key: USED kind:id": evidence the memory lacks
    relationships: dict[str, int] = field(default_factory=dict)  # type -> relationships of held attempts it lacks
    relinked: int = 0  # attempts whose missing relationships were restored

    @property
    def ok(self) -> bool:
        return not self.failed and not self.unlinked

    def to_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "present": self.present,
            "pending": self.pending,
            "replayed": dict(self.replayed),
            "failed": list(self.failed),
            "problems": list(self.problems),
            "dry_run": self.dry_run,
            "unlinked": list(self.unlinked),
            "relationships": dict(self.relationships),
            "relinked": self.relinked,
        }


class SyncTarget(Protocol):
    """What a replay needs of a memory (one namespace of it)."""

    @property
    def namespace(self) -> str: ...

    def verify(self) -> None:
        """Fail with ``DatabaseUnavailableError`` unless the memory answers."""
        ...

    def present(self, kind: str, uids: Sequence[str]) -> list[dict[str, Any]]:
        """Which of these runs (``kind="run"``: uid, status, ended_at), attempts (``"attempt"``: uid), knowledge
        documents (``"knowledge"``: uid) or insights (``"insight"``: uid) it holds; ``"edges"``: the relationships
        of these decisions (uid, runs, parents, produced, wrote, used: ``memory/attempt/edges``); ``"deployed"``:
        the decisions whose outcome holds an as-deployed measurement (uid, measured_at)."""
        ...

    def replay_runs(self, items: Sequence[tuple[RunSpec, str]]) -> None:
        """Write these run starts (spec, team) again."""
        ...

    def replay_attempts(self, batch: Sequence[Attempt], *, relink: bool = False) -> list[RecordResult]:
        """Write these attempts again; ``relink``: restore the relationships of those held already."""
        ...

    def replay_end(self, run_id: str, status: str, ended_at: float) -> str | None:
        """Write a run's end again; returns its family (whose insights are distilled at the end)."""
        ...

    def replay_knowledge(self, docs: Sequence[dict[str, Any]]) -> None:
        """Write these knowledge documents (id, title, text, targets, families) again."""
        ...

    def replay_deployed(self, figures: DeployedFigures) -> None:
        """Write the as-deployed figures of a run's best kernel onto its decision's outcome again."""
        ...

    def distill_family(self, family: str | None) -> None:
        """Distil one family's insights (None: every family), without journaling it again."""
        ...

    def replay_import(self, text: str, source: str, *, distill: bool) -> None:
        """Import this export again (then distil every family, when the import did), without journaling it."""
        ...


class GraphSync:
    """``SyncTarget`` on a Neo4j client: the recorder's write functions; ``ensure_schema`` runs before a write
    (``ExperienceGraph`` passes its own, which knows whether the schema was applied already)."""

    def __init__(self, client: GraphClient, namespace: str, ensure_schema: Callable[[], None] | None = None) -> None:
        self.client = client
        self._namespace = namespace
        self._ensure_schema = ensure_schema or functools.partial(apply_schema, client)

    @property
    def namespace(self) -> str:
        return self._namespace

    def verify(self) -> None:
        self.client.verify()

    def present(self, kind: str, uids: Sequence[str]) -> list[dict[str, Any]]:
        return self.client.execute(PRESENT[kind], uids=list(uids))

    def replay_runs(self, items: Sequence[tuple[RunSpec, str]]) -> None:
        self._ensure_schema()
        for spec, team in items:
            self.client.write(functools.partial(write_runs, ns=self.namespace, team=team, specs=[spec]))

    def replay_attempts(self, batch: Sequence[Attempt], *, relink: bool = False) -> list[RecordResult]:
        self._ensure_schema()
        work = functools.partial(write_attempts, ns=self.namespace, attempts=list(batch), relink=relink)
        return self.client.write(work)

    def replay_end(self, run_id: str, status: str, ended_at: float) -> str | None:
        self._ensure_schema()
        return self.client.write(
            functools.partial(finish_run_tx, ns=self.namespace, run_id=run_id, status=status, ended_at=ended_at)
        )

    def replay_deployed(self, figures: DeployedFigures) -> None:
        self._ensure_schema()
        self.client.write(functools.partial(write_deployed, ns=self.namespace, figures=figures))

    def replay_knowledge(self, docs: Sequence[dict[str, Any]]) -> None:
        rows = [{**doc, "uid": uid(self.namespace, doc["id"]), "ns": self.namespace} for doc in docs]
        self._ensure_schema()
        self.client.write(lambda tx: tx.run("memory/knowledge/upsert", rows=rows))

    def distill_family(self, family: str | None) -> None:
        self._ensure_schema()
        insights.distill(self.client, self.namespace, family)

    def replay_import(self, text: str, source: str, *, distill: bool) -> None:
        self._ensure_schema()
        transfer.import_namespace(self.client, self.namespace, io.StringIO(text), source)
        if distill:
            insights.distill(self.client, self.namespace, None)


def _present(target: SyncTarget, kind: str, uids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(uids), CHUNK):
        for row in target.present(kind, uids[start : start + CHUNK]):
            found[row["uid"]] = row
    return found


def _distills(entry: JournalEntry) -> bool:
    """Whether the family was distilled at this entry (run ends journaled before the flag: yes, the default)."""
    return entry.kind == "distill" or (entry.kind == "run_end" and bool(entry.data.get("distill", True)))


def _missing(target: SyncTarget, entries: list[JournalEntry]) -> tuple[list[JournalEntry], dict[str, dict[str, Any]]]:
    """The entries to replay (journal order), and the attempts the memory holds (uid -> {})."""
    ns = target.namespace
    imports = [e for e in entries if e.kind == "import"]
    run_ids = {uid(ns, e.key) for e in entries if e.kind in ("run", "run_end")}
    run_ids |= {uid(ns, r) for e in imports for r in e.data.get("runs", ())}
    attempt_ids = {uid(ns, e.key) for e in entries if e.kind == "attempt"}
    attempt_ids |= {uid(ns, d) for e in imports for d in e.data.get("decisions", ())}
    runs = _present(target, "run", sorted(run_ids))
    attempts = _present(target, "attempt", sorted(attempt_ids))
    docs = _present(target, "knowledge", sorted({uid(ns, e.data["id"]) for e in entries if e.kind == "knowledge"}))
    latest: dict[str, JournalEntry] = {}
    for e in entries:  # only a document's last version counts
        if e.kind == "knowledge":
            latest[e.data["id"]] = e
    ends: dict[str, JournalEntry] = {}
    for e in entries:  # only the last end of a run counts
        if e.kind == "run_end":
            ends[e.key] = e
    measured: dict[str, JournalEntry] = {}
    for e in entries:  # only a decision's last as-deployed measurement counts
        if e.kind == "deployed":
            measured[e.key] = e
    deployed = _present(target, "deployed", sorted(uid(ns, key) for key in measured))
    missing: list[JournalEntry] = []
    for e in entries:
        key = uid(ns, e.key)
        if e.kind == "run" and key not in runs:
            missing.append(e)
        elif e.kind == "attempt" and key not in attempts:
            missing.append(e)
        elif e.kind == "knowledge" and latest[e.data["id"]] is e and uid(ns, e.data["id"]) not in docs:
            missing.append(e)
        elif e.kind == "run_end" and ends[e.key] is e:
            row = runs.get(key)
            if row is None or row["status"] != e.data["status"] or row["ended_at"] != e.data["ended_at"]:
                missing.append(e)
        elif e.kind == "deployed" and measured[e.key] is e:
            row = deployed.get(key)
            if row is None or row["measured_at"] != e.data.get("measured_at"):
                missing.append(e)
        elif e.kind == "distill" and missing:  # a distillation after something the memory lacked: again
            missing.append(e)
        elif e.kind == "import" and (
            any(uid(ns, r) not in runs for r in e.data.get("runs", ()))
            or any(uid(ns, d) not in attempts for d in e.data.get("decisions", ()))
        ):
            missing.append(e)
    return missing, attempts


def _lacking_edges(
    target: SyncTarget, entries: list[JournalEntry], held: dict[str, Any], replayed: set[str]
) -> tuple[list[tuple[JournalEntry, Attempt]], dict[str, int]]:
    """Attempts the memory holds whose relationships it lacks, and how many it lacks by type. A relationship
    counts where its other end is in the memory or is replayed by this sync (``replayed``: uids)."""
    ns = target.namespace
    parsed: dict[str, tuple[JournalEntry, Attempt]] = {}
    for e in entries:
        if e.kind == "attempt" and uid(ns, e.key) in held:
            try:
                parsed[uid(ns, e.key)] = (e, Attempt.parse(e.data))
            except KopeError:
                continue  # reported when it is replayed (it never is: the memory holds it)
    if not parsed:
        return [], {}
    edges = _present(target, "edges", sorted(parsed))
    absent: dict[str, list[str]] = {"attempt": [], "insight": [], "knowledge": []}
    for key, (_e, at) in parsed.items():
        row = edges.get(key)
        linked = {(kind, ident) for kind, ident in row["used"]} if row else set()
        for item in at.used:
            if (item.kind, item.id) not in linked and uid(ns, item.id) not in replayed:
                absent["attempt" if item.kind == "decision" else item.kind].append(uid(ns, item.id))
        if at.parent_id and row and at.parent_id not in row["parents"] and uid(ns, at.parent_id) not in replayed:
            absent["attempt"].append(uid(ns, at.parent_id))
    there = set(replayed)
    for kind, uids in absent.items():
        there.update(_present(target, kind, sorted(set(uids))))
    lacking: list[tuple[JournalEntry, Attempt]] = []
    counts: dict[str, int] = {}
    for key, (e, at) in parsed.items():
        row = edges.get(key)
        if row is None:
            continue
        lacks: list[str] = []
        if at.run_id not in row["runs"]:
            lacks.append("IN_RUN")
        if at.parent_id and at.parent_id not in row["parents"] and uid(ns, at.parent_id) in there:
            lacks.append("FROM")
        if not row["produced"]:
            lacks.append("PRODUCED")
        if at.code is not None and not row["wrote"]:
            lacks.append("WROTE")
        linked = {(kind, ident) for kind, ident in row["used"]}
        lacks += ["USED" for i in at.used if (i.kind, i.id) not in linked and uid(ns, i.id) in there]
        for kind in lacks:
            counts[kind] = counts.get(kind, 0) + 1
        if lacks:
            lacking.append((e, at))
    return lacking, counts


def sync_journal(
    target: SyncTarget,
    journal: Journal,
    *,
    operator: str | None = None,
    dry_run: bool = False,
    batch_size: int = 500,
) -> SyncReport:
    scan = journal.scan(operator)
    if operator is not None:  # knowledge documents and distillations are journaled apart
        for name in SHARED:
            shared = journal.scan(name)
            scan.entries = sorted(scan.entries + shared.entries, key=lambda e: e.ts)
            scan.problems += shared.problems
    report = SyncReport(scanned=len(scan.entries), problems=list(scan.problems), dry_run=dry_run)
    target.verify()
    missing, held = _missing(target, scan.entries)
    ns = target.namespace
    replayed = {uid(ns, e.key) for e in missing if e.kind == "attempt"}
    replayed |= {uid(ns, e.data["id"]) for e in missing if e.kind == "knowledge"}
    lacking, report.relationships = _lacking_edges(target, scan.entries, held, replayed)
    report.pending = len(missing)
    report.present = report.scanned - report.pending
    if dry_run or not (missing or lacking):
        return report

    batch: list[tuple[JournalEntry, Attempt]] = []

    def note(items: list[tuple[JournalEntry, Attempt]], results: list[RecordResult]) -> None:
        """USED edges the memory could not link (their evidence is not there): reported, never silent."""
        by_id = {r.decision_id: r for r in results}
        for entry, attempt in items:
            result = by_id.get(attempt.id)
            for item in result.missing_evidence if result is not None else ():
                report.unlinked.append(f"attempt {entry.key}: USED {item} is not in the graph")

    def flush() -> None:
        if not batch:
            return
        items = list(batch)
        batch.clear()
        try:
            note(items, target.replay_attempts([a for _e, a in items]))
            report.replayed["attempt"] += len(items)
            return
        except DatabaseUnavailableError:
            raise
        except KopeError:
            pass  # find the culprit(s) one by one
        for entry, attempt in items:
            try:
                note([(entry, attempt)], target.replay_attempts([attempt]))
                report.replayed["attempt"] += 1
            except DatabaseUnavailableError:
                raise
            except KopeError as exc:
                report.failed.append(f"attempt {entry.key}: {exc.message}")

    for entry in missing:
        if entry.kind == "attempt":
            try:
                batch.append((entry, Attempt.parse(entry.data)))
            except KopeError as exc:
                report.failed.append(f"attempt {entry.key}: {exc.message}")
            if len(batch) >= batch_size:
                flush()
            continue
        flush()
        try:
            data = entry.data
            if entry.kind == "run":
                target.replay_runs([(RunSpec.parse(data["spec"]), data["team"])])
            elif entry.kind == "knowledge":
                target.replay_knowledge([data])
            elif entry.kind == "deployed":
                target.replay_deployed(DeployedFigures.parse(data))
            elif entry.kind == "distill":
                target.distill_family(data["family"])
            elif entry.kind == "import":
                path = journal.import_file(data["file"])
                if not path.exists():
                    raise KopeError(f"the imported file {path} is not in the journal any more")
                target.replay_import(path.read_text(encoding="utf-8"), data["source"], distill=data["distill"])
            else:
                family = target.replay_end(data["run_id"], data["status"], data["ended_at"])
                if family and _distills(entry):  # where the run's end distilled its family: here too
                    target.distill_family(family)
            report.replayed[entry.kind] += 1
        except DatabaseUnavailableError:
            raise
        except (KopeError, KeyError, TypeError) as exc:
            why = exc.message if isinstance(exc, KopeError) else f"malformed entry ({exc})"
            report.failed.append(f"{entry.kind} {entry.key}: {why}")
    flush()
    for start in range(0, len(lacking), batch_size):  # after every node: the other ends are there now
        items = lacking[start : start + batch_size]
        try:
            note(items, target.replay_attempts([a for _e, a in items], relink=True))
            report.relinked += len(items)
        except DatabaseUnavailableError:
            raise
        except KopeError as exc:
            report.failed.append(f"relinking {len(items)} attempts: {exc.message}")
    return report
