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
from kope.context.knowledge import load_knowledge, select_knowledge
from kope.memory.outcome import parse_hardware
from kope.memory.protocol import ContextMemory
from kope.memory.retrieval import RetrievalQuery, RetrievalResult
from kope.memory.specs import KnowledgeDoc
from kope.memory.state import AttemptState, StepState

__all__ = ["TaskView", "build_context"]


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
    cases: Sequence[Mapping[str, Any]] | None = None,
    text_search: bool = False,
) -> tuple[AssembledContext, RetrievalResult | None]:
    """(assembled context, retrieval result or None).

    ``graph`` is where experience is retrieved from (and, given only ``run_id``, where the run's state is
    read); ``state`` is the step's state when the caller read it already (the loop). ``start`` replaces the
    incumbent in the hot tier when the step starts elsewhere (a backtrack, or a repair before there is an
    incumbent). ``use_memory=False`` still shows the run itself but retrieves no experience (the
    ``--no-memory`` ablation). ``cases``: the cases the run evaluates (their shapes rank the experience;
    default all of the task's); ``text_search``: also match the objective and latest feedback against
    recorded titles, thoughts and errors (the LLM path)."""
    hw = hardware if isinstance(hardware, Hardware) else parse_hardware(hardware)
    if state is None and graph is not None and run_id is not None:
        state = graph.step_state(run_id, history_code=policy == "passive")
    incumbent: AttemptState | None = None
    latest: AttemptState | None = None
    history: tuple[AttemptState, ...] = ()
    next_step = step if step is not None else 0
    layer = error_kind = None
    if state is not None:
        next_step = step if step is not None else state.next_step
        incumbent = state.incumbent_attempt
        if incumbent is not None:
            layer = incumbent.decision.layer
        latest = state.latest_attempt
        if latest is not None:
            error_kind = latest.decision.error_kind
        history = state.history
    if start is not None:
        incumbent = start
    latest_title = latest.decision.title if latest is not None else None
    latest_excerpt = latest.outcome.error_excerpt if latest is not None and latest.outcome is not None else None
    incumbent_id = incumbent.id if incumbent is not None else None
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
        incumbent=incumbent,
        latest=latest,
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
                text=_search_text(task, latest_title, error_kind, latest_excerpt, latest_note) if text_search else None,
            ).with_cases(cases if cases is not None else task.cases)
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


def _search_text(
    task: TaskView, title: str | None, error_kind: str | None, excerpt: str | None, note: str | None
) -> str:
    """The objective and the latest feedback, as words for the full-text stage of retrieval."""
    parts = [f"{task.operator} {task.family} faster kernel", title or "", error_kind or "", note or ""]
    if excerpt:
        parts.append(" ".join(excerpt.splitlines()[:12]))
    return " ".join(parts).replace(":", " ")
