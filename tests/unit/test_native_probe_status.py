"""Without perf events the native probe is a missing trust layer: `kope doctor` says so, with the fix, and an
evaluation that runs without it says so once on the log (it is never silently off)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from harness import case_timer, native_probe
from kope.doctor import check_native_probe

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def no_perf_syscall(monkeypatch: pytest.MonkeyPatch) -> None:
    """perf_event_open refused by the kernel: a syscall number no kernel has (ENOSYS, a real refusal)."""
    monkeypatch.setitem(native_probe._NR_PERF_EVENT_OPEN, os.uname().machine, 100_000)
    monkeypatch.setattr(case_timer, "_probe_warned", False)


def test_doctor_reports_the_probe_as_it_is_on_this_machine():
    check = check_native_probe()
    assert (check.level == "ok") == native_probe.available(), check
    assert check.name == "Native probe (perf events)"


def test_doctor_says_what_is_lost_and_how_to_allow_perf_events(no_perf_syscall):
    assert not native_probe.available()
    check = check_native_probe()
    assert check.level == "optional"
    assert "unavailable" in check.detail and "perf_event_paranoid=" in check.detail and "below Python" in check.detail
    assert check.fix is not None and "perf_event_paranoid" in check.fix


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
