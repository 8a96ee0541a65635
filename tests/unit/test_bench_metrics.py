"""The bench metrics on hand-made per-case results, each checked against a value computed by hand."""

from __future__ import annotations

import math

import pytest

from kope.bench.metrics import (
    bench_metrics,
    best_attempt,
    config_metrics,
    geomean,
    memory_series,
    paired_speedup,
    severe_regressions,
    steps_to_best,
    tokens_by_step,
)
from tests.support import bench_results


def attempt(step, cases, speedup=None, prompt=0, completion=0):
    """cases: {name: (passed, speedup)}."""
    return {
        "step": step,
        "decision_id": f"d{step}",
        "speedup": speedup,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cases": [{"name": n, "passed": ok, "speedup": s} for n, (ok, s) in cases.items()],
    }


def bench(operators, pairs, configs=("with", "without")):
    """operators: [(name, level, [case names])]; pairs: {(config, operator): [attempts]}."""
    return {
        "configurations": [{"name": c} for c in configs],
        "operators": [
            {"operator": n, "family": "elementwise", "level": lv, "cases": list(cs)} for n, lv, cs in operators
        ],
        "pairs": [{"config": c, "operator": o, "attempts": a} for (c, o), a in pairs.items()],
    }


def test_best_attempt_prefers_more_passing_cases_over_a_higher_speedup():
    few_fast = attempt(0, {"a": (True, 9.0), "b": (False, None)}, speedup=9.0)
    all_slow = attempt(1, {"a": (True, 0.5), "b": (True, 0.5)}, speedup=0.5)
    assert best_attempt([few_fast, all_slow], ["a", "b"]) is all_slow


def test_best_attempt_breaks_ties_by_speedup_then_earliest_step():
    first = attempt(0, {"a": (True, 1.0)}, speedup=1.5)
    faster = attempt(1, {"a": (True, 1.0)}, speedup=2.0)
    same = attempt(2, {"a": (True, 1.0)}, speedup=2.0)
    assert best_attempt([first, faster, same], ["a"]) is faster
    no_speed = [attempt(3, {"a": (False, None)}), attempt(4, {"a": (False, None)})]
    assert best_attempt(no_speed, ["a"])["step"] == 3
    assert best_attempt([], ["a"]) is None


def test_best_attempt_counts_only_the_selected_cases():
    outside = attempt(0, {"a": (False, None), "zz": (True, 1.0), "yy": (True, 1.0)})
    inside = attempt(1, {"a": (True, 1.0)})
    assert best_attempt([outside, inside], ["a"]) is inside


def test_missing_operators_count_all_their_cases_as_failures():
    data = bench(
        [("op1", 1, ["a", "b"]), ("op2", 1, ["a", "b", "c"]), ("op3", 2, ["a"])],
        {("with", "op1"): [attempt(0, {"a": (True, 2.0), "b": (True, 2.0)}, 2.0)], ("with", "op3"): []},
    )  # op2 never finished; op3 finished without any attempt
    m = config_metrics(data, "with")
    assert (m.operators, m.operators_passed, m.operators_missing) == (3, 1, 2)
    assert (m.cases, m.cases_passed) == (6, 2)
    assert m.pass_rate == pytest.approx(2 / 6)
    assert m.operator_pass_rate == pytest.approx(1 / 3)


def test_an_operator_passes_with_a_single_passing_case_and_failures_count_as_failed_cases():
    data = bench(
        [("op1", 1, ["a", "b", "c"])],
        {("with", "op1"): [attempt(0, {"a": (False, None), "b": (True, None), "c": (False, None)})]},
    )
    m = config_metrics(data, "with")
    assert (m.operators_passed, m.cases_passed, m.cases) == (1, 1, 3)


def test_a_selected_case_the_outcome_does_not_list_is_a_failure():
    data = bench([("op1", 1, ["a", "b"])], {("with", "op1"): [attempt(0, {"a": (True, 1.5)}, 1.5)]})
    m = config_metrics(data, "with")
    assert (m.cases_passed, m.cases) == (1, 2)


def test_per_level_breakdown_counts_operators_and_cases_of_each_level():
    data = bench(
        [("l1a", 1, ["a", "b"]), ("l1b", 1, ["a"]), ("l2", 2, ["a", "b"]), ("l4", 4, ["a"]), ("plain", None, ["x"])],
        {
            ("with", "l1a"): [attempt(0, {"a": (True, 1.0), "b": (False, None)})],
            ("with", "l1b"): [attempt(0, {"a": (True, 1.0)})],
            ("with", "l2"): [attempt(0, {"a": (False, None), "b": (False, None)})],
            ("with", "l4"): [attempt(0, {"a": (True, 1.0)})],
            ("with", "plain"): [attempt(0, {"x": (True, 1.0)})],
        },
    )
    levels = config_metrics(data, "with").levels
    assert list(levels) == ["1", "2", "4", "unknown"]
    assert (levels["1"].operators, levels["1"].operators_passed, levels["1"].cases, levels["1"].cases_passed) == (
        2,
        2,
        3,
        2,
    )
    assert levels["1"].pass_rate == pytest.approx(2 / 3)
    assert (levels["2"].operators_passed, levels["2"].pass_rate) == (0, 0.0)
    assert levels["4"].pass_rate == 1.0
    assert levels["unknown"].cases_passed == 1


