"""``evaluate(task, candidate, options)``: compile, check and time one candidate; returns an ``Outcome``.

Its steps (static, workers, correctness, timing): docs/harness.md, "The steps of an evaluation". Problems with
the task, the target or the options raise ``HarnessError``; all problems with the candidate become the outcome.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import ipc, timing
from harness.case_timer import CaseTimer, Stop, join_output
from harness.compare import Precise
from harness.device_lock import device_lock
from harness.errors import CandidateNotFoundError, HarnessError, ReferenceFailedError
from harness.eval_setup import EvalOptions, check_static, resolve_task, use_sandbox, worker_spec
from harness.hardware import available_cores
from harness.precise_reference import PreciseReference
from harness.record import CaseResult, Hardware, Outcome, Status, excerpt, geometric_mean
from harness.remote_memory import RemoteMemoryError, Staging
from harness.targets import get_target
from harness.task import Case, Task, select_cases
from harness.worker_limits import WorkerDied, WorkerError, WorkerTimeout
from harness.worker_pool import REFERENCE_POOL, WARM_POOL, WorkerSpec
from harness.worker_process import Worker

DEGENERATE_RETRIES = 4
# Measurements of a case after the first whose finding must repeat (Stop.recheck) before it stands: an honest
# candidate's reply tail under a loaded CI runner once crossed the wait bound's per-stretch allowance (6 Dec)
CONFIRMATIONS = 1
log = logging.getLogger("harness")


class _Evaluation:
    def __init__(self, task: Task, candidate: Path, options: EvalOptions) -> None:
        self.task, self.candidate, self.options = task, candidate, options
        self.target = get_target(options.target)
        self.target.check_available()
        self.sandboxed = use_sandbox(options.sandbox)
        self.cases = select_cases(
            task,
            options.cases if options.cases is None or isinstance(options.cases, str) else list(options.cases),
            options.case_set,
        )
        # timed calls leave a core to the parent and the OS (timing.timing_threads); as deployed: every core it may use
        cores = available_cores()
        self.threads = (options.threads or cores) if options.deployed else timing.timing_threads(options.threads, cores)
        self.rng = random.Random(options.seed) if options.seed is not None else random.SystemRandom()
        self.results = {
            c.index: CaseResult(c.index, c.name, dict(c.params), passed=False, error=None, heldout=c.heldout)
            for c in self.cases
        }
        self.case_kinds: dict[int, str] = {}
        self.compile_time: float | None = None
        self.hardware: Hardware = self.target.describe_hardware()
        self.started = time.monotonic()
        self._salt: bytes | None = None
        if options.seed is None:
            from harness import reference_cache

            self._salt = reference_cache.seed_salt()
            self.task_sha: str | None = reference_cache.task_digest(task.path)
        else:
            self.task_sha = None
        self.init_seeds = {c.index: self._seed(c, "init") for c in self.cases}
        self._ref: Worker | None = None
        self._cand: Worker | None = None
        self.precise = PreciseReference(self._boot_precise, self.init_seeds, self.options.case_timeout_s, self.trace)
        self.compile_cheat: tuple[str, str] | None = None  # an escape attempt refused by the compile service
        self.ref_healthy = True  # False once the reference worker failed: it is then not reused
        self.ref_info: dict = {}
        self.task_threads = 0  # the candidate worker's thread count before the candidate was loaded
        self.staging = Staging()  # parent-side buffers the outputs are read into, reused from unit to unit
        self._remote: bool | None = None  # remote_reads(), once known

    @property
    def ref(self) -> Worker:
        """The reference worker (``_reference()`` starts or takes it)."""
        if self._ref is None:
            raise HarnessError("the evaluation asked its reference worker before starting it")
        return self._ref

    @property
    def cand(self) -> Worker:
        """The candidate worker (``_start_candidate()`` starts it)."""
        if self._cand is None:
            raise HarnessError("the evaluation asked its candidate worker before starting it")
        return self._cand

    def _seed(self, case: Case, what: Any) -> int:
        if self._salt is None:
            return self.rng.randrange(1 << 31)
        from harness.reference_cache import derived_seed

        return derived_seed(self._salt, self.task_sha, case.index, case.name, what)

    # -- the whole run -----------------------------------------------------------------------------
    def run(self) -> Outcome:
        try:
            self._static()
            try:
                self._start_candidate()
                with device_lock():  # a worker service's device: one evaluation runs kernels at a time
                    self._correctness()
                    if self._should_time():
                        self._timing()
                        if self.options.physical_limit:
                            self._physical_limit()
            finally:
                if self._cand is not None:
                    self.cand.close()
                self.precise.close()
                if self._ref is not None:
                    self._release_reference()
        except Stop as stop:
            return self._outcome(stop.kind, stop.message, stop.output)
        return self._outcome(None, None, "")

    def _release_reference(self) -> None:
        """Back to the pool when healthy (after reading any reply still in flight), else closed."""
        if self.ref_healthy and self.options.reuse_reference:
            try:
                while self.ref.pending:
                    self.ref.receive(self.options.case_timeout_s, "finishing a reference request")
            except WorkerError:
                self.ref_healthy = False
        if self.ref_healthy and self.options.reuse_reference:
            REFERENCE_POOL.give(self._pool_key(), self.ref, self.ref_info)
        else:
            self.ref.close()

    # -- 1. static ---------------------------------------------------------------------------------
    def _static(self) -> None:
        check_static(self.candidate, self.options.static_checks)

    # -- 2. workers ----------------------------------------------------------------------------------
    def _spec(self) -> WorkerSpec:
        return worker_spec(self.target, self.threads, self.sandboxed, self.options)

    def _worker(self) -> Worker:
        spec = self._spec()
        if self.options.warm_pool and not self.options.deployed:
            worker = WARM_POOL.take(spec, refill=self.options.refill_pool)
        else:  # a plain process, its own interpreter and torch import (as deployed: under the user's settings)
            worker = spec.start(zygote=False)
        if self.sandboxed:
            worker.compile_service = self._serve_compile
        return worker

    def _serve_compile(self, request: dict) -> dict:
        from harness.compile_service import serve_compile

        timeout = request.get("timeout")
        limit = self.options.compile_timeout_s
        request["timeout"] = min(float(timeout), limit) if isinstance(timeout, (int, float)) else limit
        reply = serve_compile(request)
        if reply.get("cheat") and self.compile_cheat is None:  # reported even if the candidate swallows the error
            self.compile_cheat = (str(reply["cheat"]), str(reply.get("message")))
        return reply

    def _pool_key(self) -> tuple:
        stat = self.task.path.stat()
        limits = self.options.limits
        return (
            str(self.task.path),
            stat.st_mtime_ns,
            stat.st_size,
            self.target.name,
            tuple(sorted(self.target.options().items())),
            self.threads,
            limits.memory_bytes,
            limits.file_bytes,
            self.sandboxed,
            self.options.deployed,
        )

    def _load_message(self, **role: Any) -> ipc.Load:
        return ipc.Load(
            task=str(self.task.path),
            target=self.target.name,
            target_options=self.target.options(),
            threads=self.threads,
            deployed=True if self.options.deployed else None,  # torch's default thread count (no setup_worker)
            **role,
        )

    def _reference(self) -> Worker:
        """The reference worker, loaded (taken from the pool of loaded ones, or started now)."""
        if self._ref is not None and self.ref.role == "reference":
            return self.ref
        pooled = REFERENCE_POOL.take(self._pool_key()) if self.options.reuse_reference else None
        if pooled is not None:
            self._ref, self.ref_info = pooled
            self.trace("reference worker ready (reused)")
            return self.ref
        self._ref = self._ref or self._worker()  # as deployed it began booting beside the candidate's
        self.ref.role = "reference"
        self.ref.send(self._load_message(role="reference"))
        reply, _ = self.reference_reply(self.options.startup_timeout_s, "loading the task")
        self.ref_info = {"hardware": ipc.expect(reply, ipc.Loaded).hardware}
        self.trace("reference worker ready")
        return self.ref

    def precise_reference(self, case: Case, seed: int, desc: Any = None, blocks: Any = None) -> Precise:
        """The reference's float64 outputs for ``seed`` (``harness.precise_reference``), computed when first asked."""
        return self.precise.outputs(case, seed, desc, blocks)

    def _boot_precise(self) -> Worker:
        worker = self._spec().start("reference", zygote=not self.options.deployed)
        try:
            worker.wait_ready(self.options.startup_timeout_s)
            worker.send(self._load_message(role="reference"))
            ipc.expect(worker.receive(self.options.startup_timeout_s, "loading the task")[0], ipc.Loaded)
        except BaseException:
            worker.close()
            raise
        return worker

    def _start_candidate(self) -> None:
        self._cand = self._worker()
        if self.options.deployed and self.options.timing:  # two plain interpreters: both boot at once, not in turn
            self._ref = self._worker()
        self.cand.role = "candidate"
        try:
            self.cand.wait_ready(self.options.startup_timeout_s)
        except WorkerError:  # a pooled worker that died while idle: one fresh try
            self.cand.close()
            self._cand = self._spec().start("candidate", zygote=not self.options.deployed)
            if self.sandboxed:
                self.cand.compile_service = self._serve_compile
            try:
                self.cand.wait_ready(self.options.startup_timeout_s)
            except WorkerError as exc:
                raise HarnessError(f"a candidate worker could not start: {exc}\n{exc.output}") from None
        self.task_threads = len(self.cand.tasks())
        first = self.cases[0]
        self.cand.send(
            self._load_message(
                role="candidate",
                candidate=str(self.candidate),
                case=first.index,
                init_seed=self.init_seeds[first.index],
            )
        )
        try:
            reply, _ = self.cand.receive(
                self.options.startup_timeout_s + self.options.compile_timeout_s, "loading the candidate"
            )
        except WorkerTimeout as exc:
            raise Stop(
                "timeout:compile",
                f"loading and compiling the candidate took longer than "
                f"{self.options.compile_timeout_s:.0f} s (+ worker start-up)",
                exc.output,
            ) from None
        except WorkerDied as exc:
            raise Stop(exc.kind, f"while loading the candidate: {exc}", exc.output) from None
        self._note_compile(reply)
        self._check_sandbox("loading the candidate")
        self.trace(f"candidate worker ready (compile {getattr(reply, 'compile_time_s', None)})")
        if isinstance(reply, ipc.Failed):
            raise Stop(
                reply.error_kind or "runtime_error:unknown",
                reply.message or "",
                join_output(reply.traceback, self.cand.output()),
            )

    def _check_sandbox(self, doing: str) -> None:
        """Forbidden system calls the sandbox trapped in the candidate's process are cheats."""
        if self._cand is None or not self.sandboxed:
            return
        if self.compile_cheat is not None:
            check, message = self.compile_cheat
            raise Stop(
                f"cheat_detected:{check}",
                f"while {doing}: {message} (caught by the compile service's flag allow-list)",
                self.cand.output(),
            )
        trapped = self.cand.violations()
        if trapped:
            from harness.seccomp import describe_trapped

            raise Stop(*describe_trapped(trapped, doing), self.cand.output())

    def trace(self, what: str) -> None:
        log.debug("%7.3f s  %s", time.monotonic() - self.started, what)

    def reference_reply(self, timeout: float, what: str) -> tuple[ipc.Reply, list]:
        try:
            reply, tensors = self.ref.receive(timeout, f"the reference ({what})")
        except WorkerError as exc:
            self.ref_healthy = False
            raise ReferenceFailedError(
                f"task {self.task.operator}: the reference worker failed while {what}: {exc}\n{exc.output}"
            ) from None
        if isinstance(reply, ipc.Failed):
            self.ref_healthy = False
            raise ReferenceFailedError(
                f"task {self.task.operator} ({self.task.path}): {reply.reference_failed or reply.message}"
            )
        return reply, tensors

    def _note_compile(self, reply: ipc.Reply) -> None:
        compile_time = getattr(reply, "compile_time_s", None)
        if compile_time is not None:
            self.compile_time = compile_time

    # -- 3. correctness ------------------------------------------------------------------------------
    def _seeds(self, case: Case) -> list[int]:
        return [self._seed(case, k) for k in range(self.options.seeds)]

    def _cache_context(self) -> dict:
        context = {
            "task": self.task_sha,
            "target": self.target.name,
            "target_options": self.target.options(),
            "threads": self.threads,
            "hardware": self.hardware.id,
        }
        if self.options.deployed:
            context["deployed"] = True
        return context

    def _reference_trials(self, case: Case, seeds: list[int]) -> Callable[[], list[tuple[dict, list]]]:
        """One (trial, its tensors) per seed: from the cache where possible, else from the reference worker. The
        request goes out now; the returned function waits for its reply (so the reference worker computes the next
        case's outputs while the candidate runs this one's trials)."""
        from harness import reference_cache

        use_cache = self.options.reference_cache and self.task_sha is not None
        keys: list[str | None] = [
            reference_cache.entry_key(
                self._cache_context(), case.as_dict(), self.init_seeds[case.index], s, DEGENERATE_RETRIES
            )
            if use_cache
            else None
            for s in seeds
        ]
        found: list[tuple[dict, list] | None] = [reference_cache.load(k) if k else None for k in keys]
        missing = [i for i, f in enumerate(found) if f is None]
        if missing:
            self._reference().send(
                ipc.Reference(
                    case=case.index,
                    init_seed=self.init_seeds[case.index],
                    seeds=[seeds[i] for i in missing],
                    retries=DEGENERATE_RETRIES,
                )
            )

        def collect() -> list[tuple[dict, list]]:
            if missing:
                reply, out = self.reference_reply(
                    self.options.startup_timeout_s + self.options.case_timeout_s, f"case {case.name!r}"
                )
                for i, (trial, tensors) in zip(missing, ipc.split_trials(ipc.expect(reply, ipc.Trials).trials, out)):
                    found[i] = (trial, tensors)
                    key = keys[i]
                    if key and not trial.get("degenerate"):
                        reference_cache.store(key, trial, tensors)
            return found  # type: ignore[return-value]

        return collect

    def _correctness(self) -> None:
        ahead = [self._reference_trials(c, self._seeds(c)) for c in self.cases[:1]]  # a case ahead of the candidate
        for at, case in enumerate(self.cases):
            ref_trials = ahead.pop()()
            degenerate = next((t["degenerate"] for t, _ in ref_trials if t.get("degenerate")), None)
            if degenerate:
                raise ReferenceFailedError(
                    f"task {self.task.operator}, case {case.name!r}: the reference output stays degenerate ({degenerate}) for "
                    f"{DEGENERATE_RETRIES + 1} different seeds, so the case cannot tell a correct kernel from a constant one"
                )
            used = [t["seed"] for t, _ in ref_trials]
            self.cand.send(
                ipc.Run(
                    case=case.index,
                    init_seed=self.init_seeds[case.index],
                    seeds=used,
                    lazy_check=self.options.lazy_check,
                    remote=self.remote_reads(),
                )
            )
            self.trace(f"case {case.name}: reference ready")
            ahead += [self._reference_trials(c, self._seeds(c)) for c in self.cases[at + 1 : at + 2]]
            reply, tensors = self.candidate_reply(self.options.case_timeout_s, case, "running")
            self.trace(f"case {case.name}: candidate done")
            self._note_compile(reply)
            if isinstance(reply, ipc.Failed):
                self.case_error(case, reply)
                continue
            run = ipc.expect(reply, ipc.Trials)
            if run.remote is not None:
                tensors = self._read_trials(case, run.remote)
            self._check_trials(case, used, run)
            self._judge(case, ref_trials, run, tensors)
            self.trace(f"case {case.name}: compared")

    def remote_reads(self) -> bool:
        """Whether the candidate's outputs are read out of its memory (``harness.remote_memory``): asked for, a CPU
        target, and the kernel lets this process read the worker's memory (checked once, for real)."""
        if self._remote is None:
            from harness.remote_memory import usable

            self._remote = bool(self.options.remote_fetch and self.target.device == "cpu" and usable(self.cand.pid))
            self.trace(f"outputs read out of the workers' memory: {self._remote}")
        return self._remote

    def _read_trials(self, case: Case, specs: Any) -> list:
        try:
            return self.staging.read("trial", self.cand.pid, specs, self.options.limits.max_message_bytes)
        except RemoteMemoryError as exc:
            raise Stop(
                "runtime_error:protocol", f"case {case.name!r}: the candidate worker sent a malformed reply: {exc}"
            ) from None

    def candidate_reply(self, timeout: float, case: Case, doing: str) -> tuple[ipc.Reply, list]:
        try:
            reply = self.cand.receive(timeout, f"{doing} case {case.name!r}")
        except WorkerTimeout as exc:
            self.results[case.index].error = f"timeout: {exc}"
            raise Stop("timeout", f"{doing} case {case.name!r} took longer than {timeout:.0f} s", exc.output) from None
        except WorkerDied as exc:
            self.results[case.index].error = str(exc)
            raise Stop(exc.kind, f"{doing} case {case.name!r}: {exc}", exc.output) from None
        self._check_sandbox(f"{doing} case {case.name!r}")
        return reply

    def _check_trials(self, case: Case, seeds: list[int], reply: ipc.Trials) -> None:
        """Every trial asked for came back, for the seeds asked for: nothing the candidate's process says is taken on trust."""
        trials = reply.trials  # a list (ipc.decode checked it); its trials are the worker's word
        got = [t.get("seed") for t in trials] if all(isinstance(t, dict) for t in trials) else None
        if got == seeds and seeds and not trials[0].get("digest"):
            got = None  # the first trial must prove which inputs it ran on
        if got != seeds:
            self.results[case.index].error = f"asked for trials with seeds {seeds}, got {got}"
            raise Stop(
                "cheat_detected:missing_trials",
                f"case {case.name!r}: the candidate's worker returned {0 if got is None else len(got)} trial(s) "
                f"for seeds {got} where {len(seeds)} were asked for (seeds {seeds}): its results cannot be trusted",
            )

    def case_error(self, case: Case, reply: ipc.Failed) -> None:
        self._note_compile(reply)
        kind = reply.error_kind or "runtime_error:unknown"
        message = reply.message or ""
        self.results[case.index].error = f"{kind}: {message}"
        if kind.startswith(("cheat_detected", "compile_error", "timeout", "format_error")):
            raise Stop(kind, f"case {case.name!r}: {message}", join_output(reply.traceback, self.cand.output()))
        self.case_kinds[case.index] = kind
        self._first_traceback = getattr(self, "_first_traceback", None) or join_output(
            reply.traceback, self.cand.output()
        )

    def _judge(self, case: Case, ref_trials: list[tuple[dict, list]], reply: ipc.Trials, tensors: list) -> None:
        from harness.fast_compare import compare_encoded

        result = self.results[case.index]
        for (ref_trial, ref_tensors), cand_trial in zip(ref_trials, reply.trials):
            if cand_trial.get("digest") is not None and ref_trial.get("digest") != cand_trial["digest"]:
                self._inputs_differ(case, ref_trial, cand_trial)
            if cand_trial.get("aliases") and not ref_trial.get("aliases_input"):
                result.error = (
                    f"seed {cand_trial['seed']}: {cand_trial['aliases']}, but the reference returns new memory"
                )
                raise Stop("cheat_detected:output_aliases_input", f"case {case.name!r}: {result.error}")
            verdict = compare_encoded(
                cand_trial.get("output"),
                tensors,
                ref_trial,
                ref_tensors,
                self.target.device,
                precise=self.precise_reference(case, ref_trial["seed"]),
            )
            if not verdict.ok:
                result.error = f"seed {cand_trial['seed']}: {verdict.message}"
                self.case_kinds[case.index] = verdict.kind or "incorrect:mismatch"
                return
            result.tolerance = verdict.rule or result.tolerance
        result.passed = True

    def _inputs_differ(self, case: Case, ref_trial: dict, cand_trial: dict) -> None:
        """The candidate ran on other inputs than the reference: the task is not reproducible, or the candidate lied."""
        ref = self._reference()
        ref.send(
            ipc.Reference(case=case.index, init_seed=self.init_seeds[case.index], seeds=[ref_trial["seed"]], retries=0)
        )
        again, _ = self.reference_reply(self.options.case_timeout_s, f"re-checking the inputs of case {case.name!r}")
        if ipc.expect(again, ipc.Trials).trials[0]["digest"] != ref_trial["digest"]:
            raise ReferenceFailedError(
                f"task {self.task.operator}, case {case.name!r}: get_inputs() gave different inputs for the same seed in two "
                "processes; inputs must depend only on torch/random/numpy seeds"
            )
        self.results[case.index].error = f"seed {ref_trial['seed']}: the candidate's inputs differ from the reference's"
        raise Stop(
            "cheat_detected:input_mismatch",
            f"case {case.name!r}: the candidate's worker reports inputs for seed {ref_trial['seed']} that differ from the "
            "reference's (which are reproducible): the inputs were changed before or during its forward",
        )

    # -- 4. timing -----------------------------------------------------------------------------------
    def _should_time(self) -> bool:
        if not (self.options.timing and self.target.timings_valid()):
            return False
        passed = [r for r in self.results.values() if r.passed]
        if not passed:
            return False
        if self.case_kinds and any(not k.startswith("incorrect") for k in self.case_kinds.values()):
            return False
        return self.options.time_incorrect or len(passed) == len(self.results)

    def _timing(self) -> None:
        from harness.timing import machine_lock

        self._reference()
        with machine_lock(exclusive=True):
            self.trace("timing: machine lock held")
            WARM_POOL.pause()  # workers booting in the background wait (SIGSTOP) while this process times
            try:
                for case in self.cases:
                    result = self.results[case.index]
                    if result.passed:
                        self._time_case(case, result)
                        self.trace(f"case {case.name}: timed")
            finally:
                WARM_POOL.resume()

    def _time_case(self, case: Case, result: CaseResult) -> None:
        """One case's timing (``CaseTimer``). A finding that must repeat (``Stop.recheck``: the bounds on the untimed
        stretches, sums over a handful of units that a loaded machine's stall can tip) times the case again, from
        its warm-up, and stands only if that measurement finds it too; the times kept are always those of a
        measurement every check passed (docs/harness-workers.md, "A finding over the units must repeat")."""
        first: Stop | None = None
        for attempt in range(1 + CONFIRMATIONS):
            try:
                CaseTimer(self, case).run()
                return
            except Stop as stop:
                if stop.recheck and attempt < CONFIRMATIONS:
                    first = stop
                    self.trace(
                        f"case {case.name}: {stop.kind} in measurement {attempt + 1}, timed again: {stop.message}"
                    )
                    continue
                result.passed = False  # what timing found overrules the correctness trials
                if first is not None and stop.recheck:
                    stop.message += (
                        f" (found in each of {attempt + 1} measurements of the case; the first: {first.message})"
                    )
                raise

    def _physical_limit(self) -> None:
        """Fraction of roofline per timed case; an impossible one ends the evaluation (harness.roofline)."""
        from harness.roofline import check_cases

        found = check_cases(self.task, list(self.results.values()), self.hardware, self.target.device, self.threads)
        if found:
            raise Stop("cheat_detected:faster_than_hardware", found)

    # -- the record ----------------------------------------------------------------------------------
    def _outcome(self, stop_kind: str | None, stop_message: str | None, output: str) -> Outcome:
        for result in self.results.values():
            if not result.passed and result.error is None:
                result.error = "not run: the evaluation stopped earlier" if stop_kind else None
        kind, message = stop_kind, stop_message
        if kind is None and self.case_kinds:
            first = min(self.case_kinds)
            kind = self.case_kinds[first]
            runtime = [i for i, k in sorted(self.case_kinds.items()) if k.startswith("runtime_error")]
            if runtime:
                first, kind = runtime[0], self.case_kinds[runtime[0]]
                output = getattr(self, "_first_traceback", "") or ""
            message = f"case {self.results[first].name!r}: {self.results[first].error}"
        status = Status(kind.split(":", 1)[0]) if kind else Status.CORRECT
        if status is Status.CHEAT_DETECTED:  # a flagged evaluation vouches for no case: none passed, no speedup
            for result in self.results.values():
                if result.passed or result.speedup is not None:
                    result.passed, result.speedup = False, None
                    result.error = result.error or f"not counted: the evaluation was flagged ({kind})"
        speedups = [r.speedup for r in self.results.values() if r.passed and r.speedup is not None]
        cases = [self.results[c.index] for c in self.cases]
        hardware = self.hardware or self.target.describe_hardware()
        return Outcome(
            status=status,
            task=self.task.operator,
            family=self.task.family,
            level=self.task.level,
            target=self.target.name,
            cases_total=len(cases),
            cases_passed=sum(r.passed for r in cases),
            speedup=geometric_mean(speedups),
            error_kind=kind,
            error_excerpt=excerpt(join_output(message, output)) if kind else None,
            compile_time_s=None if self.compile_time is None else round(self.compile_time, 4),
            timings_valid=self.target.timings_valid(),
            threads=self.threads,
            duration_s=round(time.monotonic() - self.started, 3),
            hardware=hardware,
            cases=cases,
        )


def evaluate(
    task: str | Path | Task, candidate: str | Path, options: EvalOptions | None = None, **overrides: Any
) -> Outcome:
    """Evaluate ``candidate`` (a file defining ModelNew) against ``task`` (a built-in name, a path or a Task)."""
    options = options or EvalOptions()
    if overrides:
        from dataclasses import replace

        options = replace(options, **overrides)
    loaded = resolve_task(task)
    path = Path(candidate)
    if not path.is_file():
        raise CandidateNotFoundError(f"candidate file not found: {path}")
    return _Evaluation(loaded, path.resolve(), options).run()
