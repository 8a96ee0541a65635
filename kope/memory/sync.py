"""Replay the write-ahead log into the graph: everything it lacks, nothing twice.

``kope memory sync`` (``ExperienceGraph.sync``) reads every log entry of the
namespace (or one operator), asks the graph which runs, attempts and run ends
it already holds, and writes the rest in journal order (which is causal order:
a parent is journaled before its children). Writes are idempotent MERGEs, so a
sync interrupted half-way can simply be run again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kope.errors import DatabaseUnavailableError, KopeError, UsageError
from kope.memory.journal import JournalEntry
from kope.memory.specs import Attempt, RunSpec

if TYPE_CHECKING:
    from kope.memory.graph import ExperienceGraph

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


def _present(graph: ExperienceGraph, kind: str, uids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(uids), CHUNK):
        for row in graph.present(kind, uids[start : start + CHUNK]):
            found[row["uid"]] = row
    return found


def _missing(graph: ExperienceGraph, entries: list[JournalEntry]) -> list[JournalEntry]:
    runs = _present(graph, "run", sorted({graph.uid(e.key) for e in entries if e.kind in ("run", "run_end")}))
    attempts = _present(graph, "attempt", sorted({graph.uid(e.key) for e in entries if e.kind == "attempt"}))
    ends: dict[str, JournalEntry] = {}
    for e in entries:  # only the last end of a run counts
        if e.kind == "run_end":
            ends[e.key] = e
    missing = []
    for e in entries:
        key = graph.uid(e.key)
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
    graph: ExperienceGraph, *, operator: str | None = None, dry_run: bool = False, batch_size: int = 500
) -> SyncReport:
    if graph.journal is None:
        raise UsageError("this ExperienceGraph has no journal to sync from")
    scan = graph.journal.scan(operator)
    report = SyncReport(scanned=len(scan.entries), problems=list(scan.problems), dry_run=dry_run)
    graph.verify()
    missing = _missing(graph, scan.entries)
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
            graph._replay_attempts([a for _e, a in items])
            report.replayed["attempt"] += len(items)
            return
        except DatabaseUnavailableError:
            raise
        except KopeError:
            pass  # find the culprit(s) one by one
        for entry, attempt in items:
            try:
                graph._replay_attempts([attempt])
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
            if entry.kind == "run":
                graph._replay_runs([(RunSpec.parse(entry.data["spec"]), entry.data["team"])])
            else:
                family = graph._replay_end(entry.data["run_id"], entry.data["status"], entry.data["ended_at"])
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
        graph.distill(family)
    return report
