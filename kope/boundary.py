"""KOPE's one boundary with the harness (``harness/``, the target side).

Everything KOPE needs from the harness goes through this module: loading tasks
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

import functools
import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.errors import TargetUnavailableError as _HarnessTargetUnavailable
from harness.record import EXCERPT_LIMIT, SCHEMA, CaseResult, GpuInfo, Hardware, Outcome, TimingStats, excerpt
from harness.suite.kernel_templates import KernelTemplate
from harness.task import Case, Task, TaskInfo, visible_source
from harness.vocabulary import FAMILIES, INFRASTRUCTURE_KINDS, LAYERS, STATUSES, TARGETS, UNKNOWN_FAMILY, Status
from kope.errors import ToolMissingError, UsageError

if TYPE_CHECKING:
    from harness.evaluate import EvalOptions as EvalOptions
    from harness.task_check import CaseCheck
    from harness.timing import Budget
    from kope.evaluators import Evaluator

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
    "trace_tasks",
    "visible_source",
]

# The harness's case selection: indices, ranges ("0-3") and names, as text or a list; None: every case.
CaseSelection = str | list[int | str] | tuple[int | str, ...] | None


class TaskError(UsageError):
    """The harness refused a task, a candidate file or an option (nothing was evaluated)."""


class TargetUnavailableError(TaskError, ToolMissingError):
    """This machine cannot run the target (e.g. cuda without a GPU), or the target is unknown."""

    exit_code = 3


def _kope_error(exc: HarnessError) -> TaskError:
    if isinstance(exc, _HarnessTargetUnavailable):
        return TargetUnavailableError(exc.message, hint=exc.hint)
    return TaskError(exc.message, hint=exc.hint)


@contextmanager
def _translated() -> Iterator[None]:
    """The harness's typed errors as KOPE's (the only place they are translated)."""
    try:
        yield
    except HarnessError as exc:
        raise _kope_error(exc) from exc


# -- tasks ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskView:
    """A task as KOPE's context and loop read it (from the harness's ``TaskInfo``)."""

    operator: str
    family: str
    level: int | None
    description: str
    source: str  # the task file's text without its held-out cases (the reference the prompt shows)
    cases: tuple[Mapping[str, Any], ...]  # each case: its name and parameter overrides
    path: str = ""  # the task file
    family_source: str = "file"  # "file": the task's FAMILY; "structure": inferred from its traced structure

    @classmethod
    def from_info(cls, info: TaskInfo, *, family: str | None = None) -> TaskView:
        """The view of a task; ``family`` (inferred from the structure) replaces a FAMILY the file does not set."""
        cases = tuple({"name": c.name, **dict(c.params)} for c in info.cases)
        inferred = family is not None and info.family == UNKNOWN_FAMILY
        return cls(
            info.operator,
            str(family if inferred else info.family),
            info.level,
            info.description or "",
            visible_source(info.path.read_text()),  # held-out cases never reach a prompt
            cases,
            str(info.path),
            "structure" if inferred else "file",
        )

    def case_params(self) -> list[tuple[str, dict[str, Any]]]:
        """(name, parameters) per case, as an outcome record lists them."""
        return [(str(c.get("name", i)), {k: v for k, v in c.items() if k != "name"}) for i, c in enumerate(self.cases)]


def find_task(name_or_path: str | Path) -> TaskInfo:
    """A built-in task by operator name, else a task file by path (metadata and cases, not executed)."""
    from harness import suite

    with _translated():
        return suite.find_task(name_or_path)


def load_task(path: str | Path) -> Task:
    """Load and validate a task file; its module is executed in a worker process under a timeout, never here."""
    from harness.task_loader import load_task_isolated

    with _translated():
        return load_task_isolated(path)


def read_task_info(path: str | Path) -> TaskInfo:
    from harness import task_loader

    with _translated():
        return task_loader.read_task_info(path)


def select_cases(info: TaskInfo, selection: CaseSelection, case_set: str = "visible") -> list[Case]:
    """The cases ``selection`` names among ``case_set`` (visible, heldout or all); None: all of them."""
    from harness import task

    with _translated():
        return task.select_cases(info, selection, case_set)


def selected_cases(task: TaskView, selection: CaseSelection) -> tuple[dict[str, Any], ...]:
    """The case dicts (name + parameters) of a ``TaskView`` that a harness case selection picks."""
    cases = [Case(i, str(c["name"]), {k: v for k, v in c.items() if k != "name"}) for i, c in enumerate(task.cases)]
    info = TaskInfo(task.operator, task.family, task.level, task.description, Path(task.operator), cases=cases)
    return tuple(c.as_dict() for c in select_cases(info, selection))


def load_task_view(name_or_path: str | Path) -> tuple[TaskView, Path]:
    """(TaskView, task file) for a built-in operator name or a task file path."""
    info = load_task(find_task(name_or_path).path)
    family = None
    if info.family == UNKNOWN_FAMILY:  # a plain KernelBench file: the family of its traced structure
        family = inferred_family(info.path, info.operator)
    return TaskView.from_info(info, family=family), info.path


def suite_tasks(family: str | None = None) -> list[TaskInfo]:
    """The built-in suite in suite order (family, level, operator), optionally one family."""
    from harness import suite

    with _translated():
        return suite.list_tasks(family)


def list_candidates(target: str = "cpu") -> dict[str, Path]:
    """The suite's hand-written example candidates for ``target``, by operator."""
    from harness import suite

    return suite.list_candidates(target)


