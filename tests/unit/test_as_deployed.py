"""As deployed (#33 item 7): the settings the as-deployed workers get, the record's two figures, the bench report."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from harness.evaluate import EvalOptions, worker_spec
from harness.record import Outcome
from harness.targets import get_target
from harness.targets.base import PERFORMANCE_PREFIXES
from kope.bench.metrics import config_metrics
from kope.bench.report import operator_table, render_markdown, summary_table, with_metrics
from tests.unit.test_bench_final import data_with_finals
from tests.unit.test_harness_record import outcome

FORCED = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_DYNAMIC", "OMP_WAIT_POLICY")


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user started Python with no performance settings of their own."""
    for name in [n for n in os.environ if n.startswith(PERFORMANCE_PREFIXES)]:
        monkeypatch.delenv(name)


def test_the_harness_forces_its_settings_and_the_deployed_env_forces_none():
    cpu = get_target("cpu")
    assert {k: cpu.worker_env(2)[k] for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")} == {
        "OMP_NUM_THREADS": "2",
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    assert cpu.deployed_env() == {}
    harness = dict(worker_spec(cpu, 2, False, EvalOptions()).env)
    deployed = dict(worker_spec(cpu, 2, False, EvalOptions(deployed=True)).env)
    assert harness["OMP_WAIT_POLICY"] == "PASSIVE" and harness["OMP_NUM_THREADS"] == "2"
    assert not any(name in deployed for name in FORCED)


def test_the_users_own_performance_settings_pass_through(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000")
    monkeypatch.setenv("KOPE_SECRET_FOR_TEST", "x")
    cpu = get_target("cpu")
    assert cpu.deployed_env() == {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "1000"}
    deployed = dict(worker_spec(cpu, 2, True, EvalOptions(deployed=True)).env)  # sandboxed: clean_env + these
    assert deployed["OMP_WAIT_POLICY"] == "ACTIVE" and "KOPE_SECRET_FOR_TEST" not in deployed
    assert "OMP_NUM_THREADS" not in deployed


def test_a_targets_own_non_performance_settings_are_kept():
    triton = get_target("triton", interpret=True)
    env = triton.deployed_env()
    assert env["TRITON_INTERPRET"] == "1" and "TRITON_CACHE_DIR" in env and "OMP_WAIT_POLICY" not in env


def test_the_record_carries_both_figures_only_when_measured():
    plain = outcome()
    assert "deployed_speedup" not in plain.to_dict()  # the kope.outcome/1 contract of every in-loop record
    cases = [replace(c, deployed_speedup=0.5) if c.speedup is not None else c for c in plain.cases]
    both = replace(plain, cases=cases, deployed_speedup=0.5)
    data = json.loads(both.to_json())
    assert data["speedup"] == plain.speedup and data["deployed_speedup"] == 0.5
    assert Outcome.from_json(both.to_json()) == both
    bad = replace(plain, deployed_speedup=-1.0)
    assert any("deployed_speedup" in p for p in bad.violations())


def deployed_finals() -> dict:
    data = data_with_finals()
    for pair in data["pairs"]:
        for case in ((pair.get("final") or {}).get("outcome") or {}).get("cases") or []:
            if case.get("passed") and case.get("speedup"):
                case["deployed_speedup"] = round(case["speedup"] / 4, 4)  # four times slower as deployed
    return data


def test_the_bench_report_prints_the_as_deployed_speedup_first():
    data = with_metrics(deployed_finals())
    m = config_metrics(deployed_finals(), "active")
    assert m.deployed_geomean_speedup == pytest.approx(m.geomean_speedup / 4)
    head = summary_table(data).splitlines()[0]
    assert "| as-deployed geomean speedup | geomean speedup (harness) |" in head
    assert "| relu | elementwise | L1 | 2 | 2/2 · held-out 1/2 · 0.41x as deployed (1.65x harness) · step 1" in (
        operator_table(data)
    )
    assert "As deployed: each final kernel was also timed" in render_markdown(data)


def test_without_as_deployed_figures_the_report_is_as_before():
    head = summary_table(with_metrics(data_with_finals())).splitlines()[0]
    assert "as-deployed" not in head and "| geomean speedup |" in head


def test_the_optimize_summary_prints_the_as_deployed_speedup_beside_the_harness_one():
    from rich.console import Console

    from kope.agent.loop import RunSummary
    from kope.cli.optimize_cmd import _summary_table

    summary = RunSummary("run-1", "relu", "elementwise", "cpu", "offline", "active", True, "finished", "steps")
    summary.best_speedup, summary.best_deployed_speedup = 1.5, 0.25
    console = Console(width=200, record=True)
    console.print(_summary_table([summary]))
    text = console.export_text()
    assert "as deployed" in text and "1.50x" in text and "0.25x" in text
