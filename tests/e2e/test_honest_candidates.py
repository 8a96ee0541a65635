"""Honest candidates are never refused: an answer that repeats the task file around its kernel is correct."""

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate

ROOT = Path(__file__).resolve().parents[1]


def test_an_honest_candidate_carrying_get_inputs_is_correct():
    outcome = evaluate(
        ROOT / "fixtures" / "tasks" / "tiny_relu.py",
        ROOT / "fixtures" / "honest" / "tiny_relu_carries_task.py",
        EvalOptions(timing=False),
    )
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.cases_passed == outcome.cases_total == 2
