"""What people read on the graph: outcome classes, captions, per-case columns (no database)."""

import pytest

from kope.memory.present import (
    CLASS_LABELS,
    DecisionFacts,
    case_columns,
    decision_caption,
    decision_row,
    kernel_caption,
    outcome_class,
    run_caption,
    short_title,
)


@pytest.mark.parametrize(
    ("correct", "a", "r", "against_reference", "expected"),
    [
        (False, 0.0, 0.0, False, "failed"),
        (False, 0.0, 0.0, True, "failed"),
        (True, 0.71, 1.0, True, "negative"),  # a 0.71x root: slower than PyTorch, though its step ratio is 1
        (True, 0.95, 1.0, True, "ineffective"),
        (True, 1.02, 1.0, True, "partial"),
        (True, 1.5, 1.0, True, "effective"),
        (True, 2.0, 2.0, False, "effective"),
        (True, 1.2, 1.03, False, "partial"),
        (True, 1.2, 0.9, False, "ineffective"),
        (True, 1.2, 0.5, False, "negative"),  # faster than PyTorch, but half as fast as its parent
        (True, None, 1.0, False, "partial"),  # correct, speed unknown: neutral
        (True, None, 1.0, True, "partial"),
    ],
)
def test_outcome_class_compares_with_the_parent_or_with_pytorch_where_there_is_no_parent_speed(
    correct, a, r, against_reference, expected
):
    assert outcome_class(correct, a, r, against_reference) == expected


def test_a_child_of_a_failed_parent_is_judged_against_pytorch():
    facts = DecisionFacts("t/x:s1", "relu", 1, "retry", "correct", 0.8, 1.0, True, 0.0, None)
    assert decision_row(facts)["class"] == "negative" and decision_row(facts)["root"] is False


def test_every_class_has_a_label():
    assert sorted(CLASS_LABELS.values()) == ["Effective", "Failed", "Ineffective", "Negative", "Partial"]


def test_caption_reads_step_change_and_speedup():
    change = {"template": "pointwise", "change": {"knob": "unroll", "from": 2, "to": 1}}
    assert decision_caption(3, "unroll: 2 -> 1", change, "correct", 2.3612) == "s3 unroll 2→1 · 2.36×"
    assert (
        decision_caption(4, "block: 16384 -> 4096", None, "compile_error", 0.0) == "s4 block 16384→4096 · compile error"
    )
    assert decision_caption(2, "x", None, "correct", None) == "s2 x · speed ?"


def test_a_root_caption_names_its_operator():
    assert decision_caption(0, "baseline: template pointwise", None, "correct", 0.71, "relu") == (
        "relu · s0 baseline pointwise · 0.71×"
    )


def test_long_titles_are_cut_at_a_word():
    text = short_title("start from the best recorded settings (relu)")
    assert text == "start from the best…" and len(text) <= 21


def test_run_and_kernel_captions():
    assert run_caption("relu", 1_780_000_000.0) == "relu · 2026-05-28 20:26"
    assert kernel_caption("84b107e3" + "0" * 56, "pointwise") == "pointwise · 84b107e"
    assert kernel_caption("286198f1" + "0" * 56, None) == "kernel · 286198f"


def test_case_columns_are_display_strings_in_case_order():
    cols = case_columns(
        [
            {"name": "small", "passed": True, "speedup": 2.5, "error": None, "ref_ms": 1.0, "cand_ms": 0.4},
            {"name": "big", "passed": False, "speedup": None, "error": "max abs error 0.3\nmore", "ref_ms": None},
        ]
    )
    assert cols == {
        "case_names": ["small", "big"],
        "case_results": ["passed · PyTorch 1 ms, kernel 0.4 ms", "failed: max abs error 0.3"],
        "case_speedups": ["2.50×", "-"],
    }


def test_decision_row_marks_roots_and_backtracks():
    root = decision_row(DecisionFacts("t/r:s0", "relu", 0, "baseline", "correct", 1.2, 1.0, False, None, None))
    back = decision_row(DecisionFacts("t/r:s5", "relu", 5, "b", "correct", 1.2, 1.0, True, 1.2, {"backtracked": True}))
    assert root["root"] and not root["backtrack"] and root["caption"].startswith("relu · s0")
    assert back["backtrack"] and not back["root"] and back["caption"].startswith("s5 ")
