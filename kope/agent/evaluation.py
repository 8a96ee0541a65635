"""The loop's boundary to the harness: candidate file in, ``kope.outcome/1`` dict out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kope.context.protocol import FormatProblem
from kope.evaluators import Evaluator, LocalEvaluator
from kope.targets import harness_error


def evaluate_code(
    task_path: Path,
    code: str,
    path: Path,
    *,
    target: str,
    cases: Any = None,
    timing: bool = True,
    evaluator: Evaluator | None = None,
) -> dict[str, Any]:
    """Write ``code`` to ``path`` and evaluate it on ``target`` (with ``evaluator``, default local); problems with
    the candidate are outcomes, an infrastructure fault is ``InfrastructureError`` (never an outcome)."""
    from harness.errors import HarnessError
    from harness.evaluate import EvalOptions

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code, encoding="utf-8")
    try:
        outcome = (evaluator or LocalEvaluator()).evaluate(
            task_path, path, EvalOptions(target=target, cases=cases, timing=timing)
        )
    except HarnessError as exc:
        raise harness_error(exc) from None
    return outcome.to_dict()


def format_error_outcome(
    problem: FormatProblem,
    *,
    operator: str,
    family: str,
    level: int | None,
    target: str,
    hardware: Mapping[str, Any],
    cases: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The outcome of a response with no usable candidate: recorded like any failure."""
    return {
        "schema": "kope.outcome/1",
        "status": "format_error",
        "task": operator,
        "family": family,
        "level": level,
        "target": target,
        "cases_total": len(cases) or 1,
        "cases_passed": 0,
        "speedup": None,
        "error_kind": problem.error_kind,
        "error_excerpt": problem.message,
        "compile_time_s": None,
        "timings_valid": False,
        "threads": None,
        "duration_s": 0.0,
        "hardware": dict(hardware),
        "cases": [
            {
                "index": i,
                "name": str(c.get("name", i)),
                "params": {k: v for k, v in c.items() if k != "name"},
                "passed": False,
                "error": problem.message,
                "ref_ms": None,
                "cand_ms": None,
                "speedup": None,
            }
            for i, c in enumerate(cases)
        ],
    }
