"""Task files: KernelBench files load unchanged; KOPE metadata and CASES; precise errors for bad files."""

import textwrap
from pathlib import Path

import pytest

from harness.errors import OptionsError, TaskFormatError, TaskNotFoundError
from harness.task import load_task, select_cases
from harness.task_loader import read_task_info

KERNELBENCH = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"

GOOD = """
import torch
import torch.nn as nn

OPERATOR = "scaled_relu"
FAMILY = "elementwise"
LEVEL = 1
DESCRIPTION = "relu(x) * SCALE"
DTYPE = "float32"
rows = 4
cols = 8
SCALE = 2.0
CASES = [
    {"name": "4x8", "rows": 4, "cols": 8},
    {"name": "f64-3x5", "rows": 3, "cols": 5, "DTYPE": "float64", "SCALE": 0.5},
]

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * SCALE

def get_inputs():
    return [torch.randn(rows, cols, dtype=getattr(torch, DTYPE))]

def get_init_inputs():
    return []
"""


def write(tmp_path: Path, text: str, name: str = "task.py") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_task_with_metadata_and_cases_loads(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    assert (task.operator, task.family, task.level, task.dtype) == ("scaled_relu", "elementwise", 1, "float32")
    assert [c.name for c in task.cases] == ["4x8", "f64-3x5"]
    assert task.cases[1].params == {"rows": 3, "cols": 5, "DTYPE": "float64", "SCALE": 0.5}


def test_a_case_sets_module_globals_on_a_fresh_module(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    second = task.module_for_case(task.cases[1])
    (x,) = second.get_inputs()
    assert tuple(x.shape) == (3, 5) and str(x.dtype) == "torch.float64" and second.SCALE == 0.5
    first = task.module_for_case(task.cases[0])
    assert first.SCALE == 2.0 and first.DTYPE == "float32"  # nothing leaks from the previous case


def test_apply_case_hook_replaces_global_overrides(tmp_path):
    text = GOOD.replace(
        "def get_init_inputs():",
        "SEEN = []\ndef apply_case(case):\n    SEEN.append(case['name'])\n    global rows\n    rows = 11\n\ndef get_init_inputs():",
    )
    task = load_task(write(tmp_path, text))
    module = task.module_for_case(task.cases[1])
    assert module.SEEN == ["f64-3x5"] and module.rows == 11 and module.cols == 8


def test_plain_kernelbench_file_loads_with_defaults():
    task = load_task(KERNELBENCH / "level2" / "12_Gemm_Multiply_LeakyReLU.py")
    assert task.operator == "12_gemm_multiply_leakyrelu"
    assert task.family == "unknown" and task.level == 2
    assert [(c.name, c.params) for c in task.cases] == [("default", {})]


def test_read_task_info_matches_load_without_running_the_file(tmp_path):
    path = write(tmp_path, GOOD.replace("import torch\n", "import torch\nraise SystemExit('must not run')\n", 1))
    info = read_task_info(path)
    assert info.operator == "scaled_relu" and len(info.cases) == 2


@pytest.mark.parametrize(
    "edit, message",
    [
        (("class Model(nn.Module):", "class Modle(nn.Module):"), "no `Model` defined at module level"),
        (("def get_inputs():", "def get_input():"), "no `get_inputs()` defined"),
        (("def get_init_inputs():", "def get_init():"), "no `get_init_inputs()` defined"),
        (('FAMILY = "elementwise"', 'FAMILY = "activation"'), "FAMILY (line 6) must be one of elementwise"),
        (("LEVEL = 1", "LEVEL = 7"), "LEVEL (line 7) must be an integer from 1 to 4"),
        (('OPERATOR = "scaled_relu"', 'OPERATOR = "Scaled ReLU"'), "OPERATOR (line 5) must be a snake_case string"),
        (('DTYPE = "float32"', 'DTYPE = "float33"'), "DTYPE (line 9) must name a torch dtype"),
        (
            ('{"name": "4x8", "rows": 4, "cols": 8}', '{"rows": 4, "cols": 8}'),
            "CASES[0] (line 14) needs a non-empty string 'name'",
        ),
        (('"name": "f64-3x5"', '"name": "4x8"'), "CASES[1] (line 15) repeats the case name '4x8'"),
        (
            ('"rows": 3, "cols": 5', '"rowz": 3, "cols": 5'),
            "CASES[1] (line 15) sets 'rowz', which is not a module-level name of the task (did you mean 'rows'?)",
        ),
        (('"DTYPE": "float64"', '"DTYPE": "double64"'), "CASES[1] (line 15) sets DTYPE to 'double64'"),
        (("CASES = [", "CASES = [] and ["), "CASES (line 13) must be a non-empty list"),
    ],
)
def test_bad_task_files_get_a_precise_message(tmp_path, edit, message):
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(TaskFormatError) as info:
        load_task(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_a_case_value_that_is_not_json_is_named(tmp_path):
    path = write(tmp_path, GOOD.replace('"rows": 3, "cols": 5', '"rows": 3, "cols": float("nan")'))
    with pytest.raises(TaskFormatError, match=r"CASES\[1\].*not JSON-serialisable"):
        load_task(path)


def test_a_syntax_error_names_the_line(tmp_path):
    path = write(tmp_path, GOOD.replace("def get_inputs():", "def get_inputs(:"))
    with pytest.raises(TaskFormatError, match=r"task\.py:\d+: syntax error"):
        load_task(path)


def test_an_exception_at_import_names_the_line(tmp_path):
    path = write(tmp_path, GOOD.replace("SCALE = 2.0", "SCALE = 1 / 0"))
    with pytest.raises(TaskFormatError, match=r"task\.py:12: importing the task raised ZeroDivisionError"):
        load_task(path)


def test_model_must_be_an_nn_module(tmp_path):
    path = write(tmp_path, GOOD.replace("class Model(nn.Module):", "class Model:"))
    with pytest.raises(TaskFormatError, match="`Model` must be a class deriving from torch.nn.Module"):
        load_task(path)


def test_several_problems_are_reported_together(tmp_path):
    path = write(tmp_path, GOOD.replace("LEVEL = 1", "LEVEL = 0").replace('FAMILY = "elementwise"', 'FAMILY = "x"'))
    message = str(pytest.raises(TaskFormatError, load_task, path).value)
    assert "LEVEL" in message and "FAMILY" in message


def test_missing_and_non_python_files_are_errors(tmp_path):
    with pytest.raises(TaskNotFoundError, match="task file not found"):
        load_task(tmp_path / "nope.py")
    with pytest.raises(TaskFormatError, match="a task is a Python file"):
        load_task(write(tmp_path, "x", name="task.txt"))


def test_select_cases_by_index_range_and_name(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    assert [c.index for c in select_cases(task, None)] == [0, 1]
    assert [c.index for c in select_cases(task, "1")] == [1]
    assert [c.index for c in select_cases(task, "0-1")] == [0, 1]
    assert [c.index for c in select_cases(task, "f64-3x5,0")] == [0, 1]


def test_a_huge_case_range_is_refused_before_it_is_expanded(tmp_path):
    """Issue 33, item 6: "0-20000000" built a list of 20 million indices (~760 MB) before it was refused."""
    import tracemalloc

    task = load_task(write(tmp_path, GOOD))
    tracemalloc.start()
    try:
        with pytest.raises(OptionsError, match="case range 0-20000000 is out of range: task .* has cases 0-1"):
            select_cases(task, "0-20000000")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    with pytest.raises(OptionsError, match="case range 1-0 is out of range"):
        select_cases(task, "1-0")


def test_select_cases_rejects_unknown_names_and_indices(tmp_path):
    task = load_task(write(tmp_path, GOOD))
    with pytest.raises(OptionsError, match="did you mean f64-3x5"):
        select_cases(task, "f64-3x6")
    with pytest.raises(OptionsError, match="out of range"):
        select_cases(task, "5")
