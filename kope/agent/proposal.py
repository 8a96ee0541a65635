"""What a proposer receives and returns: one decision and its candidate per step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kope.boundary import Hardware, TaskView
from kope.context.assemble import AssembledContext
from kope.context.protocol import FormatProblem
from kope.memory.retrieval import RetrievalResult
from kope.memory.state import AttemptState
from kope.memory.tuning import TuningData, TuningQuery


@dataclass(frozen=True)
class ProposalRequest:
    task: TaskView
    target: str
    step: int
    hardware: Hardware
    context: AssembledContext
    retrieval: RetrievalResult | None  # None without memory (or a policy that retrieves nothing)
    # the state this step starts from (the incumbent, or an earlier state when backtracking), its kernel read
    parent: AttemptState | None
    history: Sequence[AttemptState]  # every earlier attempt, in step order (StepState.history)
    backtracked: bool = False
    cases: Sequence[Mapping[str, Any]] = ()  # the cases this run evaluates (name + parameters); () = all
    tuning: TuningData | None = None  # the training sample a proposer asked for (UsesTuningRecords)
    # a replay evaluator's recorded space (kope.evaluators.RecordedSpace): template -> the settings that exist
    # (settings_key texts); a proposer proposes only those. None: every setting can be evaluated
    allowed: Mapping[str, frozenset[str]] | None = None


@dataclass(frozen=True)
class Proposal:
    title: str
    layer: str
    thought: str
    code: str | None  # None: the response had no usable candidate (see format_problem)
    # The proposer's own facts about the decision, stored with it as the extension of its
    # DecisionParams (JSON values; e.g. the offline proposer's TemplateChoice). The loop adds its own.
    params: Mapping[str, Any] | None = None
    format_problem: FormatProblem | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str | None = None
    cited: tuple[str, ...] = ()  # evidence ids the proposer said it used
    notes: tuple[str, ...] = field(default_factory=tuple)
    structure: Mapping[str, Any] | None = None  # the offline proposer: the task's structure match and bindings


class Proposer(Protocol):
    @property
    def name(self) -> str: ...  # "llm" | "offline"

    @property
    def model(self) -> str | None: ...

    def propose(self, request: ProposalRequest) -> Proposal: ...


@runtime_checkable
class UsesTuningRecords(Protocol):
    """A proposer that trains on recorded attempts: the loop fetches what ``tuning_query`` asks for
    (``Memory.tuning_records``) and hands it over as ``ProposalRequest.tuning``."""

    def tuning_query(
        self,
        task: TaskView,
        target: str,
        cases: Sequence[Mapping[str, Any]],
        hardware: Hardware,
        run_id: str,
        memory: bool,
    ) -> TuningQuery | None: ...  # None when it needs none for this task


class ProposerExhausted(Exception):
    """The proposer has nothing left to try for this task (the loop ends the run)."""
