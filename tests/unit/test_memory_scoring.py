"""Step ratio, labels, d(v) and confidence: the definitions in kope/memory/scoring.py."""

import dataclasses

import pytest

from kope.memory import scoring, synthetic


@pytest.mark.parametrize(
    ("r", "label"),
    [
        (1.05, "effective"),
        (1.0499999, "partial"),
        (1.0, "partial"),
        (0.9999, "ineffective"),
        (0.85, "ineffective"),
        (0.8499, "negative"),
        (0.0, "negative"),
        (3.0, "effective"),
    ],
)
def test_label_thresholds_for_correct_outcomes(r, label):
    assert scoring.label_for(r, correct=True) == label


def test_a_failed_outcome_is_never_effective_even_with_a_measured_speedup():
    failed = synthetic.outcome("softmax", "incorrect", None)
    assert scoring.absolute_speedup(failed) == 0.0
    r = scoring.step_ratio(0.0, False, 1.0, True)
    assert r == 0.0 and scoring.label_for(r, correct=False) == "negative"
    assert scoring.label_for(2.0, correct=False) != "effective"


def test_step_ratio_is_one_for_roots_non_positive_parents_and_unknown_speed():
    assert scoring.step_ratio(3.0, True, None, has_parent=False) == 1.0
    assert scoring.step_ratio(3.0, True, 0.0, has_parent=True) == 1.0
    assert scoring.step_ratio(3.0, True, None, has_parent=True) == 1.0
    assert scoring.step_ratio(None, True, 2.0, has_parent=True) == 1.0
    assert scoring.step_ratio(3.0, True, 2.0, has_parent=True) == 1.5


def test_a_correct_outcome_without_valid_timings_has_unknown_speed():
    o = dataclasses.replace(synthetic.outcome("softmax", "correct", 2.0), timings_valid=False)
    assert scoring.absolute_speedup(o) is None
    assert scoring.confidence(o) == scoring.UNKNOWN_SPEED_CONFIDENCE


def test_downstream_score_formula():
    assert scoring.downstream(1.2, [0.5, 0.25]) == pytest.approx(0.5 * 1.2 + 0.35 * 0.75)


def test_recompute_all_on_a_hand_computed_tree():
    # root(r=1) -> a(r=1.1) -> b(r=0.5); root -> c(r=0)
    scores = scoring.recompute_all({"root": (1.0, None), "a": (1.1, "root"), "b": (0.5, "a"), "c": (0.0, "root")})
    assert scores["b"] == pytest.approx(0.25)
    assert scores["a"] == pytest.approx(0.55 + 0.35 * 0.25)
    assert scores["c"] == 0.0
    assert scores["root"] == pytest.approx(0.5 + 0.35 * (0.55 + 0.35 * 0.25))


def test_confidence_is_lower_for_noisy_timings_and_full_for_failures():
    assert scoring.confidence(synthetic.outcome("x", "correct", 1.5, cv=0.25)) == pytest.approx(0.8)
    assert scoring.confidence(synthetic.outcome("x", "correct", 1.5, cv=0.0)) == 1.0
    assert scoring.confidence(synthetic.outcome("x", "compile_error", None)) == 1.0


def test_incumbent_key_prefers_faster_then_earlier_and_ranks_unknown_speed_lowest():
    candidates = [(None, 0), (1.5, 3), (1.5, 2), (1.2, 1)]
    assert max(candidates, key=lambda c: scoring.incumbent_key(*c)) == (1.5, 2)
    assert max([(None, 4), (None, 1)], key=lambda c: scoring.incumbent_key(*c)) == (None, 1)
