"""Held-out cases never reach what a proposer sees: kope tasks show, the prompt (hot tier), the task view."""

import json

import pytest

from harness.suite import list_tasks
from kope.context.state import TaskView

HELD = "heldout-"  # every built-in held-out case name starts with it


def test_every_builtin_operator_has_heldout_cases_with_the_visible_cases_keys():
    for info in list_tasks():
        assert len(info.heldout_cases) >= 3, info.operator
        keys = {k for c in info.cases for k in c.params} | {"DTYPE"}
        for case in info.heldout_cases:
            assert case.name.startswith(HELD) and set(case.params) <= keys, (info.operator, case.name)
        shapes = {json.dumps(c.params, sort_keys=True) for c in info.cases}
        assert not shapes & {json.dumps(c.params, sort_keys=True) for c in info.heldout_cases}, info.operator


@pytest.mark.parametrize("info", list_tasks(), ids=lambda i: i.operator)
def test_the_task_view_proposers_and_templates_get_holds_only_visible_cases(info):
    view = TaskView.from_info(info)
    assert [c["name"] for c in view.cases] == [c.name for c in info.cases]
    assert "HELDOUT_CASES" not in view.source and HELD not in view.source


def test_kope_tasks_show_gives_only_the_number_of_heldout_cases(kope_cli):
    text = kope_cli("tasks", "show", "relu", check=True).stdout
    assert "held-out cases (final evaluation only; not shown)" in text and HELD not in text
    data = json.loads(kope_cli("tasks", "show", "relu", "--json", check=True).stdout)
    assert data["heldout_cases"] == 4 and HELD not in json.dumps(data)
    source = kope_cli("tasks", "show", "relu", "--source", check=True).stdout
    assert "class Model" in source and "HELDOUT_CASES" not in source and HELD not in source


def test_the_prompt_holds_the_visible_cases_and_no_heldout_one(kope_cli, tmp_path):
    proc = kope_cli("context", "relu", "--no-memory", check=True)
    assert "odd-1531x2053" in proc.stdout  # a visible case
    assert HELD not in proc.stdout and "HELDOUT_CASES" not in proc.stdout


def test_the_loop_reads_the_task_without_heldout_cases():
    from kope.boundary import load_task_view

    view, path = load_task_view("relu")
    assert path.name == "relu.py" and len(view.cases) == 9
    assert HELD not in view.source and all(not c["name"].startswith(HELD) for c in view.cases)
