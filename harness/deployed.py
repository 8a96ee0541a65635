"""As deployed: a run's best kernel timed again the way a user runs the exported ``best.py``.

``measure_deployed`` re-times the cases an evaluation timed, with the same timing loop, in fresh sandboxed workers
that force none of the harness's performance settings (``EvalOptions.deployed``; docs/harness.md, "As deployed").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness.errors import HarnessError
from harness.eval_setup import EvalOptions
from harness.evaluate import evaluate
from harness.record import Outcome, Status, excerpt, geometric_mean
from harness.task import Task


def deployed_options(outcome: Outcome, options: EvalOptions | None = None) -> EvalOptions | None:
    """The options of the as-deployed evaluation of ``outcome``'s timed cases (None: it timed none): fresh
    sandboxed workers, the user's own performance settings (``EvalOptions.deployed``), the same budget."""
    timed = [c.index for c in outcome.cases if c.passed and c.speedup is not None]
    if not timed:
        return None
    return replace(
        options or EvalOptions(),
        deployed=True,
        cases=timed,
        case_set="all",
        threads=None,  # torch's default in the worker; the parent's CPU-time bound is every core it may use
        seeds=1,  # correctness was judged by ``outcome``; every timed output is still compared
        time_incorrect=True,
        warm_pool=False,
        refill_pool=False,
        reuse_reference=False,
    )


def measure_deployed(
    task: str | Path | Task, candidate: str | Path, outcome: Outcome, options: EvalOptions | None = None
) -> Outcome:
    """``outcome`` (the harness's evaluation of ``candidate``) with the as-deployed figures added.

    docs/harness.md, "Module notes".
    """
    deployed_opts = deployed_options(outcome, options)
    if deployed_opts is None:
        return outcome
    try:
        deployed = evaluate(task, candidate, deployed_opts)
    except HarnessError as exc:
        return replace(outcome, deployed_error=f"the as-deployed measurement failed: {exc}")
    by_index = {c.index: c for c in deployed.cases}
    cases = []
    for case in outcome.cases:
        found = by_index.get(case.index)
        speedup = found.speedup if found is not None and found.passed else None
        cases.append(replace(case, deployed_speedup=speedup))
    error = None if deployed.ok else excerpt(f"{deployed.error_kind}: {deployed.error_excerpt or ''}")
    if deployed.status not in (Status.CORRECT, Status.INCORRECT):  # flagged or failed: no figure from it counts
        cases = [replace(c, deployed_speedup=None) for c in cases]
    return replace(
        outcome,
        cases=cases,
        deployed_speedup=geometric_mean([c.deployed_speedup for c in cases]),
        deployed_error=error,
    )
