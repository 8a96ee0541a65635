"""``evaluate(task, candidate, options)``: compile, check and time one candidate; returns an ``Outcome``.

The steps, each of which can end the evaluation with an outcome:

1. static: the candidate file is non-empty Python defining ``ModelNew``
   (``format_error``), and the static anti-cheat checks pass (``cheat_detected``);
2. two fresh worker processes start side by side: the *reference* worker loads
   the task; the *candidate* worker loads the candidate (its kernels compile,
   under the compile timeout);
3. correctness, case by case (the reference worker runs one case ahead): the
   reference worker computes outputs for ``seeds`` seeds (replacing a seed whose
   reference output is degenerate), the candidate worker runs the same seeds
   under the run-time guards, and this process compares (``harness.compare``);
4. timing of the passing cases (when the target's timings are valid): reference
   and candidate interleaved in the candidate worker; some timed outputs are
   checked against the reference again.

Problems with the task, the target or the options raise ``HarnessError``; all
problems with the candidate become the outcome.
"""

from __future__ import annotations

import ast
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.device_lock import device_lock
from harness.errors import CandidateNotFoundError, OptionsError, ReferenceFailedError
from harness.hardware import available_cores
from harness.record import CaseResult, Hardware, Outcome, Status, TimingStats, excerpt, geometric_mean
from harness.sandbox import REFERENCE_POOL, Limits, Worker, WorkerDied, WorkerError, WorkerTimeout
from harness.targets import get_target
from harness.task import Case, Task, load_task, select_cases
from harness.timing import Budget

DEGENERATE_RETRIES = 4
log = logging.getLogger("harness")


@dataclass
class EvalOptions:
    target: str = "cpu"
    cases: str | Sequence[int | str] | None = None  # indices, ranges ("0-3") or names; None: all
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
    seed: int | None = None  # fixes every seed (reproducible runs); default: random
    reuse_reference: bool = True  # keep the (trusted) reference worker for the next evaluation

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise OptionsError(f"seeds must be at least 1, got {self.seeds}")
        if self.threads is not None and self.threads < 1:
            raise OptionsError(f"threads must be at least 1, got {self.threads}")
        b = self.budget
        if b.warmup_ms < 0 or b.rep_ms <= 0 or b.min_reps < 1 or b.max_reps < b.min_reps:
            raise OptionsError(f"invalid timing budget {b}: need warmup_ms >= 0, rep_ms > 0, 1 <= min_reps <= max_reps")


def resolve_task(task: str | Path | Task) -> Task:
    if isinstance(task, Task):
        return task
    from harness.suite import find_task

    return load_task(find_task(task).path)


class _Stop(Exception):
    """Ends the evaluation early with (status-carrying) error kind, message and output."""

    def __init__(self, kind: str, message: str, output: str = "") -> None:
        super().__init__(message)
        self.kind, self.message, self.output = kind, message, output


