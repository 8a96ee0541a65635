"""KOPE's boundary with the harness: typed errors callers can test with isinstance."""

import pytest

from kope.boundary import TargetUnavailableError, TaskError, find_task, load_task_view, select_cases
from kope.errors import KopeError, ToolMissingError


def test_an_unknown_task_is_a_task_error_with_a_hint():
    with pytest.raises(TaskError) as info:
        find_task("relux")
    assert isinstance(info.value, KopeError) and info.value.exit_code == 2
    assert "no built-in task named 'relux'" in info.value.message and "relu" in (info.value.hint or "")


def test_a_case_selection_the_task_lacks_is_a_task_error():
    with pytest.raises(TaskError, match="case"):
        select_cases(find_task("relu"), "999")


def test_a_target_this_machine_cannot_run_is_a_task_error_and_a_missing_tool():
    assert issubclass(TargetUnavailableError, TaskError) and issubclass(TargetUnavailableError, ToolMissingError)
    assert TargetUnavailableError("x").exit_code == 3


def test_a_task_view_carries_the_reference_and_the_cases():
    view, path = load_task_view("relu")
    assert view.operator == "relu" and view.family == "elementwise" and "class Model" in view.source
    assert path.name == "relu.py" and view.cases and all("name" in c for c in view.cases)
    assert [name for name, _ in view.case_params()] == [c["name"] for c in view.cases]
