"""The evaluation side of KOPE's boundary with the harness: evaluating a candidate on this machine (and as
deployed), the wire form of an evaluation on worker services and the service ``kope worker`` runs, and what
``kope doctor`` reports about the sandbox. ``kope.boundary`` re-exports it all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.record import Outcome
from harness.task import Task
from kope.boundary.tasks import CaseSelection, TaskError, _kope_error, _translated

if TYPE_CHECKING:
    from harness.budget import Budget
    from harness.evaluate import EvalOptions as EvalOptions
    from kope.evaluators import Evaluator


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
    from harness.budget import Budget

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
