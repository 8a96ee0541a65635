"""Every built-in task is served by the template that computes its traced structure, not by its name."""

from __future__ import annotations

import pytest

from harness.structure.match import Match, NoMatch, match_task
from harness.structure.tracing import warm
from harness.suite import list_tasks
from harness.suite.kernel_templates import list_templates

TASKS = {t.operator: t for t in list_tasks()}
BY_NAME = {op: t.name for t in list_templates() for op in t.operators}


@pytest.fixture(scope="module", autouse=True)
def traced():
    warm([t.path for t in TASKS.values()])  # one worker process for the whole suite


def test_every_built_in_operator_has_a_template():
    assert sorted(TASKS) == sorted(BY_NAME)


@pytest.mark.parametrize("operator", sorted(TASKS))
def test_each_built_in_task_is_matched_by_structure_to_the_template_of_its_operator(operator):
    match = match_task(TASKS[operator].path, operator)
    assert isinstance(match, Match), match.explanation()
    assert (match.template, match.operator) == (BY_NAME[operator], operator), match.structure
    # single-kernel operators use their template's own ModelNew; the composite blocks render from the match
    assert match.native == (match.template != "pipeline")


def test_a_task_named_like_a_built_in_operator_gets_the_template_of_what_it_computes(tmp_path):
    task = tmp_path / "relu.py"
    task.write_text(
        'import torch\nimport torch.nn as nn\nOPERATOR = "relu"\n\n\n'
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.sigmoid(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 100)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    match = match_task(task, "relu")
    assert (match.template, match.operator, match.native) == ("pointwise", "sigmoid", False)


def test_a_reference_that_computes_other_ops_in_other_cases_is_not_matched(tmp_path):
    task = tmp_path / "switch.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\nMODE = 0\nCASES = [{'name': 'a', 'MODE': 0}, {'name': 'b', 'MODE': 1}]\n\n\n"
        "class Model(nn.Module):\n    def __init__(self, mode):\n        super().__init__()\n        self.mode = mode\n\n"
        "    def forward(self, x):\n        return torch.relu(x) if self.mode == 0 else torch.tanh(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 100)]\n\n\ndef get_init_inputs():\n    return [MODE]\n"
    )
    match = match_task(task, "switch")
    assert isinstance(match, NoMatch) and "different ops in case 'b'" in match.explanation()


def test_a_reference_that_fails_to_trace_is_a_clear_error(tmp_path):
    from harness.structure.tracing import StructureError, trace_task

    task = tmp_path / "broken.py"
    task.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        raise RuntimeError('reference is broken')\n\n\n"
        "def get_inputs():\n    return [torch.randn(2)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    with pytest.raises(StructureError, match="reference is broken"):
        trace_task(task)


def test_a_reference_slower_than_the_timeout_is_stopped(tmp_path):
    from harness.structure.tracing import StructureError, trace_task

    task = tmp_path / "slow.py"
    task.write_text(
        "import time\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        time.sleep(60)\n        return x\n\n\n"
        "def get_inputs():\n    return [torch.randn(2)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    with pytest.raises(StructureError, match="longer than 8 s"):
        trace_task(task, timeout=8)


def test_on_a_target_whose_templates_declare_no_structures_a_built_in_task_gets_the_template_naming_its_operator():
    # the triton templates serve built-in operators by name: the task's structure must be that operator's
    match = match_task(TASKS["gemm_bias_relu"].path, "gemm_bias_relu", "triton")
    assert isinstance(match, Match), match.explanation()
    assert (match.template, match.operator, match.native) == ("gemm_epilogue", "gemm_bias_relu", True)


def test_on_such_a_target_a_task_with_its_own_conventions_is_not_matched_and_says_why(tmp_path):
    task = tmp_path / "relu.py"
    task.write_text(
        'import torch\nimport torch.nn as nn\nOPERATOR = "relu"\n\n\n'
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.sigmoid(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(8, 100)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    match = match_task(task, "relu", "triton")
    assert isinstance(match, NoMatch)
    assert "triton templates declare no structures" in match.explanation()
    assert "pointwise.sigmoid" in match.explanation()


def _task_file(path, body):
    path.write_text(
        f"# {path}: a new file each run, so no trace of it is cached yet\n"
        "import os\nimport time\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        f"    def forward(self, x):\n        {body}\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    return path


def test_tracing_many_tasks_at_once_a_hanging_one_and_one_that_kills_the_worker_cost_only_themselves(tmp_path):
    from harness.structure.tracing import StructureError, trace_task

    good = _task_file(tmp_path / "good.py", "print('{ not the protocol')\n        return torch.relu(x)")
    hangs = _task_file(tmp_path / "hangs.py", "time.sleep(60)\n        return x")
    dies = _task_file(tmp_path / "dies.py", "os._exit(3)")
    after = _task_file(tmp_path / "after.py", "return torch.tanh(x)")
    assert warm([hangs, good, dies, after], timeout=8) == 4
    assert trace_task(good, timeout=1).first.ops and trace_task(after, timeout=1).first.ops  # cached: no worker
    with pytest.raises(StructureError, match="longer than 8 s"):
        trace_task(hangs)
    with pytest.raises(StructureError, match=r"tracing worker failed \(exit 3\)"):
        trace_task(dies)
