"""A run's state as the graph holds it: what resume reads, and what one optimization step reads.

``RunState`` is the run and its decisions (``ExperienceGraph.run_state``).
``StepState`` adds what a step of the loop needs, read in one transaction
(``ExperienceGraph.step_state``): every attempt's outcome, and the kernels of
the states the step can start from (the incumbent, the latest attempt and the
best backtracking target; every attempt's with ``history_code``, for the
passive context policy). The loop hands it to context assembly unchanged, so
nothing above the memory reads the run a second time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kope.memory.params import DecisionParams
from kope.memory.records import DecisionRecord, OutcomeNodeRecord, RunRecord


@dataclass(frozen=True)
class RunState:
    """A run as the graph holds it: enough to resume it with nothing else."""

    run: RunRecord
    decisions: tuple[DecisionRecord, ...]  # in step order

    @property
    def next_step(self) -> int:
        return (self.decisions[-1].step + 1) if self.decisions else 0

    @property
    def last(self) -> DecisionRecord | None:
        return self.decisions[-1] if self.decisions else None

    @property
    def incumbent(self) -> DecisionRecord | None:
        return next((d for d in self.decisions if d.id == self.run.incumbent_id), None)

    def best_by_downstream(self, exclude: Iterable[str] = ()) -> DecisionRecord | None:
        """The most promising state to backtrack to: highest d(v) * confidence among
        correct decisions (earliest step among equals)."""
        skip = set(exclude)
        pool = [d for d in self.decisions if d.status == "correct" and d.id not in skip]
        return min(pool, key=lambda d: (-(d.d * d.conf), d.step)) if pool else None

    def start_candidates(self) -> list[str]:
        """The decisions a step can start from: the incumbent, the latest attempt, the best backtracking target."""
        incumbent = self.incumbent
        backtrack = self.best_by_downstream(exclude=[incumbent.id] if incumbent else [])
        ids = [d.id for d in (incumbent, self.last, backtrack) if d is not None]
        return list(dict.fromkeys(ids))


@dataclass(frozen=True)
class AttemptState:
    """One attempt of the run: the decision, what the target said, and the kernel it wrote.

    The one Decision type above the graph's rows: the state a step starts from and the run's history that
    a proposer reads (``kope.agent.proposal.ProposalRequest``), the incumbent and latest attempt of the hot
    tier (``kope.context.hot.HotState``) and the passive history and run digest are all ``AttemptState``
    values, and read the decision's facts through ``decision`` (a ``DecisionRecord``). A field added there
    reaches every view; none of them keeps a copy (``tests/unit/test_one_definition.py`` checks)."""

    decision: DecisionRecord
    outcome: OutcomeNodeRecord | None  # None: not read with this state (only ``StepState.history``)
    # None: the attempt wrote no kernel (e.g. a format error); in ``StepState.history`` also: not read
    code: str | None

    @property
    def id(self) -> str:
        return self.decision.id

    @property
    def step(self) -> int:
        return self.decision.step

    @property
    def params(self) -> DecisionParams:
        return self.decision.params


class KernelNotReadError(LookupError):
    """A step asked for the kernel of a decision that its state was not read with (a bug in the caller)."""


@dataclass(frozen=True)
class StepState(RunState):
    """What one optimization step reads from the graph (see the module docstring)."""

    outcomes: Mapping[str, OutcomeNodeRecord] = field(default_factory=dict)  # decision id -> its outcome
    kernels: Mapping[str, str | None] = field(default_factory=dict)  # decision id -> source, for those read
    history_code: bool = False  # every attempt's kernel was read

    def attempt(self, decision_id: str) -> AttemptState:
        """The attempt with its outcome and kernel (``KernelNotReadError`` if its kernel was not read)."""
        decision = next((d for d in self.decisions if d.id == decision_id), None)
        if decision is None:
            raise KeyError(f"decision {decision_id} is not part of run {self.run.id}")
        if decision_id not in self.kernels:
            raise KernelNotReadError(f"the kernel of {decision_id} was not read with this step's state")
        return AttemptState(decision, self.outcomes[decision_id], self.kernels[decision_id])

    @property
    def incumbent_attempt(self) -> AttemptState | None:
        incumbent = self.incumbent
        return self.attempt(incumbent.id) if incumbent is not None else None

    @property
    def latest_attempt(self) -> AttemptState | None:
        last = self.last
        return self.attempt(last.id) if last is not None else None

    def outcome(self, decision_id: str) -> OutcomeNodeRecord:
        return self.outcomes[decision_id]

    @property
    def history(self) -> tuple[AttemptState, ...]:
        """Every attempt of the run in step order: the decisions, with their outcomes and kernels only when the
        state was read with ``history_code`` (the passive policy; otherwise both are None)."""
        if not self.history_code:
            return tuple(AttemptState(d, None, None) for d in self.decisions)
        return tuple(AttemptState(d, self.outcomes.get(d.id), self.kernels.get(d.id)) for d in self.decisions)
