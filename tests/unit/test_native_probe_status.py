"""Without perf events the native probe is a missing trust layer: `kope doctor` says so, with the fix, and an
evaluation that runs without it says so once on the log (it is never silently off): that evaluation is in
tests/integration/test_native_probe_warning.py."""

from __future__ import annotations

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