def test_geomean_uses_positive_fields_only():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([2.0, 8.0, 0.0, -3.0, None, float("nan"), float("inf"), True]) == pytest.approx(4.0)
    assert geomean([0.0, -1.0, None]) is None
    assert geomean([]) is None


def test_geomean_speedup_is_over_passing_cases_of_the_best_attempts_with_positive_speedups():
    data = bench(
        [("op1", 1, ["a", "b", "c"]), ("op2", 1, ["a", "b"])],
        {
            ("with", "op1"): [attempt(0, {"a": (True, 2.0), "b": (True, 0.0), "c": (True, None)}, 2.0)],
            ("with", "op2"): [
                attempt(0, {"a": (True, 8.0), "b": (False, 100.0)}, 8.0),
                attempt(1, {"a": (False, 50.0), "b": (False, None)}),
            ],
        },
    )
    m = config_metrics(data, "with")
    # positive speedups of passing cases: op1.a = 2, op2.a = 8 (op1.b is 0, op1.c unmeasured, op2.b failed)
    assert m.geomean_speedup == pytest.approx(4.0)
    assert m.speedup_cases == 2


def test_geomean_speedup_is_none_when_no_case_was_timed():
    data = bench([("op1", 1, ["a"])], {("with", "op1"): [attempt(0, {"a": (True, None)})]})
    m = config_metrics(data, "with")
    assert (m.geomean_speedup, m.speedup_cases) == (None, 0)


def test_paired_speedup_uses_the_exact_intersection_of_cases_both_configurations_timed():
    data = bench(
        [("op1", 1, ["a", "b", "c"]), ("op2", 1, ["a"])],
        {
            ("with", "op1"): [attempt(0, {"a": (True, 4.0), "b": (True, 3.0), "c": (True, 9.0)}, 4.0)],
            ("without", "op1"): [attempt(0, {"a": (True, 1.0), "b": (True, 0.0), "c": (False, None)}, 1.0)],
            ("with", "op2"): [attempt(0, {"a": (True, 2.0)}, 2.0)],
            ("without", "op2"): [attempt(0, {"a": (True, 8.0)}, 8.0)],
        },
    )
    paired = paired_speedup(data, "with", "without")
    # op1.a: 4/1 = 4, op2.a: 2/8 = 0.25 (op1.b: without's speedup is 0; op1.c: without failed)
    assert paired.n == 2
    assert paired.speedup == pytest.approx(math.sqrt(4 * 0.25))
    assert paired.baseline == "without"


def test_paired_speedup_of_an_empty_intersection_is_none():
    data = bench(
        [("op1", 1, ["a"]), ("op2", 1, ["a"])],
        {
            ("with", "op1"): [attempt(0, {"a": (True, 2.0)}, 2.0)],
            ("without", "op2"): [attempt(0, {"a": (True, 2.0)}, 2.0)],
        },
    )
    paired = paired_speedup(data, "with", "without")
    assert (paired.speedup, paired.n) == (None, 0)


def test_bench_metrics_pairs_every_configuration_but_the_baseline():
    data = bench(
        [("op1", 1, ["a"])],
        {
            ("with", "op1"): [attempt(0, {"a": (True, 3.0)}, 3.0)],
            ("without", "op1"): [attempt(0, {"a": (True, 1.5)}, 1.5)],
        },
    )
    metrics = bench_metrics(data, "without")
    assert metrics["without"].paired is None
    assert metrics["with"].paired.speedup == pytest.approx(2.0) and metrics["with"].paired.n == 1


def test_tokens_total_and_per_step_sum_every_recorded_attempt():
    data = bench(
        [("op1", 1, ["a"]), ("op2", 1, ["a"]), ("op3", 1, ["a"])],
        {
            ("with", "op1"): [
                attempt(0, {"a": (False, None)}, prompt=1000, completion=100),
                attempt(1, {"a": (True, 1.0)}, prompt=1200, completion=50),
            ],
            ("with", "op2"): [attempt(0, {"a": (True, 1.0)}, prompt=800, completion=0)],
            ("with", "op3"): [],
        },
    )
    m = config_metrics(data, "with")
    assert (m.prompt_tokens, m.completion_tokens, m.tokens, m.steps) == (3000, 150, 3150, 3)
    assert m.tokens_per_step == pytest.approx(1050.0)
    assert tokens_by_step(data, "with") == {0: pytest.approx((1100 + 800) / 2), 1: pytest.approx(1250.0)}