class _Evaluation:
    def __init__(self, task: Task, candidate: Path, options: EvalOptions) -> None:
        self.task, self.candidate, self.options = task, candidate, options
        self.target = get_target(options.target)
        self.target.check_available()
        self.cases = select_cases(task, options.cases)
        self.threads = options.threads or available_cores()
        self.rng = random.Random(options.seed) if options.seed is not None else random.SystemRandom()
        self.results = {
            c.index: CaseResult(c.index, c.name, dict(c.params), passed=False, error=None) for c in self.cases
        }
        self.case_kinds: dict[int, str] = {}
        self.compile_time: float | None = None
        self.hardware: Hardware | None = None
        self.started = time.monotonic()
        self.init_seeds = {c.index: self.rng.randrange(1 << 31) for c in self.cases}
        self.ref: Worker | None = None
        self.cand: Worker | None = None
        self.ref_healthy = True  # False once the reference worker failed: it is then not reused
        self.ref_info: dict = {}

    # -- the whole run -----------------------------------------------------------------------------
    def run(self) -> Outcome:
        try:
            self._static()
            try:
                self._start_workers()
                with device_lock():  # a worker service's device: one evaluation runs kernels at a time
                    self._correctness()
                    if self._should_time():
                        self._timing()
            finally:
                if self.cand is not None:
                    self.cand.close()
                if self.ref is not None:
                    self._release_reference()
        except _Stop as stop:
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
        try:
            source = self.candidate.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise CandidateNotFoundError(f"cannot read candidate {self.candidate}: {exc}") from None
        try:
            tree = ast.parse(source, filename=str(self.candidate))
        except SyntaxError as exc:
            raise _Stop("format_error:syntax", f"{self.candidate.name}:{exc.lineno}: syntax error: {exc.msg}") from None
        if not tree.body or all(
            isinstance(n, ast.Expr) and isinstance(getattr(n, "value", None), ast.Constant) for n in tree.body
        ):
            raise _Stop("format_error:no_code", "the candidate file holds no code")
        defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        if "ModelNew" not in defined:
            raise _Stop(
                "format_error:no_model_new", "the candidate must define class ModelNew(torch.nn.Module) at module level"
            )
        if self.options.static_checks:
            from harness.static_check import check_source

            findings = check_source(source, str(self.candidate))
            if findings:
                text = "\n".join(str(f) for f in findings)
                raise _Stop(f"cheat_detected:{findings[0].check}", f"static checks of {self.candidate.name}:\n{text}")

    # -- 2. workers ----------------------------------------------------------------------------------
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
        )

    def _start_workers(self) -> None:
        env = dict(os.environ)
        env.update(self.target.worker_env(self.threads))
        env["KOPE_HARNESS_COMPILE_TIMEOUT"] = str(self.options.compile_timeout_s)
        limits, rlimit = self.options.limits, self.target.uses_rlimit_as
        pooled = REFERENCE_POOL.take(self._pool_key()) if self.options.reuse_reference else None
        common = {
            "op": "load",
            "task": str(self.task.path),
            "target": self.target.name,
            "target_options": self.target.options(),
            "threads": self.threads,
        }
        if pooled is None:
            self.ref = Worker("reference", env, limits, rlimit)
            self.ref.send(common)
        else:
            self.ref, self.ref_info = pooled
        self.cand = Worker("candidate", env, limits, rlimit)
        first = self.cases[0]
        self.cand.send(
            {**common, "candidate": str(self.candidate), "case": first.index, "init_seed": self.init_seeds[first.index]}
        )
        if pooled is None:
            reply = self._reference_reply(self.options.startup_timeout_s, "loading the task")
            self.ref_info = {"hardware": reply["hardware"]}
        self._trace("reference worker ready" + (" (reused)" if pooled else ""))
        self.hardware = Hardware.from_dict(self.ref_info["hardware"])
        try:
            reply, _ = self.cand.receive(
                self.options.startup_timeout_s + self.options.compile_timeout_s, "loading the candidate"
            )
        except WorkerTimeout as exc:
            raise _Stop(
                "timeout:compile",
                f"loading and compiling the candidate took longer than "
                f"{self.options.compile_timeout_s:.0f} s (+ worker start-up)",
                exc.output,
            ) from None
        except WorkerDied as exc:
            raise _Stop(exc.kind, f"while loading the candidate: {exc}", exc.output) from None
        self._note_compile(reply)
        self._trace(f"candidate worker ready (compile {reply.get('compile_time_s')})")
        if not reply.get("ok"):
            raise _Stop(
                reply["error_kind"], reply.get("message", ""), _join(reply.get("traceback"), self.cand.output())
            )

    def _trace(self, what: str) -> None:
        log.debug("%7.3f s  %s", time.monotonic() - self.started, what)

    def _reference_reply(self, timeout: float, what: str) -> dict:
        try:
            reply, tensors = self.ref.receive(timeout, f"the reference ({what})")
        except WorkerError as exc:
            self.ref_healthy = False
            raise ReferenceFailedError(
                f"task {self.task.operator}: the reference worker failed while {what}: {exc}\n{exc.output}"
            ) from None
        if not reply.get("ok"):
            self.ref_healthy = False
            raise ReferenceFailedError(f"task {self.task.operator} ({self.task.path}): {reply.get('reference_failed')}")
        reply["_tensors"] = tensors
        return reply

    def _note_compile(self, reply: dict) -> None:
        if reply.get("compile_time_s") is not None:
            self.compile_time = reply["compile_time_s"]

    # -- 3. correctness ------------------------------------------------------------------------------
    def _seeds(self) -> list[int]:
        return [self.rng.randrange(1 << 31) for _ in range(self.options.seeds)]

    def _ref_request(self, case: Case, seeds: list[int], retries: int) -> None:
        self.ref.send(
            {
                "op": "reference",
                "case": case.index,
                "init_seed": self.init_seeds[case.index],
                "seeds": seeds,
                "retries": retries,
            }
        )

    def _correctness(self) -> None:
        self._ref_request(self.cases[0], self._seeds(), DEGENERATE_RETRIES)
        for n, case in enumerate(self.cases):
            ref = self._reference_reply(
                self.options.startup_timeout_s + self.options.case_timeout_s, f"case {case.name!r}"
            )
            degenerate = next((t["degenerate"] for t in ref["trials"] if t.get("degenerate")), None)
            if degenerate:
                raise ReferenceFailedError(
                    f"task {self.task.operator}, case {case.name!r}: the reference output stays degenerate ({degenerate}) for "
                    f"{DEGENERATE_RETRIES + 1} different seeds, so the case cannot tell a correct kernel from a constant one"
                )
            used = [t["seed"] for t in ref["trials"]]
            self.cand.send(
                {
                    "op": "run",
                    "case": case.index,
                    "init_seed": self.init_seeds[case.index],
                    "seeds": used,
                    "lazy_check": self.options.lazy_check,
                }
            )
            if n + 1 < len(self.cases):
                self._ref_request(self.cases[n + 1], self._seeds(), DEGENERATE_RETRIES)
            self._trace(f"case {case.name}: reference done")
            reply, tensors = self._candidate_reply(self.options.case_timeout_s, case, "running")
            self._trace(f"case {case.name}: candidate done")
            self._note_compile(reply)
            if not reply.get("ok"):
                self._case_error(case, reply)
                continue
            self._judge(case, ref, reply, tensors)
            self._trace(f"case {case.name}: compared")

    def _candidate_reply(self, timeout: float, case: Case, doing: str) -> tuple[dict, list]:
        try:
            return self.cand.receive(timeout, f"{doing} case {case.name!r}")
        except WorkerTimeout as exc:
            self.results[case.index].error = f"timeout: {exc}"
            raise _Stop("timeout", f"{doing} case {case.name!r} took longer than {timeout:.0f} s", exc.output) from None
        except WorkerDied as exc:
            self.results[case.index].error = str(exc)
            raise _Stop(exc.kind, f"{doing} case {case.name!r}: {exc}", exc.output) from None

    def _case_error(self, case: Case, reply: dict) -> None:
        self._note_compile(reply)
        kind = reply.get("error_kind", "runtime_error:unknown")
        self.results[case.index].error = f"{kind}: {reply.get('message', '')}"
        if kind.startswith(("cheat_detected", "compile_error", "timeout", "format_error")):
            raise _Stop(
                kind,
                f"case {case.name!r}: {reply.get('message', '')}",
                _join(reply.get("traceback"), self.cand.output()),
            )
        self.case_kinds[case.index] = kind
        self._first_traceback = getattr(self, "_first_traceback", None) or _join(
            reply.get("traceback"), self.cand.output()
        )

    def _judge(self, case: Case, ref: dict, reply: dict, tensors: list) -> None:
        from harness.compare import compare_outputs
        from harness.worker_common import decode

        result = self.results[case.index]
        for ref_trial, cand_trial in zip(ref["trials"], reply["trials"]):
            if ref_trial["digest"] != cand_trial["digest"]:
                raise ReferenceFailedError(
                    f"task {self.task.operator}, case {case.name!r}: get_inputs() gave different inputs for the same seed in two "
                    "processes; inputs must depend only on torch/random/numpy seeds"
                )
            if cand_trial.get("aliases") and not ref_trial.get("aliases_input"):
                result.error = (
                    f"seed {cand_trial['seed']}: {cand_trial['aliases']}, but the reference returns new memory"
                )
                raise _Stop("cheat_detected:output_aliases_input", f"case {case.name!r}: {result.error}")
            devices: list[str] = []
            cand_out = decode(cand_trial["output"], tensors, devices)
            ref_out = decode(ref_trial["output"], ref["_tensors"])
            verdict = compare_outputs(cand_out, ref_out, device=self.target.device, cand_devices=devices)
            if not verdict.ok:
                result.error = f"seed {cand_trial['seed']}: {verdict.message}"
                self.case_kinds[case.index] = verdict.kind or "incorrect:mismatch"
                return
        result.passed = True

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
        from dataclasses import asdict

        budget = asdict(self.options.budget)
        for case in self.cases:
            result = self.results[case.index]
            if not result.passed:
                continue
            keep = [self.rng.randrange(1, max(2, self.options.budget.min_reps))]
            header = {
                "op": "time",
                "case": case.index,
                "init_seed": self.init_seeds[case.index],
                "seed_base": self.rng.randrange(1 << 30),
                "budget": budget,
                "keep": keep,
            }
            self.cand.send(header)
            reply, tensors = self._candidate_reply(self.options.timing_timeout_s, case, "timing")
            if not reply.get("ok"):
                self._case_error(case, reply)
                result.passed = False
                continue
            self._trace(f"case {case.name}: timed")
            if not self._verify_timed(case, reply, tensors):
                continue
            result.ref_ms = TimingStats.from_samples(reply["ref_ms"])
            result.cand_ms = TimingStats.from_samples(reply["cand_ms"])
            result.speedup = result.ref_ms.median / result.cand_ms.median if result.cand_ms.median > 0 else None

    def _verify_timed(self, case: Case, reply: dict, tensors: list) -> bool:
        from harness.compare import compare_outputs
        from harness.worker_common import decode

        kept = reply.get("kept", [])
        self._ref_request(case, [k["seed"] for k in kept], retries=0)
        ref = self._reference_reply(self.options.case_timeout_s, f"checking timed outputs of case {case.name!r}")
        for item, ref_trial in zip(kept, ref["trials"]):
            devices: list[str] = []
            verdict = compare_outputs(
                decode(item["output"], tensors, devices),
                decode(ref_trial["output"], ref["_tensors"]),
                device=self.target.device,
                cand_devices=devices,
            )
            if not verdict.ok:
                result = self.results[case.index]
                result.passed = False
                result.error = f"timed repetition {item['rep']}: {verdict.message}"
                self.case_kinds[case.index] = "incorrect:timed_mismatch"
                return False
        return True

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
            error_excerpt=excerpt(_join(message, output)) if kind else None,
            compile_time_s=None if self.compile_time is None else round(self.compile_time, 4),
            timings_valid=self.target.timings_valid(),
            threads=self.threads,
            duration_s=round(time.monotonic() - self.started, 3),
            hardware=hardware,
            cases=cases,
        )


def _join(*parts: str | None) -> str:
    return "\n".join(p.strip("\n") for p in parts if p and p.strip())


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
