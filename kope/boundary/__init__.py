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
from kope.boundary.tasks import (
    EXCERPT_LIMIT,
    FAMILIES,
    INFRASTRUCTURE_KINDS,
    LAYERS,
    SCHEMA,
    STATUSES,
    TARGETS,
    UNKNOWN_FAMILY,
    Case,
    CaseResult,
    CaseSelection,
    GpuInfo,
    Hardware,
    KernelTemplate,
    Outcome,
    Status,
    TargetUnavailableError,
    Task,
    TaskError,
    TaskInfo,
    TaskView,
    TimingStats,
    builtin_task_path,
    check_task,
    excerpt,
    find_candidate,
    find_task,
    hardware_for,
    inferred_family,
    is_match,
    level_from_path,
    list_candidates,
    load_task,
    load_task_view,
    read_task_info,
    render_for_task,
    select_cases,
    selected_cases,
    structure_summary,
    suite_tasks,
    task_structure,
    template_for,
    templates_for_target,
    trace_tasks,
    visible_source,
)

if TYPE_CHECKING:
    from kope.boundary.evaluation import EvalOptions as EvalOptions

__all__ = [
    "EXCERPT_LIMIT",
    "FAMILIES",
    "INFRASTRUCTURE_KINDS",
    "LAYERS",
    "SCHEMA",
    "STATUSES",
    "TARGETS",
    "UNKNOWN_FAMILY",
    "Case",
    "CaseResult",
    "CaseSelection",
    "GpuInfo",
    "Hardware",
    "KernelTemplate",
    "Outcome",
    "Status",
    "TargetUnavailableError",
    "Task",
    "TaskError",
    "TaskInfo",
    "TaskView",
    "TimingStats",
    "SandboxReport",
    "check_task",
    "eval_options",
    "evaluate_candidate",
    "evaluate_code",
    "evaluate_local",
    "excerpt",
    "measure_deployed",
    "find_candidate",
    "find_task",
    "hardware_for",
    "harness_version",
    "list_candidates",
    "load_task",
    "load_task_view",
    "read_task_info",
    "native_probe_unavailable",
    "prestart_workers",
    "sandbox_report",
    "sandbox_target_layers",
    "select_cases",
    "selected_cases",
    "serve_worker",
    "suite_tasks",
    "template_for",
    "builtin_task_path",
    "inferred_family",
    "is_match",
    "level_from_path",
    "cluster_tasks",
    "remote_error",
    "remote_request",
    "render_for_task",
    "structure_summary",
    "task_structure",
    "templates_for_target",
    "timing_budget",
    "trace_tasks",
    "visible_source",
]
