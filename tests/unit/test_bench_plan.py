"""What a bench runs: configurations, levels, names, the operator order, suite folders."""

from __future__ import annotations

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

TASK = """import torch
import torch.nn as nn

OPERATOR = "{operator}"
FAMILY = "{family}"
{level}
n = 64
CASES = [{{"name": "n64", "n": 64}}, {{"name": "n128", "n": 128}}]


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
"""


def write_task(
    folder: Path, operator: str, family: str = "elementwise", level: int | None = 1, name: str | None = None
) -> Path:
    path = folder / f"{name or operator}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TASK.format(operator=operator, family=family, level=f"LEVEL = {level}" if level else ""))
    return path


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


def test_pairs_run_operator_major_in_suite_order(tmp_path):
    write_task(tmp_path, "zeta", "elementwise", 1)
    write_task(tmp_path, "alpha", "reduction", 1)
    write_task(tmp_path, "beta", "elementwise", 2, name="level2/beta")
    plan = build_plan(BenchOptions(suite=str(tmp_path), configs=("active", "no-memory"), name="t"))
    assert [t.operator for t in plan.tasks] == ["zeta", "beta", "alpha"]  # family, then level, then name
    assert [(p.config, p.operator) for p in plan.pairs()] == [
        ("active", "zeta"),
        ("no-memory", "zeta"),
        ("active", "beta"),
        ("no-memory", "beta"),
        ("active", "alpha"),
        ("no-memory", "alpha"),
    ]
    assert plan.namespace("active") == "bench-t-active"


def test_levels_family_limit_and_cases_select_operators_and_cases(tmp_path):
    write_task(tmp_path, "a1", "elementwise", 1)
    write_task(tmp_path, "a2", "elementwise", 2)
    write_task(tmp_path, "b1", "reduction", 1)
    write_task(tmp_path, "plain", "elementwise", None)
    plan = build_plan(BenchOptions(suite=str(tmp_path), levels=(1,), family="elementwise", cases="1", name="t"))
    assert [(t.operator, t.cases) for t in plan.tasks] == [("a1", ("n128",))]
    everything = build_plan(BenchOptions(suite=str(tmp_path), limit=2, name="t"))
    assert len(everything.tasks) == 2


def test_the_builtin_suite_is_selected_by_level_and_family():
    plan = build_plan(BenchOptions(suite="builtin", levels=(1,), family="elementwise", limit=3, cases="0-2", name="t"))
    assert len(plan.tasks) == 3
    assert all(t.family == "elementwise" and t.level == 1 and len(t.cases) == 3 for t in plan.tasks)


def test_a_missing_suite_folder_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="suite folder not found"):
        build_plan(BenchOptions(suite=str(tmp_path / "nope"), name="t"))


def test_a_folder_without_tasks_is_a_clear_error(tmp_path):
    with pytest.raises(UsageError, match="no task files"):
        build_plan(BenchOptions(suite=str(tmp_path), name="t"))


def test_two_tasks_with_one_operator_name_are_refused(tmp_path):
    write_task(tmp_path, "same", name="one")
    write_task(tmp_path, "same", name="two")
    with pytest.raises(UsageError, match="defined twice"):
        build_plan(BenchOptions(suite=str(tmp_path), name="t"))


def test_a_case_selection_some_operator_lacks_is_refused_before_anything_runs(tmp_path):
    write_task(tmp_path, "a1")
    with pytest.raises(UsageError, match="out of range"):
        build_plan(BenchOptions(suite=str(tmp_path), cases="0-5", name="t"))


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


def test_a_plain_kernelbench_folder_takes_levels_from_its_folders_families_from_its_structure(tmp_path):
    import shutil

    from kope.bench.plan import _natural

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"
    for level in ("level1", "level2"):
        shutil.copytree(fixtures / level, tmp_path / level)
    plan = build_plan(BenchOptions(suite=str(tmp_path), name="kb"))
    assert [(t.operator, t.level, t.family, t.cases) for t in plan.tasks] == [  # no FAMILY: the traced structure's
        ("21_sigmoid", 1, "elementwise", ("default",)),
        ("47_sum_reduction_over_a_dimension", 1, "reduction", ("default",)),
        ("4_matrix_vector_multiplication", 1, "matmul", ("default",)),
        ("12_gemm_multiply_leakyrelu", 2, "fused", ("default",)),
    ]
    assert sorted(["21_sigmoid", "4_matrix_vector_multiplication"], key=_natural)[0] == "4_matrix_vector_multiplication"
    assert [t.operator for t in build_plan(BenchOptions(suite=str(tmp_path), levels=(2,), name="kb")).tasks] == [
        "12_gemm_multiply_leakyrelu"
    ]


def test_several_families_are_selected_in_suite_order():
    from kope.bench.plan import BenchOptions, build_plan

    plan = build_plan(BenchOptions(family="reduction,elementwise", name="x"))
    families = [t.family for t in plan.tasks]
    assert set(families) == {"elementwise", "reduction"} and families == sorted(
        families, key=["elementwise", "reduction"].index
    )
    with pytest.raises(UsageError, match="unknown family 'reductions'"):
        build_plan(BenchOptions(family="elementwise,reductions", name="x"))


def test_a_task_file_that_fails_to_import_is_planned_as_an_error_with_the_message(tmp_path):
    write_task(tmp_path, "a1")
    source = TASK.format(operator="needs_einops", family="fused", level="LEVEL = 3")
    (tmp_path / "needs_einops.py").write_text("import kope_no_such_module_einops\n" + source)
    plan = build_plan(BenchOptions(suite=str(tmp_path), name="t"))
    broken = plan.task("needs_einops")
    assert "No module named 'kope_no_such_module_einops'" in broken.error
    assert broken.cases == ("n64", "n128") and plan.task("a1").error is None  # the rest of the bench is intact


def test_a_broken_file_in_a_level_the_selection_leaves_out_does_not_stop_the_bench(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "level3").mkdir()
    write_task(tmp_path / "level1", "a1", level=None)
    (tmp_path / "level3" / "broken.py").write_text("import torch\nclass Model:\n    pass\n")
    plan = build_plan(BenchOptions(suite=str(tmp_path), levels=(1,), name="t"))
    assert [t.operator for t in plan.tasks] == ["a1"]
