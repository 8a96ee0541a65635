"""What an evaluation starts from: its options (``EvalOptions``), the task, whether to sandbox, the workers'
spec, the warm pool's prestart, and the static step (``check_static``) that runs before any worker.

``harness.evaluate`` runs the evaluation itself.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import settings, timing
from harness.case_timer import Stop
from harness.errors import CandidateNotFoundError, HarnessError, OptionsError, SandboxUnavailableError
from harness.hardware import available_cores
from harness.pyparse import parse as parse_source
from harness.targets import get_target
from harness.task import Task
from harness.timing import Budget
from harness.worker_limits import Limits
from harness.worker_pool import WARM_POOL, WorkerSpec

log = logging.getLogger("harness")


@dataclass
class EvalOptions:
    target: str = "cpu"
    cases: str | Sequence[int | str] | None = None  # indices, ranges ("0-3") or names; None: all of case_set
    case_set: str = "visible"  # the pool cases select from: visible (what proposers see), heldout or all
    seeds: int = 3  # correctness trials per case, each on fresh inputs
    threads: int | None = None  # fixed thread count; default: the CPUs this process may use
    timing: bool = True
    time_incorrect: bool = False  # also time the passing cases of an incorrect candidate
    budget: Budget = field(default_factory=Budget)
    compile_timeout_s: float = 300.0  # importing the candidate (its kernels build) and building ModelNew
    startup_timeout_s: float = 120.0  # a worker importing torch and the task
    case_timeout_s: float = 120.0  # all trials of one case
    timing_timeout_s: float = 180.0  # timing one case
    limits: Limits = field(default_factory=Limits)
    static_checks: bool = True  # False only to test the run-time layer on its own
    lazy_check: bool = True
    seed: int | None = None  # fixes every seed (reproducible runs); default: per-machine secret seeds
    reuse_reference: bool = True  # keep the (trusted) reference worker for the next evaluation
    physical_limit: bool = True  # roofline fields per timed case; faster than the hardware is a cheat
    warm_pool: bool = True  # take a pre-started (forked) worker (False: boot one now, as before the pool existed)
    refill_pool: bool = True  # boot replacements for the workers taken (False: the caller's last evaluation)
    reference_cache: bool = True  # reuse reference outputs computed earlier (False: always recompute)
    sandbox: bool | None = None  # None: sandboxed where possible, refused where not; False: explicit opt-out
    # timed outputs read out of the workers' memory (harness.remote_memory; False or KOPE_HARNESS_REMOTE_FETCH=off:
    # through their pipes, as before)
    remote_fetch: bool = field(default_factory=settings.remote_fetch)
    # timed calls' inputs: mixed copies of a small ring of get_inputs sets per case (harness.worker_timed; False or
    # KOPE_HARNESS_INPUT_RING=off: get_inputs under a fresh seed for every call, as before)
    input_ring: bool = field(default_factory=settings.input_ring)
    # as deployed: both workers are fresh interpreters (no warm pool, no zygote, no reused reference) with the user's
    # own performance settings (Target.deployed_env; no forced OMP_*/thread count): what ``import best`` gets in a
    # plain PyTorch process. Still sandboxed and checked as always. ``measure_deployed`` sets it.
    deployed: bool = False

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise OptionsError(f"seeds must be at least 1, got {self.seeds}")
        if self.threads is not None and self.threads < 1:
            raise OptionsError(f"threads must be at least 1, got {self.threads}")
        b = self.budget
        if b.warmup_ms < 0 or b.rep_ms <= 0 or b.min_reps < 1 or b.max_reps < b.min_reps or b.lopsided < 1:
            raise OptionsError(
                f"invalid timing budget {b}: need warmup_ms >= 0, rep_ms > 0, 1 <= min_reps <= max_reps, lopsided >= 1"
            )


def resolve_task(task: str | Path | Task) -> Task:
    if isinstance(task, Task):
        return task
    from harness.suite import find_task
    from harness.task_loader import load_task_isolated

    return load_task_isolated(find_task(task).path)  # task code runs in a worker under a timeout, never here


def use_sandbox(requested: bool | None) -> bool:
    """Whether to sandbox; raises ``SandboxUnavailableError`` where it is wanted and impossible."""
    from harness.sandbox import opted_out, sandbox_status

    if requested is False or (requested is None and opted_out()):
        return False
    status = sandbox_status()
    if status.available:
        return True
    raise SandboxUnavailableError(
        f"the candidate sandbox cannot be set up on this machine: {status.reason}",
        hint=f"candidates are untrusted code; to run them without the sandbox anyway set {settings.SANDBOX}=off "
        "(or EvalOptions(sandbox=False))",
    )


def worker_spec(target: Any, threads: int, sandboxed: bool, options: EvalOptions) -> WorkerSpec:
    """What the workers of an evaluation with ``options`` on ``target`` are started with."""
    from harness.commands import cache_root
    from harness.sandbox import PROFILES, hidden_paths
    from harness.worker_process import worker_env

    env = dict(target.deployed_env() if options.deployed else target.worker_env(threads))
    if not sandboxed:
        env[settings.COMPILE_TIMEOUT] = str(options.compile_timeout_s)
    # reference outputs, loaded tasks (held-out cases), the compile cache's signing key
    private = [cache_root() / "refs", cache_root() / "tasks", cache_root() / "keys"]
    for folder in private if sandboxed else []:
        try:  # hidden_paths names existing folders only: made now, a prestarted worker's spec is the same later
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError:
            pass
    return WorkerSpec(
        env=tuple(sorted(worker_env(env, sandboxed).items())),
        limits=options.limits,
        uses_rlimit_as=target.uses_rlimit_as,
        sandboxed=sandboxed,
        hidden=tuple(hidden_paths(private)) if sandboxed else (),
        cache_root=str(cache_root()),
        profile=PROFILES[target.sandbox_profile()],
    )


def prestart(target: str = "cpu", count: int = 2, threads: int | None = None) -> None:
    """Start booting ``count`` workers (a reference and a candidate worker) for evaluations on ``target`` with
    the default options: a command that is about to evaluate calls this first (``kope.boundary.prestart_workers``,
    from a thread of its own), so that its first evaluation does not wait for two interpreters and torch
    imports. The boots run in the warm pool's threads. Where the target or the sandbox is unavailable nothing
    starts (the evaluation itself then says why)."""
    try:
        options = EvalOptions(target=target, threads=threads)
        chosen = get_target(target)
        chosen.check_available()
        sandboxed = use_sandbox(options.sandbox)
    except HarnessError as exc:
        log.debug("no workers prestarted for %s: %s", target, exc)
        return
    WARM_POOL.prefill(worker_spec(chosen, timing.timing_threads(threads, available_cores()), sandboxed, options), count)


def check_static(candidate: Path, static_checks: bool = True) -> None:
    """Step 1: the candidate file is non-empty Python defining ``ModelNew`` (``format_error``) and the static
    anti-cheat checks pass (``cheat_detected``); ``Stop`` with the kind otherwise."""
    try:
        source = candidate.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CandidateNotFoundError(f"cannot read candidate {candidate}: {exc}") from None
    try:
        tree = parse_source(source, filename=str(candidate))
    except SyntaxError as exc:
        raise Stop("format_error:syntax", f"{candidate.name}:{exc.lineno}: syntax error: {exc.msg}") from None
    if not tree.body or all(
        isinstance(n, ast.Expr) and isinstance(getattr(n, "value", None), ast.Constant) for n in tree.body
    ):
        raise Stop("format_error:no_code", "the candidate file holds no code")
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if "ModelNew" not in defined:
        raise Stop(
            "format_error:no_model_new", "the candidate must define class ModelNew(torch.nn.Module) at module level"
        )
    if static_checks:
        from harness.static_check import check_source

        findings = check_source(source, str(candidate))
        if findings:
            text = "\n".join(str(f) for f in findings)
            raise Stop(f"cheat_detected:{findings[0].check}", f"static checks of {candidate.name}:\n{text}")
