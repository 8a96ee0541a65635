"""An evaluation that runs without the native probe (perf events refused) says so once on the log (it is never
silently off); what `kope doctor` says about it: tests/unit/test_native_probe_status.py."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from harness import case_timer, native_probe

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_perf_syscall(monkeypatch: pytest.MonkeyPatch) -> None:
    """perf_event_open refused by the kernel: a syscall number no kernel has (ENOSYS, a real refusal)."""
    monkeypatch.setitem(native_probe._NR_PERF_EVENT_OPEN, os.uname().machine, 100_000)
    monkeypatch.setattr(case_timer, "_probe_warned", False)


@pytest.mark.slow
def test_an_evaluation_without_the_probe_warns_once(no_perf_syscall, caplog: pytest.LogCaptureFixture):
    from harness.evaluate import EvalOptions, evaluate
    from harness.timing import Budget

    task = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
    candidate = ROOT / "fixtures" / "deployed" / "relu_needs_passive.py"
    options = EvalOptions(cases="0,1", budget=Budget(warmup_ms=0, rep_ms=5, min_reps=2))
    with caplog.at_level(logging.WARNING, logger="harness.case_timer"):
        outcome = evaluate(task, candidate, options)
    assert outcome.ok, outcome.error_excerpt
    warnings = [r for r in caplog.records if "native probe cannot sample" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]  # two timed cases, one warning
