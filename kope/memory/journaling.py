"""The journal-first half of both memory stores, written once.

``ExperienceGraph`` (Bolt) and ``RemoteMemory`` (a memory server) journal the same
things in the same way before they write: run starts, attempts (with the evidence
they cite, which become USED edges), run ends (and whether the family was distilled
there), knowledge documents (each version once), explicit distillations and imports. This
module builds those entries and Markdown blocks; ``kope.memory.journal`` stores them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from kope.memory import markdown, scoring
from kope.memory.ids import content_hash
from kope.memory.journal import DISTILL, IMPORTS, KNOWLEDGE, Journal, JournalEntry
from kope.memory.specs import Attempt, KnowledgeDoc, RunSpec
from kope.memory.transfer import export_ids


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
