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
    ("correct", "a", "expected"),
    [
        (False, 0.0, "failed"),
        (True, 0.71, "negative"),  # a 0.71x kernel: slower than PyTorch
        (True, 0.95, "ineffective"),
        (True, 1.02, "partial"),
        (True, 1.5, "effective"),
        (True, None, "partial"),  # correct, speed unknown: neutral
    ],
)
def test_outcome_class_is_the_speedup_over_pytorch(correct, a, expected):
    assert outcome_class(correct, a) == expected


def test_a_step_that_gains_on_its_parent_but_is_slower_than_pytorch_is_negative_with_an_up_mark():
    # an elu lineage 4x slower than PyTorch: the step is 2.5x faster than its parent, still 0.25x PyTorch
    facts = DecisionFacts("t/elu:s1", "elu", 1, "unroll: 2 -> 4", "correct", 0.25, 2.5, True, 0.1, None)
    row = decision_row(facts)
    assert row["class"] == "negative" and row["caption"] == "0.25× ↑2.50 · s1 unroll 2→4"


def test_a_step_slower_than_its_parent_but_faster_than_pytorch_is_effective_with_a_down_mark():
    facts = DecisionFacts("t/x:s2", "relu", 2, "block: 4096 -> 8192", "correct", 1.2, 0.5, True, 2.4, None)
    row = decision_row(facts)
    assert row["class"] == "effective" and row["caption"] == "1.20× ↓0.50 · s2 block 4096→8192"


def test_a_child_of_a_failed_parent_has_no_step_mark():
    facts = DecisionFacts("t/x:s1", "relu", 1, "retry", "correct", 0.8, 1.0, True, 0.0, None)
    row = decision_row(facts)
    assert row["class"] == "negative" and row["root"] is False and row["caption"] == "0.80× · s1 retry"


def test_every_class_has_a_label():
    assert sorted(CLASS_LABELS.values()) == ["Effective", "Failed", "Ineffective", "Negative", "Partial"]


def test_caption_reads_speedup_first_then_the_step_mark_and_the_change():
    change = {"template": "pointwise", "change": {"knob": "unroll", "from": 2, "to": 1}}
    assert decision_caption(3, "unroll: 2 -> 1", change, "correct", 2.3612, mark="↑1.69") == (
        "2.36× ↑1.69 · s3 unroll 2→1"
    )
    assert (
        decision_caption(4, "block: 16384 -> 4096", None, "compile_error", 0.0) == "compile error · s4 block 16384→4096"
    )
    assert decision_caption(2, "x", None, "correct", None) == "speed ? · s2 x"


def test_a_root_caption_names_its_operator():
    assert decision_caption(0, "baseline: template pointwise", None, "correct", 0.71, "relu") == (
        "0.71× · relu · s0 baseline pointwise"
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
    assert root["root"] and not root["backtrack"] and root["caption"] == "1.20× · relu · s0 baseline"
    assert back["backtrack"] and not back["root"] and back["caption"] == "1.20× ↑1.00 · s5 b"
