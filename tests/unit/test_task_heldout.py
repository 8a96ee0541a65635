"""HELDOUT_CASES: validated like CASES, selected only on request, never in what a proposer or a listing sees."""

import textwrap
from pathlib import Path

import pytest

from harness.errors import OptionsError, TaskFormatError
from harness.task import load_task, select_cases, visible_source
from harness.task_loader import read_task_info

TASK = """
import torch
import torch.nn as nn

OPERATOR = "scaled_relu"
FAMILY = "elementwise"
DTYPE = "float32"
rows = 4
cols = 8
CASES = [
    {"name": "4x8", "rows": 4, "cols": 8},
    {"name": "3x5", "rows": 3, "cols": 5},
]
HELDOUT_CASES = [
    {"name": "secret-7x1023", "rows": 7, "cols": 1023},
    {"name": "secret-f64-1x9", "rows": 1, "cols": 9, "DTYPE": "float64"},
]

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(rows, cols, dtype=getattr(torch, DTYPE))]

def get_init_inputs():
    return []
"""


def write(tmp_path: Path, text: str = TASK) -> Path:
    path = tmp_path / "task.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_heldout_cases_follow_the_visible_ones_and_are_marked(tmp_path):
    task = load_task(write(tmp_path))
    assert [c.name for c in task.cases] == ["4x8", "3x5"]
    assert [(c.index, c.name, c.heldout) for c in task.heldout_cases] == [
        (2, "secret-7x1023", True),
        (3, "secret-f64-1x9", True),
    ]
    assert task.case(3).params == {"rows": 1, "cols": 9, "DTYPE": "float64"}


def test_read_task_info_reads_heldout_cases_without_running_the_file(tmp_path):
    info = read_task_info(write(tmp_path))
    assert [c.name for c in info.heldout_cases] == ["secret-7x1023", "secret-f64-1x9"]


def test_a_heldout_case_module_is_built_like_a_visible_one(tmp_path):
    task = load_task(write(tmp_path))
    module = task.module_for_case(task.case(2))
    assert tuple(module.get_inputs()[0].shape) == (7, 1023)


def test_cases_are_selected_from_the_visible_ones_by_default(tmp_path):
    task = load_task(write(tmp_path))
    assert [c.name for c in select_cases(task, None)] == ["4x8", "3x5"]
    assert [c.name for c in select_cases(task, None, "heldout")] == ["secret-7x1023", "secret-f64-1x9"]
    assert [c.index for c in select_cases(task, "1,2-3", "all")] == [1, 2, 3]


@pytest.mark.parametrize("spec", ["2", "secret-7x1023"])
def test_a_visible_selection_cannot_reach_a_heldout_case(tmp_path, spec):
    task = load_task(write(tmp_path))
    with pytest.raises(OptionsError) as err:
        select_cases(task, spec)
    assert "secret-f64" not in str(err.value)  # the message lists only visible cases


def test_an_unknown_case_set_is_an_options_error(tmp_path):
    with pytest.raises(OptionsError, match="case set must be one of visible, heldout, all"):
        select_cases(load_task(write(tmp_path)), None, "hidden")


@pytest.mark.parametrize(
    "edit, message",
    [
        (('"secret-7x1023"', '"3x5"'), "HELDOUT_CASES[0] (line 15) repeats the case name '3x5' (names are unique"),
        (('"rows": 7,', '"rowz": 7,'), "HELDOUT_CASES[0] (line 15) sets 'rowz', which is not a module-level name"),
        (('"DTYPE": "float64"', '"DTYPE": "float65"'), "HELDOUT_CASES[1] (line 16) sets DTYPE to 'float65'"),
        (("HELDOUT_CASES = [", "HELDOUT_CASES = ["), None),
    ],
)
def test_heldout_cases_are_validated_like_cases(tmp_path, edit, message):
    path = write(tmp_path, TASK.replace(*edit))
    if message is None:
        load_task(path)
        return
    for loader in (load_task, read_task_info):
        with pytest.raises(TaskFormatError) as err:
            loader(path)
        assert message in str(err.value)


def test_an_empty_heldout_list_is_refused(tmp_path):
    text = TASK.replace(TASK[TASK.index("HELDOUT_CASES") : TASK.index("]\n\nclass") + 1], "HELDOUT_CASES = []")
    with pytest.raises(TaskFormatError, match="HELDOUT_CASES .*must be a non-empty list of dicts"):
        load_task(write(tmp_path, text))


def test_to_dict_gives_only_the_number_of_heldout_cases(tmp_path):
    data = load_task(write(tmp_path)).to_dict()
    assert data["heldout_cases"] == 2 and "secret" not in repr(data)


def test_visible_source_drops_the_heldout_assignment_and_keeps_the_rest(tmp_path):
    source = write(tmp_path).read_text()
    shown = visible_source(source)
    assert "secret" not in shown and "HELDOUT_CASES" not in shown
    assert "CASES = [" in shown and "def get_inputs" in shown and "class Model" in shown
    assert visible_source(shown) == shown
