"""`kope bench --repeats`: per-repeat metrics, means and 95% intervals, per-family tables (no database)."""

from __future__ import annotations

import math

import pytest
from scipy.stats import t as student_t

from kope.bench.plan import BenchOptions, Pair, Plan, TaskEntry, namespace_for
from kope.bench.repeats import complete_repeats, for_repeat, interval, repeat_summary
from kope.bench.report import render_markdown, with_metrics, write_report
from kope.bench.store import BenchStore
from kope.errors import UsageError

OPERATORS = [("relu", "elementwise"), ("gelu", "elementwise"), ("softmax", "normalization"), ("rms", "normalization")]


def attempt(step, speedup):
    return {
        "step": step,
        "decision_id": f"d:s{step}",
        "status": "correct",
        "speedup": speedup,
        "a": speedup,
        "cases_total": 1,
        "cases_passed": 1,
        "prompt_tokens": 100,
        "completion_tokens": 0,
        "cases": [{"name": "c0", "passed": True, "speedup": speedup}],
    }


def pair(config, operator, repeat, speeds):
    return {
        "config": config,
        "operator": operator,
        "repeat": repeat,
        "run_id": f"run-{config}-{operator}-{repeat}",
        "status": "finished",
        "stop_reason": "step budget reached",
        "attempts": [attempt(i, s) for i, s in enumerate(speeds)],
        "memory_after": {"nodes": 1, "decisions": 1, "relationships": 1},
    }


def bench(repeats=3, drop=None):
    """active reaches the best at step 1 on the later operators, no-memory at step 3 (repeat 3: step 2)."""
    pairs = []
    for r in range(1, repeats + 1):
        for op, _family in OPERATORS:
            late = 2 if r == 3 else 3
            pairs.append(pair("active", op, r, [2.0, 1.0, 1.0]))
            pairs.append(pair("no-memory", op, r, [1.0] * (late - 1) + [2.0] + [1.0] * (3 - late)))
    if drop:
        pairs = [p for p in pairs if (p["config"], p["operator"], p["repeat"]) != drop]
    return {
        "schema": "kope.bench/1",
        "command": "kope bench --repeats 3",
        "options": {
            "name": "unit",
            "steps": 3,
            "suite": "builtin",
            "target": "cpu",
            "proposer": "offline",
            "repeats": repeats,
        },
        "repeats": repeats,
        "created_at": "now",
        "hardware": {},
        "configurations": [
            {"name": "active", "description": "a", "namespace": "bench-unit-active"},
            {"name": "no-memory", "description": "n", "namespace": "bench-unit-no-memory"},
        ],
        "operators": [{"operator": op, "family": f, "level": 1, "cases": ["c0"]} for op, f in OPERATORS],
        "imports": [],
        "memory_start": {},
        "pairs": pairs,
        "baseline": "no-memory",
    }


def test_the_interval_is_the_students_t_interval_of_the_mean():
    cell = interval([1.0, 2.0, 4.0])
    half = student_t.ppf(0.975, 2) * math.sqrt(7 / 3) / math.sqrt(3)
    assert cell.mean == pytest.approx(7 / 3) and cell.low == pytest.approx(7 / 3 - half)
    assert cell.high == pytest.approx(7 / 3 + half) and cell.n == 3
    assert interval([5.0]).low is None and interval([None]).mean is None


def test_speedups_are_averaged_in_log_space():
    cell = interval([1.0, 4.0], log=True)
    assert cell.mean == pytest.approx(2.0) and cell.low < 2.0 < cell.high


def test_each_repeat_is_measured_on_its_own_pairs():
    data = bench()
    assert len(for_repeat(data, 2)["pairs"]) == 8 and complete_repeats(data) == [1, 2, 3]
    summary = repeat_summary(data, "no-memory")
    steps = summary["summary"]
    # later operators: gelu and rms; active 1 step in every repeat, no-memory 3, 3, 2
    assert steps["active"]["steps_to_90"]["values"] == (1.0, 1.0, 1.0)
    assert steps["no-memory"]["steps_to_90"]["values"] == (3.0, 3.0, 2.0)
    assert steps["active"]["steps_ratio"]["mean"] == pytest.approx((1 / 3 * 1 / 3 * 1 / 2) ** (1 / 3))
    assert summary["families"]["elementwise"]["no-memory"]["steps_to_90"]["mean"] == pytest.approx(8 / 3)


