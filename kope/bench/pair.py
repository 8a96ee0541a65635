"""One (configuration, operator) pair: run the optimization loop, then read every attempt back from the graph.

The per-case results the metrics use are read from the Experience Graph (each
decision's Outcome), not from the loop's in-memory summary, so what the bench
reports is exactly what the memory holds.

After the run, the pair's best kernel gets its final evaluation
(``kope.bench.final``: fresh workers, more seeds, a longer timing budget,
visible and held-out cases); the bench reports those numbers.

Resume: when the pair was started before (its run id is in
``pairs/<config>/<operator>.run.json``) and the graph holds that run, the loop
continues it from its last recorded step (the step that was in flight when
the bench stopped is redone); when the graph lacks it, the pair starts over.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kope.boundary import TaskError, load_task_view
from kope.config import KopeConfig
from kope.errors import KopeError
from kope.memory import Memory, open_memory

if TYPE_CHECKING:
    from kope.evaluators import Evaluator

Progress = Callable[[str, Any], None]


@dataclass(frozen=True)
class PairSpec:
    """Everything a process needs to run one pair (JSON-serialisable, for worker processes)."""

    config: str
    operator: str
    index: int
    task_path: str
    cases: str | None
    namespace: str
    policy: str
    memory: bool
    target: str
    proposer: str
    steps: int
    runs_dir: str
    resume_run_id: str | None = None
    final: dict[str, Any] | None = None  # FinalSettings as a dict; None: no final evaluation
    repeat: int = 1  # which repeat of the bench (1-based)
    seed: int = 0  # the proposer's seed
    evaluator: str = "local"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def memory_size(memory: Memory) -> dict[str, int]:
    stats = memory.stats()
    return {
        "nodes": sum(stats.nodes.values()),
        "decisions": stats.nodes.get("Decision", 0),
        "relationships": sum(stats.relationships.values()),
    }


def collect_attempts(memory: Memory, run_id: str) -> list[dict[str, Any]]:
    """Every attempt of the run as the graph holds it, with its outcome's per-case results and the insights
    its prompt used (two reads)."""
    state = memory.step_state(run_id)
    used = memory.insights_used(run_id)
    attempts = []
    for d in state.decisions:
        outcome = state.outcome(d.id)
        attempts.append(
            {
                "step": d.step,
                "decision_id": d.id,
                "parent_id": d.parent_id,
                "title": d.title,
                "layer": d.layer,
                "status": outcome.status,
                "error_kind": outcome.error_kind,
                "label": d.label,
                "a": d.a,
                "speedup": outcome.speedup,
                "cases_total": outcome.cases_total,
                "cases_passed": outcome.cases_passed,
                "prompt_tokens": d.prompt_tokens or 0,
                "completion_tokens": d.completion_tokens or 0,
                "tuner": d.params.extension.get("tuner"),
                "cited": list(d.params.cited),
                "insights_used": [dataclasses.asdict(i) for i in used.get(d.id, [])],
                "cases": [
                    {
                        "name": c.name,
                        "passed": c.passed,
                        "speedup": c.speedup,
                        "ref_ms": c.ref_ms,
                        "cand_ms": c.cand_ms,
                        "error": c.error,
                    }
                    for c in outcome.cases
                ],
            }
        )
    return attempts


def run_pair(
    spec: PairSpec,
    config: KopeConfig,
    *,
    on_started: Callable[[str], None],
    progress: Progress,
    evaluator: Evaluator | None = None,
) -> dict[str, Any]:
    """Run one pair to its end and return its result record (see ``store`` for where it goes); candidates are
    evaluated by ``evaluator`` (default: a new one for ``spec.evaluator``, closed at the end)."""
    from kope.agent.loop import LoopOptions, Optimizer
    from kope.agent.runner import make_proposer
    from kope.context.hot import ContextBudgetError
    from kope.evaluators import make_evaluator
    from kope.memory.errors import UnknownRunError

    started_at = time.time()
    began = time.monotonic()
    own_evaluator = evaluator is None
    evaluator = evaluator or make_evaluator(config, spec.evaluator)
    evaluator.prestart(spec.target)  # the pair's first workers boot while its memory and proposer start
    memory = open_memory(config, namespace=spec.namespace)
    try:
        proposer = make_proposer(config, spec.proposer, seed=spec.seed)
        options = LoopOptions(
            target=spec.target,
            steps=spec.steps,
            policy=spec.policy,
            memory=spec.memory,
            cases=spec.cases,
            out_dir=Path(spec.runs_dir),
            evaluations_after=bool(spec.final and spec.final.get("enabled")),
            deployed=False,  # a bench measures as deployed in its final evaluation (kope.bench.final), not here
        )
        resume = spec.resume_run_id
        if resume is not None:
            try:
                memory.run(resume)
            except UnknownRunError:
                resume = None  # started but never reached the graph: start over
        run_id: list[str] = []

        def event(kind: str, data: Any) -> None:
            if kind == "run":
                run_id.append(data["run_id"])
                on_started(data["run_id"])
            progress(kind, data)

        view, path = load_task_view(spec.task_path)
        optimizer = Optimizer(config, memory, proposer, options, event, evaluator)
        error = None
        status = stop_reason = None
        resumed_at = None
        try:
            summary = optimizer.run(view, path, resume=resume)
            status, stop_reason, resumed_at = summary.status, summary.stop_reason, summary.resumed_at
        except KopeError as exc:
            # the harness refused the task or target, or the task's hot context cannot fit the budget: this pair's
            # own failure, recorded as such (anything else, e.g. the graph unreachable, stops the bench for --resume)
            if not (run_id and isinstance(exc, (TaskError, ContextBudgetError))):
                raise
            error = exc.message
            status, stop_reason = "error", exc.message
        attempts = collect_attempts(memory, run_id[0])
        final = None
        if spec.final and spec.final.get("enabled") and error is None:
            from kope.bench.final import FinalSettings, deployed_figures, final_evaluation

            progress("final-start", {"config": spec.config, "operator": spec.operator})
            final = final_evaluation(
                memory=memory,
                attempts=attempts,
                cases=spec.cases,
                task_path=spec.task_path,
                target=spec.target,
                settings=FinalSettings(**spec.final),
                folder=Path(spec.runs_dir) / spec.operator / "final",
            )
            figures = deployed_figures(final, run_id[0])
            if figures is not None:  # the visible cases' as-deployed figures onto the best attempt's Outcome
                memory.record_deployed(figures)
        return {
            "config": spec.config,
            "operator": spec.operator,
            "repeat": spec.repeat,
            "seed": spec.seed,
            "index": spec.index,
            "namespace": spec.namespace,
            "run_id": run_id[0],
            "status": status,
            "stop_reason": stop_reason,
            "error": error,
            "resumed_from": spec.resume_run_id if resume else None,
            "resumed_at": resumed_at,
            "started_at": started_at,
            "ended_at": time.time(),
            "seconds": round(time.monotonic() - began, 3),
            "attempts": attempts,
            "final": final,
            "prompt_tokens": sum(a["prompt_tokens"] for a in attempts),
            "completion_tokens": sum(a["completion_tokens"] for a in attempts),
            "memory_after": memory_size(memory),
        }
    finally:
        memory.close()
        if own_evaluator:
            evaluator.close()