def find_candidate(operator: str, target: str = "cpu") -> Path | None:
    from harness import suite

    return suite.find_candidate(operator, target)


def template_for(operator: str, target: str = "cpu") -> KernelTemplate | None:
    """The suite's kernel template serving ``operator`` on ``target`` (None when there is none)."""
    from harness.suite import kernel_templates

    with _translated():
        return kernel_templates.template_for(operator, target)


def check_task(path: str | Path, *, measure: bool = False) -> tuple[Task, list[CaseCheck]]:
    """Validate a task file and run each case's reference once in a fresh process."""
    from harness import task_check

    with _translated():
        return task_check.check_task(path, measure=measure)


# -- evaluation -------------------------------------------------------------------------------------


def evaluate_candidate(
    task: str | Path | Task,
    candidate: str | Path,
    *,
    target: str = "cpu",
    cases: CaseSelection = None,
    case_set: str = "visible",
    seeds: int = 3,
    threads: int | None = None,
    timing: bool = True,
    warmup_ms: float | None = None,
    rep_ms: float | None = None,
    min_reps: int | None = None,
    seed: int | None = None,
    one_shot: bool = False,
    time_incorrect: bool = False,
    fresh_reference: bool = False,
    deployed: bool = False,
) -> Outcome:
    """Compile, check and time ``candidate`` against ``task`` on ``target`` (``kope eval``, the bench's final
    evaluation).

    ``case_set``: the cases ``cases`` selects from (``visible``; ``all`` adds the held-out cases, for a final
    evaluation whose result never reaches a proposer). ``one_shot``: this process evaluates once and exits, so
    no warm worker is booted for a next evaluation and no reference worker is kept. ``time_incorrect``: passing
    cases are timed even when others fail. ``fresh_reference``: the reference worker is not kept for the next
    evaluation. ``deployed``: the timed cases are timed again as deployed (``measure_deployed``) and the outcome
    carries both figures."""
    from harness.evaluate import EvalOptions, evaluate
    from harness.worker_pool import close_pools
    from harness.worker_pool import one_shot as _one_shot

    if one_shot:
        _one_shot()

    with _translated():
        budget = timing_budget(warmup_ms=warmup_ms, rep_ms=rep_ms, min_reps=min_reps)
        options = EvalOptions(
            target=target,
            cases=cases,
            case_set=case_set,
            seeds=seeds,
            threads=threads,
            timing=timing,
            budget=budget,
            seed=seed,
            time_incorrect=time_incorrect,
            reuse_reference=not fresh_reference,
        )
        try:
            outcome = evaluate(task, candidate, options)
            if deployed:
                from harness.deployed import measure_deployed as _measure

                outcome = _measure(task, candidate, outcome, options)
            return outcome
        finally:
            if one_shot:  # nothing stays idle or booting, e.g. a prestarted reference worker the cache made unneeded
                close_pools()


def eval_options(
    *,
    target: str,
    cases: CaseSelection = None,
    timing: bool = True,
    budget: Budget | None = None,
    last: bool = False,
) -> EvalOptions:
    """The harness's evaluation options for ``target``: ``budget`` is the timing budget (``timing_budget``;
    default: the harness's); ``last``: the caller evaluates nothing after this (no warm worker is booted for a
    next evaluation); everything else at its default."""
    from harness.evaluate import EvalOptions

    with _translated():
        return EvalOptions(
            target=target, cases=cases, timing=timing, budget=budget or timing_budget(), refill_pool=not last
        )


def timing_budget(
    *, warmup_ms: float | None = None, rep_ms: float | None = None, min_reps: int | None = None
) -> Budget:
    """The harness's timing budget with the given fields changed (None: the harness's default). Each case's soft
    wall-time limit (``Budget.case_wall_s``) scales with ``rep_ms``: a caller who asks for three times the
    measured time allows three times the wall time too."""
    from harness.timing import Budget

    default = Budget()
    rep = default.rep_ms if rep_ms is None else rep_ms
    return replace(
        default,
        warmup_ms=default.warmup_ms if warmup_ms is None else warmup_ms,
        rep_ms=rep,
        case_wall_s=default.case_wall_s * rep / default.rep_ms,
        min_reps=default.min_reps if min_reps is None else min_reps,
        max_reps=max(default.max_reps, default.min_reps if min_reps is None else min_reps),
    )


