"""Static anti-cheat checks: each rule fires on a small example; honest candidates are clean."""

from pathlib import Path

import pytest

from harness.static_check import check_cpp, check_source

REPO = Path(__file__).resolve().parents[2]


def checks(source: str) -> set[str]:
    return {f.check for f in check_source(source)}


@pytest.mark.parametrize(
    "source, check",
    [
        (
            "import torch\nclass ModelNew:\n    def forward(self, x):\n        return torch.softmax(x, -1)\n",
            "reference_call",
        ),
        ("import torch.nn.functional as F\ndef forward(x):\n    return F.linear(x, x)\n", "reference_call"),
        ("from torch import matmul\ndef forward(a, b):\n    return matmul(a, b)\n", "reference_call"),
        ("import torch\ndef forward(a, b):\n    return a @ b\n", "reference_call"),
        ("import torch\ndef forward(x):\n    return torch.ops.aten.relu(x)\n", "reference_call"),
        ("import torch\ndef forward(x):\n    return getattr(torch, 'relu')(x)\n", "reference_call"),
        ("def forward(x):\n    return Model()(x)\n", "reference_call"),
        ("import torch\ntorch.relu = lambda x: x\n", "monkey_patch"),
        ("import time\ntime.perf_counter = lambda: 0.0\n", "monkey_patch"),
        ("import torch\nsetattr(torch, 'relu', None)\n", "monkey_patch"),
        ("import torch.nn as nn\nnn.Module.__call__ = None\n", "monkey_patch"),
        ("import torch\ndef forward(x):\n    torch.set_num_threads(1)\n", "thread_count"),
        ("import os\nos.environ['OMP_NUM_THREADS'] = '64'\n", "thread_count"),
        ("import subprocess\n", "forbidden_api"),
        ("import threading\n", "forbidden_api"),
        ("from socket import create_connection\n", "forbidden_api"),
        ("import ctypes\n", "forbidden_api"),
        ("import gc\n", "forbidden_api"),
        ("import inspect\n", "forbidden_api"),
        ("def forward(x):\n    open('/tmp/answers')\n", "forbidden_api"),
        ("def forward(x):\n    exec('1')\n", "forbidden_api"),
        ("import os\ndef forward(x):\n    os.system('true')\n", "forbidden_api"),
        ("import sys\nf = sys._getframe(1)\n", "forbidden_api"),
        ("import torch\nclass Lazy(torch.Tensor):\n    pass\n", "forbidden_api"),
        ("import torch\nx = torch._C._set_grad_enabled\n", "forbidden_api"),
        ("import torch\nf = torch.compile\n", "forbidden_api"),
        ("from harness.evaluate import evaluate\n", "forbidden_api"),
        ("def f(g):\n    return g.__globals__\n", "forbidden_api"),
    ],
)
def test_each_rule_fires(source, check):
    assert check in checks(source), check_source(source)


def test_allocation_views_and_copies_are_allowed_in_forward():
    source = (
        "import torch\nimport torch.nn as nn\nfrom harness.cpu import compile_cpp\n"
        "class ModelNew(nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n        self.w = nn.Parameter(torch.randn(n, n) @ torch.randn(n, n))\n"
        "    def forward(self, x):\n"
        "        y = torch.empty_like(x)\n        z = torch.zeros(3, dtype=x.dtype)\n        x = x.contiguous().view(-1)\n"
        "        return torch.cat([y.reshape(-1), z])\n"
    )
    assert check_source(source) == []


@pytest.mark.parametrize(
    "code, check",
    [
        ('#include <cstdio>\nextern "C" void f() { FILE* f = fopen("/tmp/x", "r"); }', "forbidden_api"),
        ('#include <thread>\nextern "C" void f() { std::thread t([]{}); t.detach(); }', "forbidden_api"),
        ('#include <unistd.h>\nextern "C" void f() { fork(); }', "forbidden_api"),
        ('#include <omp.h>\nextern "C" void f() { omp_set_num_threads(64); }', "thread_count"),
        (
            'extern "C" void f(float* y, long n) {\n#pragma omp parallel for num_threads(8)\nfor (long i = 0; i < n; ++i) y[i] = 0; }',
            "thread_count",
        ),
        (
            "#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return torch::softmax(x, -1); }",
            "reference_call",
        ),
        ("#include <torch/extension.h>\ntorch::Tensor f(torch::Tensor x) { return x.matmul(x); }", "reference_call"),
    ],
)
def test_cpp_rules_fire(code, check):
    assert check in {f.check for f in check_cpp(code)}


def test_cpp_comments_do_not_count():
    assert check_cpp('// fopen("x") and std::thread in a comment\nextern "C" void f() {}') == []


def test_findings_carry_line_numbers():
    (finding,) = check_source("import torch\n\n\ndef forward(x):\n    return torch.relu(x)\n")
    assert finding.line == 5 and "torch.relu" in finding.message


@pytest.mark.parametrize(
    "path",
    sorted((REPO / "harness" / "suite" / "candidates").glob("*/*.py"))
    + sorted((REPO / "tests" / "fixtures" / "kernelbench" / "candidates").glob("*.py"))
    + sorted((REPO / "tests" / "fixtures" / "triton").glob("*.py"))
    + sorted((REPO / "tests" / "fixtures" / "load_inline").glob("relu.py")),
    ids=lambda p: p.name,
)
def test_honest_candidates_have_no_findings(path):
    assert check_source(path.read_text(), str(path)) == []
