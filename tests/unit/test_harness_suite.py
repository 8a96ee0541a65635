"""The built-in suite's discovery API: scanning tasks and candidates, lookups, consistency."""

import pytest

from harness import suite
from harness.errors import TaskNotFoundError
from harness.vocabulary import FAMILIES

MINE = {"relu", "sum_dim", "softmax", "layer_norm", "matmul", "conv2d", "gemm_bias_relu", "mlp_block"}


def test_list_tasks_finds_every_task_file():
    tasks = suite.list_tasks()
    assert {t.operator for t in tasks} >= MINE
    assert len(tasks) == len(suite.task_files())
    assert all(t.family in FAMILIES and t.level in (1, 2, 3, 4) for t in tasks)


def test_every_built_in_task_is_consistent_with_its_path():
    for t in suite.list_tasks():
        assert t.path.parent.name == t.family and t.path.stem == t.operator


def test_every_built_in_task_has_at_least_eight_named_cases():
    for t in suite.list_tasks():
        assert len(t.cases) >= 8, t.operator
        assert len({c.name for c in t.cases}) == len(t.cases)


def test_list_tasks_filters_by_family():
    assert {t.operator for t in suite.list_tasks("matmul")} >= {"matmul"}
    assert all(t.family == "matmul" for t in suite.list_tasks("matmul"))
    with pytest.raises(TaskNotFoundError, match="unknown family"):
        suite.list_tasks("activation")


def test_find_task_by_name_or_path():
    by_name = suite.find_task("softmax")
    assert by_name.family == "normalization"
    assert suite.find_task(str(by_name.path)).operator == "softmax"


def test_find_task_suggests_close_names():
    with pytest.raises(TaskNotFoundError) as info:
        suite.find_task("sofmax")
    assert "softmax" in str(info.value)
    with pytest.raises(TaskNotFoundError, match="task file not found"):
        suite.find_task("/no/such/task.py")


def test_candidates_are_found_by_operator():
    candidates = suite.list_candidates("cpu")
    assert set(candidates) >= MINE
    assert suite.find_candidate("relu") == candidates["relu"]
    assert suite.find_candidate("no_such_operator") is None
    assert suite.list_candidates("npu") == {}


def test_every_candidate_belongs_to_a_task():
    operators = {t.operator for t in suite.list_tasks()}
    assert set(suite.list_candidates("cpu")) <= operators
