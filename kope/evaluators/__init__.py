"""Where a candidate is evaluated: on this machine, on worker services, or on a Ray cluster.

Every evaluator takes the same request (a task file, a candidate file, ``EvalOptions``)
and returns the same ``kope.outcome/1`` record (``harness.record.Outcome``) with the
hardware of the host that evaluated it:

* ``local`` (``LocalEvaluator``): ``harness.evaluate`` in this process's own workers;
* worker URLs (``kope.evaluators.http.HttpEvaluator``): ``python -m harness serve`` /
  ``kope worker`` on target hosts, over HTTP with the workers' bearer key;
* ``ray`` / ``ray://ADDRESS``: parsed, but the Ray backend is not in this version (a clear error).

Problems with the task, target or options raise the harness's ``HarnessError`` (as a
local evaluation does); an evaluation the infrastructure could not carry out (workers
unreachable, killed or quarantined, a cluster fault) raises ``InfrastructureError``
after the evaluator's retries: it is never an outcome and never the candidate's failure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from kope.evaluators.spec import LOCAL, EvaluatorSpec, parse_evaluator


class Evaluator(Protocol):
    spec: EvaluatorSpec

    def hardware(self, target: str) -> dict[str, Any]:
        """The fingerprint of what ``target`` is evaluated on (the run and the bench are filed under it)."""
        ...

    def evaluate(self, task_path: Path, candidate: Path, options: Any) -> Any:
        """The ``harness.record.Outcome`` of ``candidate`` on the task file ``task_path`` with ``EvalOptions``."""
        ...

    def close(self) -> None: ...


class LocalEvaluator:
    """``harness.evaluate`` on this machine."""

    spec = EvaluatorSpec(LOCAL)

    def hardware(self, target: str) -> dict[str, Any]:
        from kope.targets import hardware_for

        return hardware_for(target)

    def evaluate(self, task_path: Path, candidate: Path, options: Any) -> Any:
        from harness.evaluate import evaluate

        return evaluate(task_path, candidate, options)

    def close(self) -> None:
        pass


def make_evaluator(config: Any, spec: str | EvaluatorSpec | None = None) -> Evaluator:
    """The evaluator ``spec`` names (default: the configuration's ``evaluator.backend``)."""
    parsed = spec if isinstance(spec, EvaluatorSpec) else parse_evaluator(spec or config.evaluator.backend)
    if parsed.kind == "http":
        from kope.evaluators.http import HttpEvaluator

        return HttpEvaluator(
            parsed,
            config.evaluator.key,
            timeout_s=config.evaluator.timeout,
            attempts=config.evaluator.attempts,
        )
    if parsed.kind == "ray":
        from kope.errors import UsageError

        raise UsageError(
            f"the Ray evaluator ({parsed}) is not part of this version of KOPE yet",
            hint="use worker services (--evaluator http://HOST:PORT[,...], started with `kope worker`) or local",
        )
    return LocalEvaluator()


__all__ = ["Evaluator", "EvaluatorSpec", "LocalEvaluator", "make_evaluator", "parse_evaluator"]
