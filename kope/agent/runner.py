"""Running the loop over one or several tasks (memory carries across them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kope.agent.loop import LoopOptions, Optimizer, Progress, RunSummary
from kope.agent.proposal import Proposer
from kope.config import KopeConfig
from kope.errors import UsageError
from kope.targets import harness_error, load_task_view


def make_proposer(config: KopeConfig, name: str | None) -> Proposer:
    """``llm`` / ``offline``; by default the LLM when one is configured, else offline."""
    from kope.agent.llm_proposer import LLMProposer
    from kope.agent.offline import OfflineProposer

    if name is None:
        name = "llm" if config.llm.configured else "offline"
    if name == "llm":
        return LLMProposer.from_config(config)
    if name == "offline":
        return OfflineProposer()
    raise UsageError(f"unknown proposer {name!r} (llm or offline)")


def suite_tasks(levels: Sequence[int] = (), family: str | None = None, limit: int | None = None) -> list[str]:
    from harness.errors import HarnessError
    from harness.suite import list_tasks

    try:
        tasks = list_tasks(family)
    except HarnessError as exc:
        raise harness_error(exc) from None
    names = [t.operator for t in tasks if not levels or t.level in levels]
    if limit is not None:
        names = names[:limit]
    if not names:
        raise UsageError("no built-in task matches that level/family selection")
    return names


def optimize_tasks(
    config: KopeConfig,
    proposer: Proposer,
    options: LoopOptions,
    tasks: Sequence[str],
    *,
    resume: str | None = None,
    progress: Progress | None = None,
    graph: Any = None,
    evaluator: Any = None,
) -> list[RunSummary]:
    """Optimize each task in order with one Experience Graph, so later tasks see earlier ones' experience;
    candidates are evaluated by ``evaluator`` (``kope.evaluators``; default local)."""
    from kope.memory.connect import open_memory

    own = graph is None
    graph = graph or open_memory(config)
    try:
        optimizer = Optimizer(config, graph, proposer, options, progress or (lambda *_: None), evaluator)
        summaries = []
        for name in tasks:
            view, path = load_task_view(name)
            summaries.append(optimizer.run(view, path, resume=resume))
        return summaries
    finally:
        if own:
            graph.close()
