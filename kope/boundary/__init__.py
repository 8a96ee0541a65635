"""KOPE's one boundary with the harness (``harness/``, the target side), in two modules: ``tasks`` (tasks,
templates, structure matching, hardware, the record and vocabulary, the error translation) and
``evaluation`` (evaluating a candidate here, on worker services and as deployed; the sandbox report).

Everything KOPE needs from the harness goes through this package: loading tasks
(built-in names or KernelBench files), the suite's candidates and kernel
templates, evaluating a candidate, the hardware fingerprint, and the harness's
typed record and vocabulary, re-exported as they are (``Outcome`` and its
parts are defined once, in ``harness.record``; families, layers, statuses and
targets once, in ``harness.vocabulary``).

The harness's errors become KOPE errors here and nowhere else: ``TaskError``
(exit 2) when the harness refuses a task, a candidate path or an option, and
its subclass ``TargetUnavailableError`` (exit 3) when this machine cannot run
the target. Callers test ``isinstance(exc, TaskError)``; a problem *with a
candidate* is never an error but an ``Outcome``.

Task code never runs in this process: ``load_task`` (and so ``load_task_view``)
imports a task file in a worker process under a timeout (``harness.task_loader``).
Held-out cases (``HELDOUT_CASES``) stay out of everything a proposer or a listing
sees: ``TaskView.source`` and ``visible_source`` drop them; only an evaluation
with ``case_set="all"`` or ``"heldout"`` (a final evaluation) runs them.

Only the light harness modules (record, vocabulary, errors, the task and
template types) are imported at module level; the rest (the suite scan,
evaluation, hardware probing, which import torch) when a function needs them,
so ``kope --help`` stays fast.

Evaluation elsewhere (``kope.evaluators``) comes through here too: the wire form of a
remote evaluation (``remote_request``, ``remote_error``), the infrastructure fault
kinds, and the worker service ``kope worker`` runs (``serve_worker``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kope.boundary import tasks
from kope.boundary.evaluation import (
    SandboxReport,
    cluster_tasks,
    eval_options,
    evaluate_candidate,
    evaluate_code,
    evaluate_local,
    harness_version,
    measure_deployed,
    native_probe_unavailable,
    prestart_workers,
    remote_error,
    remote_request,
    sandbox_report,
    sandbox_target_layers,
    serve_worker,
    timing_budget,
)
from kope.boundary.tasks import *  # noqa: F403  (the names in its __all__, listed once there)

if TYPE_CHECKING:
    from kope.boundary.evaluation import EvalOptions as EvalOptions

__all__ = [
    "SandboxReport",
    "cluster_tasks",
    "eval_options",
    "evaluate_candidate",
    "evaluate_code",
    "evaluate_local",
    "harness_version",
    "measure_deployed",
    "native_probe_unavailable",
    "prestart_workers",
    "remote_error",
    "remote_request",
    "sandbox_report",
    "sandbox_target_layers",
    "serve_worker",
    "timing_budget",
]
__all__ += tasks.__all__