def prestart_workers(target: str, threads: int | None = None) -> None:
    """Start booting this machine's workers for the first evaluation on ``target`` now, in the background
    (``harness.eval_setup.prestart``): a command calls this once its arguments are checked, so the workers'
    interpreter and torch imports overlap with its own start-up (imports, the task, the graph)."""

    def start() -> None:
        from harness.eval_setup import prestart

        prestart(target, threads=threads)

    import threading

    threading.Thread(target=start, daemon=True, name="kope-prestart").start()


def evaluate_local(task_path: Path, candidate: Path, options: EvalOptions) -> Outcome:
    """Evaluate ``candidate`` against the task file ``task_path`` in this process's own workers."""
    from harness.evaluate import evaluate

    with _translated():
        return evaluate(task_path, candidate, options)


def measure_deployed(task_path: Path, candidate: Path, outcome: Outcome, options: EvalOptions) -> Outcome:
    """``outcome`` (of ``candidate``, evaluated with ``options``) with the as-deployed figures added: its timed
    cases timed again on this machine with ``candidate`` imported as a user imports the exported ``best.py``, in
    plain processes under the user's own settings (``harness.deployed.measure_deployed``)."""
    from harness.deployed import measure_deployed as _measure

    with _translated():
        return _measure(task_path, candidate, outcome, options)


def evaluate_code(
    task_path: Path,
    code: str,
    path: Path,
    *,
    target: str,
    cases: CaseSelection = None,
    timing: bool = True,
    evaluator: Evaluator | None = None,
    budget: Budget | None = None,
    last: bool = False,
) -> Outcome:
    """Write ``code`` to ``path`` and evaluate it on ``target``: what the optimization loop runs each step,
    on ``evaluator`` (``kope.evaluators``; default: this machine). ``last``: the run's last step (``eval_options``).

    Every problem with the candidate (it does not compile, crashes, is wrong, cheats, ...) is an outcome;
    a task or target the harness refuses raises (``TaskError``), and an evaluation the infrastructure could
    not carry out ``InfrastructureError`` (never an outcome)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code, encoding="utf-8")
    options = eval_options(target=target, cases=cases, timing=timing, budget=budget, last=last)
    if evaluator is None:
        return evaluate_local(task_path, path, options)
    return evaluator.evaluate(task_path, path, options)


# -- evaluation on worker services (kope.evaluators.http, kope worker) ------------------------------


def remote_request(task_path: Path, candidate: Path, options: EvalOptions) -> dict[str, Any]:
    """The wire form (``kope.eval-request/1``) of evaluating ``candidate`` on the task file ``task_path``:
    the two files' sources and the options a client may choose (``TaskError`` for one that cannot be sent)."""
    from harness.remote import request_for

    with _translated():
        return request_for(task_path, candidate, options).to_payload()


def remote_error(data: Mapping[str, Any]) -> TaskError:
    """The error a worker reported for a request it refused (``{"type", "message", "hint"}``), as KOPE's."""
    from harness.remote import error_from_payload

    return _kope_error(error_from_payload(dict(data)))


def cluster_tasks() -> tuple[Callable[[dict[str, Any]], dict[str, Any]], Callable[[str], dict[str, Any]]]:
    """What a cluster (``kope.evaluators.ray``) runs on its nodes: one remote evaluation (a request as above ->
    ``{"outcome"}`` or ``{"error"}``) and a target's hardware fingerprint. Sent by reference: every node has
    the harness installed."""
    from harness.remote import evaluate_on_cluster, hardware_payload

    return evaluate_on_cluster, hardware_payload


def serve_worker(argv: Sequence[str], prog: str) -> int:
    """Run the evaluation worker service (``python -m harness serve``) with ``argv``; its exit code."""
    from harness.serve.cli import main

    return main(list(argv), prog=prog)


@dataclass(frozen=True)
class SandboxReport:
    """What ``kope doctor`` says about the OS sandbox candidates run in (``harness.sandbox``)."""

    available: bool
    opted_out: bool
    reason: str | None
    layers: dict[str, str]
    env: str


def sandbox_report() -> SandboxReport:
    """Which sandbox layers work on this machine and whether the user switched the sandbox off."""
    from harness import settings
    from harness.sandbox import opted_out, sandbox_status

    status = sandbox_status()
    return SandboxReport(
        available=status.available,
        opted_out=opted_out(),
        reason=status.reason,
        layers=dict(status.layers),
        env=settings.SANDBOX,
    )