def test_tokens_per_step_is_none_without_attempts():
    data = bench([("op1", 1, ["a"])], {("with", "op1"): []})
    m = config_metrics(data, "with")
    assert (m.tokens, m.steps, m.tokens_per_step) == (0, 0, None)


def test_memory_series_starts_from_the_imported_size_and_follows_finishing_order():
    data = bench([("op1", 1, ["a"]), ("op2", 1, ["a"])], {})
    data["memory_start"] = {"with": {"nodes": 10, "decisions": 4}}
    data["pairs"] = [
        {"config": "with", "operator": "op1", "ended_at": 20.0, "memory_after": {"nodes": 30, "decisions": 9}},
        {"config": "with", "operator": "op2", "ended_at": 10.0, "memory_after": {"nodes": 20, "decisions": 6}},
        {"config": "without", "operator": "op1", "ended_at": 5.0, "memory_after": {"nodes": 1, "decisions": 1}},
    ]
    assert [(s["operator"], s["decisions"]) for s in memory_series(data, "with")] == [(None, 4), ("op2", 6), ("op1", 9)]


def test_steps_to_best_measures_later_operators_of_a_family_against_the_best_of_all_configurations():
    stb = steps_to_best(bench_results.results(), fraction=0.9)
    rows = {r["operator"]: r for r in stb.per_operator}
    assert [r["operator"] for r in stb.per_operator if r["later"]] == ["softmax", "gemm_bias_relu"]
    assert rows["relu"]["later"] is False and rows["relu"]["best"] == 1.9
    assert rows["relu"]["steps"] == {"active": 2, "no-memory": None}  # no-memory's only attempt is incorrect
    # softmax: best 1.2 (active, step 0); bar 1.08; no-memory's 0.7 never reaches it
    assert rows["softmax"]["best"] == 1.2 and rows["softmax"]["steps"] == {"active": 1, "no-memory": None}
    assert rows["gemm_bias_relu"]["best"] is None and rows["gemm_bias_relu"]["steps"] == {
        "active": None,
        "no-memory": None,
    }
    # over the later operators someone solved (softmax only), a miss counts as budget (2) + 1 = 3 steps
    assert stb.summary["active"] == {"operators": 1, "reached": 1, "mean_steps": 1.0}
    assert stb.summary["no-memory"] == {"operators": 1, "reached": 0, "mean_steps": 3.0}


def test_steps_to_best_lower_bar_is_reached_earlier():
    rows = {r["operator"]: r for r in steps_to_best(bench_results.results(), fraction=0.5).per_operator}
    assert rows["relu"]["steps"]["active"] == 1  # 1.16 >= 0.5 * 1.9
    assert rows["softmax"]["steps"]["no-memory"] == 1  # 0.7 >= 0.6


def test_on_replay_steps_are_counted_to_the_recorded_optimum_not_to_the_best_any_configuration_found():
    def ok(step, speedup):
        return {"step": step, "status": "correct", "speedup": speedup, "cases": []}

    data = {
        "configurations": [{"name": "with"}, {"name": "without"}],
        "options": {"steps": 3},
        "operators": [{"operator": "a", "family": "f"}, {"operator": "b", "family": "f"}],
        "pairs": [
            {"config": "with", "operator": "b", "attempts": [ok(0, 1.0), ok(1, 2.0), ok(2, 9.5)]},
            {"config": "without", "operator": "b", "attempts": [ok(0, 1.0), ok(1, 2.0), ok(2, 2.0)]},
        ],
    }
    found = {r["operator"]: r["steps"] for r in steps_to_best(data).per_operator}
    assert found["b"] == {"with": 3, "without": None}
    found = {r["operator"]: r["steps"] for r in steps_to_best({**data, "optima": {"b": 20.0}}).per_operator}
    assert found["b"] == {"with": None, "without": None}  # 9.5 is under 90% of the recorded 20x


def test_a_severe_regression_is_a_step_three_times_slower_than_the_state_it_started_from():
    attempts = [
        {"decision_id": "d0", "parent_id": None, "status": "correct", "speedup": 0.3},  # 3.3x under the reference
        {"decision_id": "d1", "parent_id": None, "status": "correct", "speedup": 6.0},
        {"decision_id": "d2", "parent_id": "d1", "status": "correct", "speedup": 2.0},  # exactly 3x: severe
        {"decision_id": "d3", "parent_id": "d1", "status": "correct", "speedup": 2.1},
        {"decision_id": "d4", "parent_id": "d1", "status": "wrong", "speedup": None},  # a failure is not timed
    ]
    assert severe_regressions(attempts) == 2
