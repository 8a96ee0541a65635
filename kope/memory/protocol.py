"""The memory as everything above ``kope/memory`` sees it: one typed ``Protocol``.

The loop, context assembly, the bench and the CLI use the memory only through
these operations. ``ExperienceGraph`` (Bolt, straight to Neo4j) and
``RemoteMemory`` (``kope.memory.remote``, a shared memory server over HTTP)
implement them, so nothing above this layer knows which one it has;
``open_memory()`` (``kope.memory.connect``) chooses, and its return type makes
mypy check that both conform.

Writes go to the local journal first in every implementation; a write that
cannot reach the graph says so in its result (``in_graph`` false) and is
replayed by ``sync``.

Context assembly needs less: ``Retriever`` (ranked experience for a state) and
``StateReader`` (one step's state), together ``ContextMemory``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any, Protocol, Self

from kope.memory.insights import DistillReport
from kope.memory.inspect import LineageTree, MemoryStats, UsedInsight
from kope.memory.prune import PruneReport
from kope.memory.recorder import RecordResult, RunResult
from kope.memory.records import OutcomeNodeRecord, RunRecord
from kope.memory.retrieval import RetrievalQuery, RetrievalResult
from kope.memory.schema import SchemaReport
from kope.memory.specs import Attempt, DeployedFigures, KnowledgeDoc, RunSpec
from kope.memory.state import RunState, StepState
from kope.memory.sync import SyncReport
from kope.memory.transfer import TransferReport
from kope.memory.tuning import TuningData, TuningQuery


class Retriever(Protocol):
    def retrieve(self, query: RetrievalQuery, k: int = 8) -> RetrievalResult:
        """z = R(s, M): ranked lineages and the validity rules that apply to the state ``query`` describes."""
        ...


class StateReader(Protocol):
    def step_state(self, run_id: str, *, history_code: bool = False) -> StepState:
        """What one optimization step of ``run_id`` reads (``kope.memory.state``)."""
        ...


class ContextMemory(Retriever, StateReader, Protocol):
    """What context assembly reads from the memory."""


class Memory(ContextMemory, Protocol):
    """Every operation the loop, the context, the bench and the CLI need from the memory."""

    @property
    def namespace(self) -> str: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    # -- runs and attempts (journal first, then the graph) -----------------------------------------
    def init_schema(self) -> SchemaReport: ...

    def start_run(self, spec: RunSpec | dict[str, Any]) -> RunResult: ...

    def finish_run(self, run_id: str, status: str = "finished", *, distill: bool = True) -> RunRecord | None: ...

    def record_attempt(self, attempt: Attempt | dict[str, Any]) -> RecordResult: ...

    def record_attempts(
        self, attempts: Sequence[Attempt | dict[str, Any]], *, batch_size: int = 500
    ) -> list[RecordResult]: ...

    def record_deployed(self, figures: DeployedFigures | dict[str, Any]) -> bool:
        """The as-deployed figures of a run's best kernel, onto its decision's outcome (False: journaled only)."""
        ...

    def upsert_knowledge(self, docs: Iterable[KnowledgeDoc | dict[str, Any]]) -> int: ...

    def distill(self, family: str | None = None) -> DistillReport: ...

    def sync(self, operator: str | None = None, *, dry_run: bool = False) -> SyncReport: ...

    def journal_dir(self) -> Path | None: ...

    # -- reading ---------------------------------------------------------------------------------
    def run(self, run_id: str) -> RunRecord: ...

    def run_state(self, run_id: str) -> RunState: ...

    def outcome(self, decision_id: str) -> OutcomeNodeRecord: ...

    def kernel_source(self, decision_id: str) -> str | None: ...

    def lineage(self, decision_id: str, limit: int = 200) -> LineageTree: ...

    def run_evidence(self, run_id: str) -> dict[str, dict[str, int]]: ...

    def insights_used(self, run_id: str) -> dict[str, list[UsedInsight]]:
        """Per decision of the run: the insights its prompt used (the bench's transfer comparison)."""
        ...

    def tuning_records(self, query: TuningQuery) -> TuningData:
        """A learning proposer's training sample: ranked, bounded attempts of one kernel template."""
        ...

    def stats(self) -> MemoryStats: ...

    # -- sharing and upkeep --------------------------------------------------------------------------
    def export_to(self, out: IO[str]) -> TransferReport: ...

    def import_from(self, stream: IO[str], source: str = "<input>", *, distill: bool = True) -> TransferReport: ...

    def prune(
        self,
        run_ids: Sequence[str] = (),
        *,
        older_than_days: float | None = None,
        everything: bool = False,
        dry_run: bool = False,
    ) -> PruneReport: ...