def native_probe_unavailable() -> str | None:
    """Why the harness's native probe (perf events) cannot sample here, or None when it can."""
    from harness.native_probe import unavailable_reason

    return unavailable_reason()


def sandbox_target_layers() -> dict[str, dict[str, str]]:
    """Per target (cpu, cuda, triton on a GPU): each sandbox layer under the target's profile
    (``harness.sandbox.PROFILES``) on this machine: "holds ...", how the profile opens it, or why it does not hold here."""
    from harness.sandbox import PROFILES, sandbox_status
    from harness.targets import get_target

    status = sandbox_status()
    targets = {"cpu": get_target("cpu"), "cuda": get_target("cuda"), "triton": get_target("triton", interpret=False)}
    report: dict[str, dict[str, str]] = {}
    for name, target in targets.items():
        layers = PROFILES[target.sandbox_profile()].layers()
        for layer in ("namespaces", "seccomp", "landlock"):
            here = status.layers.get(layer, "not probed")
            if not here.startswith("ok"):
                layers[layer] = f"does not hold on this machine: {here}"
        report[name] = layers
    return report


def harness_version() -> str:
    """The harness's version (what a memory server records as the provenance of an attempt)."""
    from harness import __version__

    return __version__


# -- hardware ---------------------------------------------------------------------------------------


def hardware_for(target: str) -> Hardware:
    """The fingerprint of what ``target`` runs on: the GPU for triton/cuda, else this host's CPU.

    Without a GPU, ``cuda`` is an error; ``triton`` runs in the interpreter on the host (timings not valid),
    so its experience is filed under the host's CPU class."""
    from harness import hardware

    if target in ("triton", "cuda"):
        try:
            return hardware.gpu_fingerprint()
        except Exception as exc:  # torch raises several kinds when no GPU is visible
            if target == "cuda":
                raise ToolMissingError(
                    f"the cuda target needs an NVIDIA GPU, and none is visible ({type(exc).__name__})"
                ) from None
    return hardware.cpu_fingerprint()


# -- structure matching (the offline proposer's choice of template) -----------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=64)
def _cached_structure(path: str, digest: str, operator: str, target: str) -> Any:
    from harness.structure.match import NoMatch, match_task

    try:
        return match_task(path, operator, target)
    except HarnessError as exc:
        return NoMatch(path, digest, [], f"the reference could not be traced: {exc.message}")


def task_structure(path: str | Path, operator: str, target: str = "cpu") -> Any:
    """The structure match of the task at ``path`` (``harness.structure.match.Match`` or ``NoMatch``).

    Traced and matched once per process (the trace itself is cached on disk by the harness, by the
    file's content hash); a reference that cannot be traced is a ``NoMatch`` whose reason says why."""
    p = Path(path).resolve()
    return _cached_structure(str(p), _digest(p), operator, target)


def is_match(structure: Any) -> bool:
    """Whether ``task_structure`` found a template for the task (else it holds the explanation)."""
    from harness.structure.match import Match

    return isinstance(structure, Match)


def inferred_family(path: str | Path, operator: str) -> str | None:
    """The family of the task's matched structure (None when it matches nothing): for files without FAMILY."""
    match = task_structure(path, operator)
    return str(match.family) if is_match(match) else None


def structure_summary(match: Any) -> dict[str, Any]:
    """What a decision records about the match (``params["structure"]``, shown by ``kope tasks show``)."""
    if not is_match(match):
        return {"matched": False, "explanation": match.explanation()}
    return {"matched": True, **match.to_dict()}


def trace_tasks(paths: Sequence[str | Path]) -> int:
    """Trace every task of ``paths`` not traced yet, in one worker process; how many were traced.

    A task that fails or hangs does not stop the others (its own ``task_structure`` reports it)."""
    from harness.structure.tracing import warm

    with _translated():
        return warm(list(paths))


def templates_for_target(target: str = "cpu") -> dict[str, KernelTemplate]:
    """The kernel templates of ``target`` by name."""
    from harness.suite.kernel_templates import list_templates

    with _translated():
        return {t.name: t for t in list_templates(target)}


def render_for_task(template: KernelTemplate, match: Any, settings: Mapping[str, Any]) -> str:
    """The candidate ``template`` renders for a task matched by structure (``TaskError`` when it cannot)."""
    with _translated():
        return template.render_task(match, dict(settings))


def builtin_task_path(operator: str) -> Path | None:
    """The file of the built-in task named ``operator`` (None when there is none)."""
    from harness import suite

    try:
        return suite.find_task(operator).path
    except HarnessError:
        return None


def level_from_path(path: str | Path) -> int | None:
    """The KernelBench level a task file's folder names (``level2/...``), if any."""
    from harness import task

    return task.level_from_path(Path(path))
