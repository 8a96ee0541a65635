"""What a bench runs: configurations, levels, names, the operator order, suite folders.

The checks that load task files (a sandboxed worker process each) are in tests/integration/test_bench_plan_tasks.py.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kope.bench.plan import (
    BenchOptions,
    build_plan,
    default_baseline,
    default_name,
    namespace_for,
    parse_configs,
    parse_levels,
)
from kope.errors import UsageError
from tests.support.plan_tasks import write_task


def test_configurations_run_in_canonical_order_whatever_order_they_are_given_in():
    assert parse_configs("no-memory, active,none,active") == ("active", "none", "no-memory")


@pytest.mark.parametrize("text", ["", "active,fast", " , "])
def test_unknown_or_empty_configurations_are_refused(text):
    with pytest.raises(UsageError):
        parse_configs(text)


def test_levels_accept_lists_and_ranges():
    assert parse_levels("2,1") == (1, 2)
    assert parse_levels("1-3") == (1, 2, 3)
    assert parse_levels(None) == () and parse_levels("") == ()


@pytest.mark.parametrize("text", ["0", "5", "1,x", "3-1", "1-9", "one"])
def test_bad_levels_are_refused(text):
    with pytest.raises(UsageError, match="levels"):
        parse_levels(text)


def test_namespaces_are_named_after_the_bench_and_the_configuration():
    assert namespace_for("nightly", "no-memory") == "bench-nightly-no-memory"
    assert default_name(Path("/tmp/my bench!")) == "my-bench"


def test_default_baseline_is_no_memory_then_none_then_the_last():
    assert default_baseline(("active", "passive", "none", "no-memory")) == "no-memory"
    assert default_baseline(("active", "none")) == "none"
    assert default_baseline(("active", "passive")) == "passive"


def test_the_builtin_suite_is_selected_by_level_and_family():
    plan = build_plan(BenchOptions(suite="builtin", levels=(1,), family="elementwise", limit=3, cases="0-2", name="t"))
    assert len(plan.tasks) == 3
    assert all(t.family == "elementwise" and t.level == 1 and len(t.cases) == 3 for t in plan.tasks)


def test_a_replay_bench_leaves_out_the_operators_no_template_of_the_target_computes():
    """`kope bench record-space` records only operators a kernel template computes, so a replay bench on the triton
    target leaves normalization's channel norms out with a note (they failed the bench at their first step, with a
    hint to record what cannot be recorded); --limit counts the operators kept. A measured bench keeps them."""
    notes: list[str] = []
    options = BenchOptions(
        suite="builtin", family="normalization", target="triton", cases="0", name="t", evaluator="replay:spaces"
    )
    plan = build_plan(options, note=notes.append)
    assert [t.operator for t in plan.tasks] == ["layer_norm", "log_softmax", "rms_norm", "softmax"]
    assert len(notes) == 4 and all("no kernel template computes it on triton" in n for n in notes), notes
    assert any("batch_norm" in n for n in notes)
    limited = build_plan(replace(options, limit=2))
    assert [t.operator for t in limited.tasks] == ["layer_norm", "log_softmax"]
    measured = build_plan(replace(options, evaluator="local"))
    assert len(measured.tasks) == 8
    on_cpu = build_plan(replace(options, target="cpu"))
    assert len(on_cpu.tasks) == 8  # every built-in operator has a CPU template


def test_a_replay_bench_with_no_recordable_operator_is_one_clear_error():
    options = BenchOptions(
        suite="builtin", family="convolution", target="triton", cases="0", name="t", evaluator="replay:spaces"
    )
    with pytest.raises(UsageError, match="no selected operator has a kernel template on triton"):
        build_plan(options)


def test_a_missing_suite_folder_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="suite folder not found"):
        build_plan(BenchOptions(suite=str(tmp_path / "nope"), name="t"))


def test_a_folder_without_tasks_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="no task files"):
        build_plan(BenchOptions(suite=str(tmp_path), name="t"))


def test_a_broken_task_file_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nclass Model:\n    pass\n")
    with pytest.raises(UsageError, match="broken.py"):
        build_plan(BenchOptions(suite=str(tmp_path), name="t"))


def test_a_selection_matching_nothing_is_refused(tmp_path):
    write_task(tmp_path, "a1", level=1)
    with pytest.raises(UsageError, match="no task"):
        build_plan(BenchOptions(suite=str(tmp_path), levels=(3,), name="t"))


def test_options_round_trip_through_json_form():
    options = BenchOptions(
        suite="builtin",
        levels=(1, 2),
        configs=("active", "none"),
        out=Path("x"),
        name="n",
        imports=({"file": "/a.jsonl", "sha256": "00"},),
    )
    assert BenchOptions.from_dict(options.to_dict()) == options


def test_several_families_are_selected_in_suite_order():
    from kope.bench.plan import BenchOptions, build_plan

    plan = build_plan(BenchOptions(family="reduction,elementwise", name="x"))
    families = [t.family for t in plan.tasks]
    assert set(families) == {"elementwise", "reduction"} and families == sorted(
        families, key=["elementwise", "reduction"].index
    )
    with pytest.raises(UsageError, match="unknown family 'reductions'"):
        build_plan(BenchOptions(family="elementwise,reductions", name="x"))
