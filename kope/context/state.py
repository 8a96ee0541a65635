"""Building the inputs of assembly from a task and a step's state, then assembling.

``build_context(...)`` is what ``kope context`` and the optimization loop call.
The hot tier (incumbent with its outcome and kernel, the latest feedback, the
step) comes from the run's ``StepState``: the loop hands over the one it read
for the step; with only a ``run_id``, it is read here (one read transaction).
Experience comes from a ``Retriever`` (the memory's ranked retrieval), unless
memory is off; knowledge documents are selected for the target, family, layer
and hardware; then the assembler packs the prompt for the policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kope.boundary import FAMILIES, LAYERS, UNKNOWN_FAMILY, Hardware, TaskView
from kope.context.assemble import AssembledContext, ContextAssembler
from kope.context.budget import Budget
from kope.context.hot import HotState
from kope.context.items import HistoryEntry
from kope.context.knowledge import KnowledgeDoc, load_knowledge, select_knowledge
from kope.memory.outcome import parse_hardware
from kope.memory.protocol import ContextMemory
from kope.memory.records import OutcomeNodeRecord
from kope.memory.retrieval import RetrievalQuery, RetrievalResult
from kope.memory.state import AttemptState, StepState

__all__ = ["TaskView", "build_context", "history_entries"]


def history_entries(state: StepState) -> list[HistoryEntry]:
    """Every attempt of the run, oldest first (code only when the state was read with every kernel)."""
    entries = []
    for d in state.decisions:
        entries.append(
            HistoryEntry(
                id=d.id,
                step=d.step,
                title=d.title,
                layer=d.layer,
                status=d.status,
                label=d.label,
                r=d.r,
                speedup=d.a,
                thought=d.thought,
                code=state.kernels.get(d.id) if state.history_code else None,
                outcome=state.outcomes.get(d.id) if state.history_code else None,
            )
        )
    return sorted(entries, key=lambda e: e.step)


def build_context(
    task: TaskView,
    *,
    target: str,
    hardware: Hardware | Mapping[str, Any],
    budget: Budget,
    policy: str = "active",
    graph: ContextMemory | None = None,
    run_id: str | None = None,
    state: StepState | None = None,
    start: AttemptState | None = None,
    model: str | None = None,
    encoding_fallback: str = "cl100k_base",
    k: int = 8,
    step: int | None = None,
    latest_note: str | None = None,
    exclude: Sequence[str] = (),
    use_memory: bool = True,
) -> tuple[AssembledContext, RetrievalResult | None]:
    """(assembled context, retrieval result or None).

    ``graph`` is where experience is retrieved from (and, given only ``run_id``, where the run's state is
    read); ``state`` is the step's state when the caller read it already (the loop). ``start`` replaces the
    incumbent in the hot tier when the step starts elsewhere (a backtrack, or a repair before there is an
    incumbent). ``use_memory=False`` still shows the run itself but retrieves no experience (the
    ``--no-memory`` ablation)."""
    hw = hardware if isinstance(hardware, Hardware) else parse_hardware(hardware)
    if state is None and graph is not None and run_id is not None:
        state = graph.step_state(run_id, history_code=policy == "passive")
    incumbent_id: str | None = None
    incumbent_code: str | None = None
    incumbent_outcome: OutcomeNodeRecord | None = None
    latest_title: str | None = None
    latest_outcome: OutcomeNodeRecord | None = None
    history: list[HistoryEntry] = []
    next_step = step if step is not None else 0
    layer = error_kind = None
    if state is not None:
        next_step = step if step is not None else state.next_step
        incumbent = state.incumbent_attempt
        if incumbent is not None:
            incumbent_id, incumbent_code, incumbent_outcome = incumbent.id, incumbent.code, incumbent.outcome
            layer = incumbent.decision.layer
        if state.last is not None:
            latest_title = state.last.title
            latest_outcome = state.outcome(state.last.id)
            error_kind = state.last.error_kind
        history = history_entries(state)
    if start is not None:
        incumbent_id, incumbent_code, incumbent_outcome = start.id, start.code, start.outcome
    hot = HotState(
        operator=task.operator,
        family=task.family if task.family_source == "file" else f"{task.family}, inferred from the traced structure",
        target=target,
        reference_source=task.source,
        cases=task.cases,
        hardware=hw,
        level=task.level,
        description=task.description,
        step=next_step,
        incumbent_id=incumbent_id,
        incumbent_code=incumbent_code,
        incumbent_outcome=incumbent_outcome,
        latest_title=latest_title,
        latest_outcome=latest_outcome,
        latest_note=latest_note,
    )
    retrieval = None
    knowledge: list[tuple[KnowledgeDoc, float]] = []
    if policy == "active":
        if graph is not None and use_memory:
            query = RetrievalQuery(
                operator=task.operator,
                family=task.family,
                target=target,
                hardware_id=hw.id,
                hardware_class=hw.class_,
                vendor=hw.vendor,
                layer=layer,
                error_kind=error_kind,
                exclude=tuple(exclude) + ((incumbent_id,) if incumbent_id else ()),
            )
            retrieval = graph.retrieve(query, k=k)
        family = task.family if task.family in FAMILIES else UNKNOWN_FAMILY
        knowledge = select_knowledge(
            load_knowledge(),
            target,
            family,
            layer=layer if layer in LAYERS else None,
            hardware_class=hw.class_,
        )
    assembler = ContextAssembler(budget, model=model, encoding_fallback=encoding_fallback)
    context = assembler.assemble(hot, policy=policy, retrieval=retrieval, knowledge=knowledge, history=history)
    return context, retrieval
