"""Building the inputs of assembly from a task file and the Experience Graph.

``build_context(...)`` is what ``kope context`` and the optimization loop call:
it loads the task (harness), reads the run's incumbent, latest attempt and
history from the graph when a run is given, retrieves ranked experience,
selects knowledge documents, and assembles the prompt for a policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kope.context.assemble import AssembledContext, ContextAssembler
from kope.context.budget import Budget
from kope.context.hot import HotState
from kope.context.items import HistoryEntry
from kope.context.knowledge import load_knowledge, select_knowledge


@dataclass(frozen=True)
class TaskView:
    """What the context needs of a task (from harness.task.TaskInfo)."""

    operator: str
    family: str
    level: int | None
    description: str
    source: str
    cases: tuple[Mapping[str, Any], ...]

    @classmethod
    def from_info(cls, info: Any) -> TaskView:
        cases = tuple({"name": c.name, **dict(c.params)} for c in info.cases)
        return cls(info.operator, info.family, info.level, info.description or "", info.path.read_text(), cases)


def history_from_graph(graph: Any, run_id: str, *, with_code: bool) -> list[HistoryEntry]:
    """Every attempt of a run, oldest first (code and outcome only when ``with_code``)."""
    state = graph.run_state(run_id)
    entries = []
    for d in state.decisions:
        outcome = code = None
        if with_code:
            record = graph.outcome(d.id)
            outcome = {
                "status": record.status,
                "error_kind": record.error_kind,
                "error_excerpt": record.error_excerpt,
                "cases_total": record.cases_total,
                "cases_passed": record.cases_passed,
                "speedup": record.speedup,
            }
            code = graph.kernel_source(d.id)
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
                code=code,
                outcome=outcome,
            )
        )
    return sorted(entries, key=lambda e: e.step)


def outcome_dict(graph: Any, decision_id: str) -> dict[str, Any]:
    record = graph.outcome(decision_id)
    return {
        "status": record.status,
        "error_kind": record.error_kind,
        "error_excerpt": record.error_excerpt,
        "cases_total": record.cases_total,
        "cases_passed": record.cases_passed,
        "speedup": record.speedup,
        "timings_valid": record.timings_valid,
        "cases": record.cases,
    }


def build_context(
    task: TaskView,
    *,
    target: str,
    hardware: Mapping[str, Any],
    budget: Budget,
    policy: str = "active",
    graph: Any | None = None,
    run_id: str | None = None,
    model: str | None = None,
    encoding_fallback: str = "cl100k_base",
    k: int = 8,
    step: int | None = None,
    latest_note: str | None = None,
    incumbent_override: tuple[str | None, str | None, Mapping[str, Any] | None] | None = None,
    exclude: Sequence[str] = (),
    use_memory: bool = True,
    cases: Sequence[Mapping[str, Any]] | None = None,
    text_search: bool = False,
) -> tuple[AssembledContext, Any]:
    """(assembled context, retrieval result or None).

    With a ``run_id`` the hot tier (incumbent, latest feedback, step) comes from
    the run in the graph; ``use_memory=False`` still reads the run itself but
    retrieves no experience (the ``--no-memory`` ablation). ``cases``: the cases
    the run evaluates (their shapes rank the experience; default all of the
    task's); ``text_search``: also match the objective and latest feedback
    against recorded titles, thoughts and errors (the LLM path)."""
    from kope.memory import RetrievalQuery

    incumbent_id: str | None = None
    incumbent_code: str | None = None
    incumbent_outcome: Mapping[str, Any] | None = None
    latest_title = latest_outcome = None
    latest_excerpt = None
    history: list[HistoryEntry] = []
    next_step = step if step is not None else 0
    layer = error_kind = None
    if graph is not None and run_id is not None:
        state = graph.run_state(run_id)
        next_step = step if step is not None else state.next_step
        if state.incumbent is not None:
            incumbent_id = state.incumbent.id
            incumbent_code = graph.kernel_source(incumbent_id)
            incumbent_outcome = outcome_dict(graph, incumbent_id)
            layer = state.incumbent.layer
        if state.last is not None:
            latest_title = state.last.title
            latest_outcome = outcome_dict(graph, state.last.id)
            error_kind = state.last.error_kind
            latest_excerpt = latest_outcome.get("error_excerpt")
        history = history_from_graph(graph, run_id, with_code=policy == "passive")
    if incumbent_override is not None:
        incumbent_id, incumbent_code, incumbent_outcome = incumbent_override
    hot = HotState(
        operator=task.operator,
        family=task.family,
        target=target,
        reference_source=task.source,
        cases=task.cases,
        hardware=hardware,
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
    knowledge: list = []
    if policy == "active":
        if graph is not None and use_memory:
            query = RetrievalQuery(
                operator=task.operator,
                family=task.family,
                target=target,
                hardware_id=hardware.get("id"),
                hardware_class=hardware.get("class"),
                vendor=hardware.get("vendor"),
                layer=layer,
                error_kind=error_kind,
                exclude=tuple(exclude) + ((incumbent_id,) if incumbent_id else ()),
                text=_search_text(task, latest_title, error_kind, latest_excerpt, latest_note) if text_search else None,
            ).with_cases(cases if cases is not None else task.cases)
            retrieval = graph.retrieve(query, k=k)
        family = task.family if task.family in _families() else "unknown"
        knowledge = select_knowledge(
            load_knowledge(), target, family, layer=_layer(layer), hardware_class=hardware.get("class")
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


def _families() -> tuple[str, ...]:
    from kope.context.knowledge import FAMILIES

    return FAMILIES


def _layer(layer: str | None) -> str | None:
    from kope.context.knowledge import LAYERS

    return layer if layer in LAYERS else None