def test_a_repeat_with_a_missing_pair_is_left_out_of_the_summary():
    summary = repeat_summary(bench(drop=("active", "gelu", 2)), "no-memory")
    assert summary["complete"] == [1, 3]
    assert summary["summary"]["no-memory"]["steps_to_90"]["n"] == 2


def test_the_report_has_the_repeats_table_the_family_table_and_their_plots(tmp_path):
    data = bench()
    full = with_metrics(data)
    text = render_markdown(full)
    assert "## 3 independent repeats (3 complete)" in text
    assert (
        "| active | 100.0% [100.0, 100.0] | 2.00x [2.00, 2.00] | 1.00x [1.00, 1.00] | 1.00 [1.00, 1.00] | 0.38 ["
        in text
    )
    assert "| elementwise | 1 | 1.00 [1.00, 1.00] | 2.67 [1.23, 4.10] | 1.00x [1.00, 1.00] |" in text
    assert "## Repeat 1" in text
    written = write_report(tmp_path, data)
    assert {p.name for p in written} >= {"summary.md", "repeats_steps.png", "repeats_paired.png"}
    assert len(full["runs"]) == 24 and len(full["pairs"]) == 8


def test_repeats_get_their_own_namespaces_seeds_and_files(tmp_path):
    plan = Plan(BenchOptions(name="x", repeats=2, configs=("active",)), [TaskEntry("relu", "elementwise", 1, "p", ())])
    assert [(p.repeat, p.seed, plan.namespace(p.config, p.repeat)) for p in plan.pairs()] == [
        (1, 0, "bench-x-active"),
        (2, 1, "bench-x-active-r2"),
    ]
    store = BenchStore(tmp_path)
    assert store.pair_file("active", "relu") == tmp_path / "pairs" / "active" / "relu.json"
    assert store.pair_file("active", "relu", 2) == tmp_path / "pairs" / "active" / "r2" / "relu.json"
    assert Pair("active", "relu", 0).key == ("active", "relu", 1)


def test_a_name_too_long_for_the_repeat_namespaces_is_refused():
    from kope.bench.plan import build_plan

    name = "n" * 48
    assert len(namespace_for(name, "no-memory")) == 64
    with pytest.raises(UsageError, match="too long for 3 repeats"):
        build_plan(BenchOptions(name=name, repeats=3, family="elementwise", configs=("active", "no-memory")))


def test_the_transfer_comparison_pairs_repeat_by_repeat_and_counts_prompts_with_other_hardware_rules():
    from kope.bench.transfer import compare_table

    cold, other = bench(), bench()
    other["hardware"] = {"class": "x86_64-avx512"}
    for p in other["pairs"]:
        p["attempts"] = [{**a, "speedup": 2 * a["speedup"]} for a in p["attempts"]]
        for c in (c for a in p["attempts"] for c in a["cases"]):
            c["speedup"] *= 2
    other["pairs"][0]["attempts"][0]["insights_used"] = [
        {"id": "rule:elementwise:aarch64-neon:compile_error", "kind": "rule", "hw_class": "aarch64-neon"},
        {"id": "rule:elementwise:x86_64-avx512:timeout", "kind": "rule", "hw_class": "x86_64-avx512"},
    ]
    rows = compare_table([cold, other], ["cold", "other"]).splitlines()
    assert rows[4].startswith("| other | none (cold start) | active |")
    assert "| 2.00x [2.00, 2.00] (n=12) |" in rows[4] and "| 3 | 1/36 | 2.00x [2.00, 2.00] |" in rows[4]


def test_the_fraction_of_the_optimum_reached_after_each_step_is_a_curve_per_family_with_intervals(tmp_path):
    """Issue 34: per family, the fraction of the optimum each configuration reached after each step, with 95%
    intervals over the repeats, and its plot. On the later operators active is at the best (2.0x) from step 1;
    no-memory at half of it until step 3 (repeat 3: step 2)."""
    summary = repeat_summary(bench(), "no-memory")
    family = summary["families"]["elementwise"]
    assert [c["mean"] for c in family["active"]["optimum_by_step"]] == pytest.approx([1.0, 1.0, 1.0])
    curve = family["no-memory"]["optimum_by_step"]
    assert [c["mean"] for c in curve] == pytest.approx([0.5, 2 / 3, 1.0])
    assert curve[1]["values"] == pytest.approx((0.5, 0.5, 1.0)) and curve[1]["low"] < 2 / 3 < curve[1]["high"]
    written = write_report(tmp_path, bench())
    assert "repeats_curve.png" in {p.name for p in written}
    assert "plots/repeats_curve.png" in (tmp_path / "summary.md").read_text()
