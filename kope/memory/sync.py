"""Replay the write-ahead log into the memory: everything it lacks, nothing twice.

``kope memory sync`` (``Memory.sync``) reads every log entry of the namespace
(or one operator), asks the memory which runs, attempts and run ends it already
holds, and writes the rest in journal order (which is causal order: a parent is
journaled before its children). Writes are idempotent MERGEs, so a sync
interrupted half-way can simply be run again.

The memory is reached through ``SyncTarget``, the few public operations a
replay needs: ``GraphSync`` (below) implements them on a Neo4j client with the
recorder's own write functions, for ``ExperienceGraph``; ``RemoteMemory``
implements them over HTTP. This module does not know ``ExperienceGraph``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kope.db.client import GraphClient
from kope.errors import DatabaseUnavailableError, KopeError
from kope.memory import insights
from kope.memory.ids import uid
from kope.memory.journal import Journal, JournalEntry
from kope.memory.recorder import RecordResult, finish_run_tx, write_attempts, write_runs
from kope.memory.schema import apply_schema
from kope.memory.specs import Attempt, RunSpec

CHUNK = 1000


@dataclass
class SyncReport:
    scanned: int = 0
    present: int = 0
    pending: int = 0  # entries the graph lacked
    replayed: dict[str, int] = field(default_factory=lambda: {"run": 0, "attempt": 0, "run_end": 0})
    failed: list[str] = field(default_factory=list)  # "kind key: why"
    problems: list[str] = field(default_factory=list)  # torn / unreadable log lines
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "present": self.present,
            "pending": self.pending,
            "replayed": dict(self.replayed),
            "failed": list(self.failed),
            "problems": list(self.problems),
            "dry_run": self.dry_run,
        }


class SyncTarget(Protocol):
    """What a replay needs of a memory (one namespace of it)."""

    @property
    def namespace(self) -> str: ...

    def verify(self) -> None:
        """Fail with ``DatabaseUnavailableError`` unless the memory answers."""
        ...

    def present(self, kind: str, uids: Sequence[str]) -> list[dict[str, Any]]:
        """Which of these runs (``kind="run"``: uid, status, ended_at) or attempts (``"attempt"``: uid) it holds."""
        ...

    def replay_runs(self, items: Sequence[tuple[RunSpec, str]]) -> None:
        """Write these run starts (spec, team) again."""
        ...

    def replay_attempts(self, batch: Sequence[Attempt]) -> list[RecordResult]: ...

    def replay_end(self, run_id: str, status: str, ended_at: float) -> str | None:
        """Write a run's end again; returns its family (whose insights are distilled at the end)."""
        ...

    def distill_family(self, family: str) -> None: ...


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
        return self.client.execute(f"memory/{kind}/present", uids=list(uids))

    def replay_runs(self, items: Sequence[tuple[RunSpec, str]]) -> None:
        self._ensure_schema()
        for spec, team in items:
            self.client.write(functools.partial(write_runs, ns=self.namespace, team=team, specs=[spec]))

    def replay_attempts(self, batch: Sequence[Attempt]) -> list[RecordResult]:
        self._ensure_schema()
        return self.client.write(functools.partial(write_attempts, ns=self.namespace, attempts=list(batch)))

    def replay_end(self, run_id: str, status: str, ended_at: float) -> str | None:
        self._ensure_schema()
        return self.client.write(
            functools.partial(finish_run_tx, ns=self.namespace, run_id=run_id, status=status, ended_at=ended_at)
        )

    def distill_family(self, family: str) -> None:
        insights.distill(self.client, self.namespace, family)


def _present(target: SyncTarget, kind: str, uids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(uids), CHUNK):
        for row in target.present(kind, uids[start : start + CHUNK]):
            found[row["uid"]] = row
    return found


def _missing(target: SyncTarget, entries: list[JournalEntry]) -> list[JournalEntry]:
    ns = target.namespace
    runs = _present(target, "run", sorted({uid(ns, e.key) for e in entries if e.kind in ("run", "run_end")}))
    attempts = _present(target, "attempt", sorted({uid(ns, e.key) for e in entries if e.kind == "attempt"}))
    ends: dict[str, JournalEntry] = {}
    for e in entries:  # only the last end of a run counts
        if e.kind == "run_end":
            ends[e.key] = e
    missing = []
    for e in entries:
        key = uid(ns, e.key)
        if e.kind == "run" and key not in runs:
            missing.append(e)
        elif e.kind == "attempt" and key not in attempts:
            missing.append(e)
        elif e.kind == "run_end" and ends[e.key] is e:
            row = runs.get(key)
            if row is None or row["status"] != e.data["status"] or row["ended_at"] != e.data["ended_at"]:
                missing.append(e)
    return missing


def sync_journal(
    target: SyncTarget,
    journal: Journal,
    *,
    operator: str | None = None,
    dry_run: bool = False,
    batch_size: int = 500,
) -> SyncReport:
    scan = journal.scan(operator)
    report = SyncReport(scanned=len(scan.entries), problems=list(scan.problems), dry_run=dry_run)
    target.verify()
    missing = _missing(target, scan.entries)
    report.pending = len(missing)
    report.present = report.scanned - report.pending
    if dry_run or not missing:
        return report

    batch: list[tuple[JournalEntry, Attempt]] = []
    families: set[str] = set()

    def flush() -> None:
        if not batch:
            return
        items = list(batch)
        batch.clear()
        try:
            target.replay_attempts([a for _e, a in items])
            report.replayed["attempt"] += len(items)
            return
        except DatabaseUnavailableError:
            raise
        except KopeError:
            pass  # find the culprit(s) one by one
        for entry, attempt in items:
            try:
                target.replay_attempts([attempt])
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
            else:
                family = target.replay_end(data["run_id"], data["status"], data["ended_at"])
                if family:
                    families.add(family)
            report.replayed[entry.kind] += 1
        except DatabaseUnavailableError:
            raise
        except (KopeError, KeyError, TypeError) as exc:
            why = exc.message if isinstance(exc, KopeError) else f"malformed entry ({exc})"
            report.failed.append(f"{entry.kind} {entry.key}: {why}")
    flush()
    for family in sorted(families):
        target.distill_family(family)
    return report
