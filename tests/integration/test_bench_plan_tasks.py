"""What a bench runs, where building the plan loads task files (each in a sandboxed worker process, seconds each);
the rest of the plan's checks are in tests/unit/test_bench_plan.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from kope.bench.plan import BenchOptions, build_plan
from kope.errors import UsageError
from tests.support.plan_tasks import TASK, write_task


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


def test_two_tasks_with_one_operator_name_are_refused(tmp_path):
    write_task(tmp_path, "same", name="one")
    write_task(tmp_path, "same", name="two")
    with pytest.raises(UsageError, match="defined twice"):
        build_plan(BenchOptions(suite=str(tmp_path), name="t"))


def test_a_case_selection_some_operator_lacks_is_refused_before_anything_runs(tmp_path):
    write_task(tmp_path, "a1")
    with pytest.raises(UsageError, match="out of range"):
        build_plan(BenchOptions(suite=str(tmp_path), cases="0-5", name="t"))


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
