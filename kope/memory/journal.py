"""Journal first, graph second: a JSON Lines write-ahead log and a Markdown journal.

Layout, per namespace, one pair of files per operator::

    <data dir>/memory/<namespace>/wal/<operator>.jsonl     the write-ahead log
    <data dir>/memory/<namespace>/journal/<operator>.md    the same, for people

Every run start, attempt and run end is appended to the log (and fsync'ed)
before the graph is written; ``kope memory sync`` replays the entries the graph
lacks. Appends take an exclusive ``flock`` on the file, so several processes
can journal the same operator at once without interleaving lines. A line torn
by a crash in the middle of a write is never acknowledged to the caller; the
next append starts on a fresh line, and ``scan`` reports the torn line and
skips it.

A log line is ``{"v": 1, "kind": "run"|"attempt"|"run_end"|"knowledge"|"distill"|"deployed", "key": id,
"op": operator, "ts": nanoseconds, "data": {...}}``; ``data`` is the
``RunSpec`` / ``Attempt`` / run-end record / knowledge document / distillation / as-deployed figures of a run's
best kernel (``DeployedFigures``, key: its decision id) as JSON.
Knowledge documents (what attempts cite through USED edges) go to
``wal/_knowledge.jsonl``, each version once (key ``<id>#<content hash>``), so a
replay into an empty graph can restore every USED edge.

Insights are derived, never journaled as facts: the journal records *when* they
were distilled (a run end's ``"distill": true``, or a ``distill`` entry in
``wal/_distill.jsonl`` for an explicit ``kope memory distill``), and a replay
distils at the same points of the journal's order. So the insights an attempt
cited exist again when the attempt is replayed, and its USED edges to them are
restored (the insights are a pure function of the graph: ``kope.memory.insights``).

Imports are journaled too: the imported export is kept under
``imports/<content hash>.jsonl`` and an ``import`` entry in ``wal/_imports.jsonl``
names it with the runs and decisions it holds; a replay imports it again (at
its place in the journal's order) where the graph lacks any of them.

``JournalWriter`` is the journal-first half of a memory store, written once for
both stores (``ExperienceGraph`` and ``RemoteMemory``): it builds the entries and
Markdown blocks of each write and appends them before the store writes.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kope.memory.errors import JournalError

WAL_VERSION = 1
KINDS = ("run", "attempt", "run_end", "knowledge", "distill", "import", "deployed")
KNOWLEDGE = "_knowledge"  # the journal file of knowledge documents (not an operator)
DISTILL = "_distill"  # the journal file of explicit distillations (not an operator)
IMPORTS = "_imports"  # the journal file of imports (the imported files are kept under imports/)
SHARED = (KNOWLEDGE, DISTILL, IMPORTS)  # journal files every operator's replay reads too


@dataclass(frozen=True)
class JournalEntry:
    kind: str
    key: str
    operator: str
    data: dict[str, Any]
    ts: int = field(default_factory=time.time_ns)

    def to_line(self) -> bytes:
        record = {
            "v": WAL_VERSION,
            "kind": self.kind,
            "key": self.key,
            "op": self.operator,
            "ts": self.ts,
            "data": self.data,
        }
        return (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")

    @classmethod
    def from_line(cls, line: bytes) -> JournalEntry:
        record = json.loads(line)
        if not isinstance(record, dict) or record.get("v") != WAL_VERSION or record.get("kind") not in KINDS:
            raise ValueError("not a KOPE write-ahead log entry")
        return cls(record["kind"], record["key"], record["op"], record["data"], int(record["ts"]))


@dataclass
class JournalScan:
    entries: list[JournalEntry]
    problems: list[str]  # torn or unreadable lines: "file:line: why"
    files: int


def safe_name(operator: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", operator).lstrip(".") or "_"
    return name[:120]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_durably(path: Path, data: bytes) -> None:
    """Append ``data`` under an exclusive lock, starting on a fresh line, then fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise JournalError(f"cannot open the journal file {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        raise JournalError(f"cannot write the journal file {path}: {exc.strerror}") from None
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
    if created:
        _fsync_dir(path.parent)


class Journal:
    """The write-ahead log and Markdown journal of one namespace."""

    def __init__(self, root: Path, namespace: str) -> None:
        self.root = Path(root) / namespace
        self.namespace = namespace

    @property
    def wal_dir(self) -> Path:
        return self.root / "wal"

    @property
    def markdown_dir(self) -> Path:
        return self.root / "journal"

    def wal_file(self, operator: str) -> Path:
        return self.wal_dir / f"{safe_name(operator)}.jsonl"

    def markdown_file(self, operator: str) -> Path:
        return self.markdown_dir / f"{safe_name(operator)}.md"

    def import_file(self, digest: str) -> Path:
        """Where an imported export is kept (by content hash), for a replay of its ``import`` entry."""
        return self.root / "imports" / f"{safe_name(digest)}.jsonl"

    def keep_import(self, digest: str, text: str) -> Path:
        """Keep an imported export (written to a temporary name, fsync'ed, then renamed): once per content."""
        path = self.import_file(digest)
        if path.exists():
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        try:
            with open(partial, "wb") as handle:
                handle.write(text.encode("utf-8"))
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(partial, path)
        except OSError as exc:
            raise JournalError(f"cannot keep the imported file in the journal ({path}): {exc.strerror}") from None
        _fsync_dir(path.parent)
        return path

    def append(self, entries: Sequence[JournalEntry], markdown: Iterable[tuple[str, str]] = ()) -> None:
        """Log ``entries`` (one write + fsync per operator file), then the Markdown blocks."""
        by_operator: dict[str, list[bytes]] = {}
        for entry in entries:
            by_operator.setdefault(entry.operator, []).append(entry.to_line())
        for operator, lines in by_operator.items():
            append_durably(self.wal_file(operator), b"".join(lines))
        blocks: dict[str, list[str]] = {}
        for operator, text in markdown:
            blocks.setdefault(operator, []).append(text)
        for operator, texts in blocks.items():
            path = self.markdown_file(operator)
            header = "" if path.exists() else f"# KOPE journal: {operator} (namespace {self.namespace})\n\n"
            append_durably(path, (header + "".join(texts)).encode("utf-8"))

    def knowledge_keys(self) -> set[str]:
        """Keys (``<id>#<hash>``) of the knowledge documents already journaled."""
        return {e.key for e in self.scan(KNOWLEDGE).entries if e.kind == "knowledge"}

    def wal_files(self, operator: str | None = None) -> list[Path]:
        if operator is not None:
            path = self.wal_file(operator)
            return [path] if path.exists() else []
        return sorted(self.wal_dir.glob("*.jsonl")) if self.wal_dir.is_dir() else []

    def scan(self, operator: str | None = None) -> JournalScan:
        """Every readable entry, in the order they were journaled (timestamp, file, line)."""
        keyed: list[tuple[int, str, int, JournalEntry]] = []
        problems: list[str] = []
        files = self.wal_files(operator)
        for path in files:
            try:
                raw = path.read_bytes()
            except OSError as exc:
                raise JournalError(f"cannot read the journal file {path}: {exc.strerror}") from None
            lines = raw.split(b"\n")
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    entry = JournalEntry.from_line(line)
                except (ValueError, KeyError, TypeError):
                    last = number == len(lines)
                    why = (
                        "torn last line (the write was interrupted; never acknowledged)" if last else "unreadable line"
                    )
                    problems.append(f"{path.name}:{number}: {why}")
                    continue
                keyed.append((entry.ts, path.name, number, entry))
        keyed.sort(key=lambda item: item[:3])
        return JournalScan([item[3] for item in keyed], problems, len(files))
