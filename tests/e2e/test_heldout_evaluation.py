"""Held-out cases: a kernel hard-coded to the visible shapes passes the visible cases and fails the held-out ones."""

import json
from pathlib import Path

from harness.evaluate import EvalOptions, evaluate

ROOT = Path(__file__).resolve().parents[1]
REPO = ROOT.parent
TASK = ROOT / "fixtures" / "tasks" / "relu_heldout.py"
OVERFIT = ROOT / "fixtures" / "overfit" / "relu_visible_shapes.py"
HONEST = REPO / "harness" / "suite" / "candidates" / "cpu" / "relu.py"


def test_by_default_only_visible_cases_run_and_the_hard_coded_kernel_passes_them():
    outcome = evaluate(TASK, OVERFIT, EvalOptions(timing=False))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert [c.name for c in outcome.cases] == ["64x64", "128x256", "32x32"]
    assert not any(c.heldout for c in outcome.cases)


def test_the_hard_coded_kernel_fails_every_heldout_case():
    outcome = evaluate(TASK, OVERFIT, EvalOptions(timing=False, case_set="all"))
    assert outcome.status.value == "incorrect"
    held = {c.name: c.passed for c in outcome.cases if c.heldout}
    visible = {c.name: c.passed for c in outcome.cases if not c.heldout}
    assert visible == {"64x64": True, "128x256": True, "32x32": True}
    assert held == {"heldout-33x31": False, "heldout-f64-7x1023": False}
    assert outcome.to_dict()["cases"][3]["heldout"] is True


def test_an_honest_kernel_passes_the_heldout_cases_too():
    outcome = evaluate(TASK, HONEST, EvalOptions(timing=False, case_set="all"))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.cases_passed == outcome.cases_total == 5


def test_on_the_builtin_suite_kope_eval_held_out_shows_the_hard_coded_kernel_failing(kope_cli):
    visible = kope_cli("eval", "relu", str(OVERFIT), "--no-timing", "--json", "--seeds", "1")
    assert visible.returncode == 0, visible.stderr
    assert json.loads(visible.stdout)["cases_passed"] == 9
    both = kope_cli("eval", "relu", str(OVERFIT), "--no-timing", "--json", "--seeds", "1", "--held-out")
    assert both.returncode == 1
    cases = json.loads(both.stdout)["cases"]
    assert [c["passed"] for c in cases if not c.get("heldout")] == [True] * 9
    held = [c for c in cases if c.get("heldout")]
    assert len(held) >= 3 and not any(c["passed"] for c in held)
