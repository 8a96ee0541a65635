"""Where a candidate is evaluated: on this machine, on worker services, or on a Ray cluster.

Every evaluator takes the same request (a task file, a candidate file, the harness's
``EvalOptions``) and returns the same ``kope.outcome/1`` record (``kope.boundary.Outcome``)
with the hardware of the host that evaluated it:

* ``local`` (``LocalEvaluator``): ``harness.evaluate`` in this process's own workers;
* worker URLs (``kope.evaluators.http.HttpEvaluator``): ``python -m harness serve`` /
  ``kope worker`` on target hosts, over HTTP with the workers' bearer key;
* ``ray`` / ``ray://ADDRESS`` (``kope.evaluators.ray.RayEvaluator``, the optional extra ``kope[ray]``):
  each evaluation a Ray task on a cluster's node, with CPU or GPU resource requests;
* ``replay:DIR`` (``kope.evaluators.replay.ReplayEvaluator``): the outcome recorded for the proposed
  setting in a recorded search space (``kope bench record-space``), nothing compiled or timed; it is
  also a ``RecordedSpace``: the loop asks it which settings exist and marks its outcomes replayed.

Everything from the harness comes through ``kope.boundary``. Problems with the task,
target or options raise ``kope.boundary.TaskError`` (as a local evaluation does); an
evaluation the infrastructure could not carry out (workers unreachable, killed or
quarantined, a cluster fault) raises ``InfrastructureError`` after the evaluator's
retries: it is never an outcome and never the candidate's failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kope.boundary import CaseSelection, Hardware, Outcome, evaluate_local, hardware_for, prestart_workers
from kope.config import KopeConfig
from kope.evaluators.spec import LOCAL, EvaluatorSpec, parse_evaluator

if TYPE_CHECKING:
    from kope.boundary import EvalOptions


class Evaluator(Protocol):
    spec: EvaluatorSpec

    def hardware(self, target: str) -> Hardware:
        """The fingerprint of what ``target`` is evaluated on (the run and the bench are filed under it)."""
        ...

    def evaluate(self, task_path: Path, candidate: Path, options: EvalOptions) -> Outcome:
        """The outcome of ``candidate`` on the task file ``task_path`` with ``options``."""
        ...

    def prestart(self, target: str) -> None:
        """Get ready for evaluations on ``target`` in the background (local: boot this machine's workers)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class RecordedSpace(Protocol):
    """An evaluator that answers from a recorded search space (``replay:DIR``): it says which settings exist,
    answers a proposal by its template setting, and its outcomes are recorded as replayed."""

    replays: bool

    def space(self, task_path: Path, target: str, cases: CaseSelection) -> Mapping[str, frozenset[str]]:
        """Template name -> the recorded settings of the task (``settings_key`` texts); an error when it cannot
        answer this task, target and case selection."""
        ...

    def evaluate_setting(
        self,
        task_path: Path,
        candidate: Path,
        *,
        target: str,
        cases: CaseSelection,
        template: str | None,
        settings: Mapping[str, Any] | None,
    ) -> Outcome: ...


class LocalEvaluator:
    """``harness.evaluate`` on this machine."""

    spec = EvaluatorSpec(LOCAL)

    def hardware(self, target: str) -> Hardware:
        return hardware_for(target)

    def evaluate(self, task_path: Path, candidate: Path, options: EvalOptions) -> Outcome:
        return evaluate_local(task_path, candidate, options)

    def prestart(self, target: str) -> None:
        prestart_workers(target)

    def close(self) -> None:
        pass


def make_evaluator(config: KopeConfig, spec: str | EvaluatorSpec | None = None) -> Evaluator:
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
    if parsed.kind == "replay":
        from kope.evaluators.replay import ReplayEvaluator

        return ReplayEvaluator(parsed)
    if parsed.kind == "ray":
        from kope.evaluators.ray import RayEvaluator

        return RayEvaluator(
            parsed,
            timeout_s=config.evaluator.timeout,
            attempts=config.evaluator.attempts,
            cpus=config.evaluator.ray_cpus,
        )
    return LocalEvaluator()


__all__ = ["Evaluator", "EvaluatorSpec", "LocalEvaluator", "RecordedSpace", "make_evaluator", "parse_evaluator"]
