"""Running the loop over one or several tasks (memory carries across them)."""

from __future__ import annotations

from collections.abc import Sequence

from kope.agent import PROPOSERS
from kope.agent.loop import LoopOptions, Optimizer, Progress, RunSummary
from kope.agent.proposal import Proposer
from kope.boundary import load_task_view
from kope.boundary import suite_tasks as builtin_tasks
from kope.config import KopeConfig
from kope.errors import UsageError
from kope.evaluators import Evaluator
from kope.memory import Memory, open_memory


def make_proposer(config: KopeConfig, name: str | None, *, seed: int = 0) -> Proposer:
    """``llm`` / ``offline``; by default the LLM when one is configured, else offline. ``seed``: the offline
    proposer's (its random forests and initial design); an LLM samples on its own."""
    from kope.agent.llm_proposer import LLMProposer
    from kope.agent.offline import OfflineProposer

    if name is None:
        name = "llm" if config.llm.configured else "offline"
    if name == "llm":
        return LLMProposer.from_config(config)
    if name == "offline":
        return OfflineProposer(seed=seed)
    raise UsageError(f"unknown proposer {name!r} ({' or '.join(PROPOSERS)})")


def suite_tasks(levels: Sequence[int] = (), family: str | None = None, limit: int | None = None) -> list[str]:
    names = [t.operator for t in builtin_tasks(family) if not levels or t.level in levels]
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
    memory: Memory | None = None,
    evaluator: Evaluator | None = None,
) -> list[RunSummary]:
    """Optimize each task in order with one memory, so later tasks see earlier ones' experience;
    candidates are evaluated by ``evaluator`` (``kope.evaluators``; default local)."""
    own = memory is None
    memory = memory or open_memory(config)
    try:
        optimizer = Optimizer(config, memory, proposer, options, progress or (lambda *_: None), evaluator)
        summaries = []
        for name in tasks:
            view, path = load_task_view(name)
            summaries.append(optimizer.run(view, path, resume=resume))
        return summaries
    finally:
        if own:
            memory.close()
