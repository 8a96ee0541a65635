"""Synthetic outcome records and attempts: for the tests, the benchmark and demos.

They have exactly the shape of the harness's ``kope.outcome/1`` record, so
everything downstream treats them like real ones; nothing here is used on the
real optimization path.
"""

from __future__ import annotations

from typing import Any

from kope.boundary import CaseResult, Outcome, Status, TimingStats
from kope.memory.outcome import parse_hardware, parse_outcome
from kope.memory.specs import Attempt, RunSpec, TaskSpec

ERROR_KINDS = {
    "incorrect": "incorrect:mismatch",
    "compile_error": "compile_error",
    "runtime_error": "runtime_error:SIGSEGV",
    "timeout": "timeout",
    "cheat_detected": "cheat_detected:reference_call",
    "format_error": "format_error:no_code",
}


def hardware(
    hw_id: str = "cpu-test0001", hw_class: str = "x86_64-avx2", vendor: str = "intel", cores: int = 2
) -> dict[str, Any]:
    return {
        "id": hw_id,
        "class": hw_class,
        "vendor": vendor,
        "arch": hw_class.split("-")[0],
        "cpu_model": f"synthetic {vendor}",
        "cores": cores,
        "isa": [hw_class.split("-")[-1]],
        "caches": {"l1d": 49152, "l2": 1048576},
        "gpu": None,
    }


def outcome(
    task: str,
    status: str = "correct",
    speedup: float | None = 1.0,
    *,
    family: str = "normalization",
    target: str = "cpu",
    hw: dict[str, Any] | None = None,
    cases: int = 4,
    cv: float = 0.02,
    error_kind: str | None = None,
    excerpt: str | None = None,
    tolerance: str | None = None,
) -> Outcome:
    correct = status == "correct"
    passed = cases if correct else max(0, cases - 1)
    cand_median = 1.0 / speedup if (correct and speedup) else 1.0
    record = Outcome(
        status=Status(status),
        task=task,
        family=family,
        level=1,
        target=target,
        cases_total=cases,
        cases_passed=passed,
        speedup=speedup if correct else None,
        error_kind=None if correct else (error_kind or ERROR_KINDS.get(status, status)),
        error_excerpt=None if correct else (excerpt or f"{status}: synthetic failure\n  at line 12"),
        compile_time_s=0.5,
        timings_valid=True,
        threads=2,
        duration_s=1.0,
        hardware=parse_hardware(hw or hardware()),
        cases=[
            CaseResult(
                index=i,
                name=f"case{i}",
                params={"n": 1024 * (i + 1)},
                passed=correct or i < passed,
                error=None,
                ref_ms=TimingStats(median=1.0, iqr=0.01, cv=cv, n=20),
                cand_ms=TimingStats(median=cand_median, iqr=0.01, cv=cv, n=20),
                speedup=speedup if correct else None,
                tolerance=tolerance if correct else None,
            )
            for i in range(cases)
        ],
    )
    return parse_outcome(record)  # validated like any record from outside


def run_spec(
    operator: str,
    *,
    run_id: str,
    family: str = "normalization",
    target: str = "cpu",
    hw: dict[str, Any] | None = None,
    cases: int = 4,
    started_at: float | None = None,
) -> RunSpec:
    data: dict[str, Any] = {
        "task": TaskSpec(
            operator=operator, target=target, family=family, level=1, cases=tuple(f"case{i}" for i in range(cases))
        ),
        "hardware": hw or hardware(),
        "run_id": run_id,
        "proposer": "synthetic",
        "model": None,
    }
    if started_at is not None:
        data["started_at"] = started_at
    return RunSpec.parse(data)


def attempt(
    run_id: str,
    step: int,
    operator: str,
    *,
    parent: str | None = None,
    status: str = "correct",
    speedup: float | None = 1.0,
    layer: str = "vectorization",
    title: str | None = None,
    family: str = "normalization",
    hw: dict[str, Any] | None = None,
    code: str | None = None,
    error_kind: str | None = None,
    used: tuple[Any, ...] = (),
    created_at: float | None = None,
    params: dict[str, Any] | None = None,
    **kw: Any,
) -> Attempt:
    data: dict[str, Any] = {
        "run_id": run_id,
        "step": step,
        "title": title or f"{layer} step {step}",
        "layer": layer,
        "thought": f"try {layer} at step {step}",
        "parent_id": parent,
        "code": code
        if code is not None
        else f"// {operator} step {step} {layer}\nvoid kernel() {{ /* {speedup} */ }}\n",
        "outcome": outcome(operator, status, speedup, family=family, hw=hw, error_kind=error_kind, **kw),
        "used": used,
        "prompt_tokens": 100,
        "completion_tokens": 50,
        "params": params,
    }
    if created_at is not None:
        data["created_at"] = created_at
    return Attempt.parse(data)
