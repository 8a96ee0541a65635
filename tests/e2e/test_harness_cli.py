"""kope eval / kope tasks / python -m harness, through the real console script."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
KB = ROOT / "fixtures" / "kernelbench"
REPO = ROOT.parent

KERNELBENCH_PROBLEMS = [
    ("level1/21_Sigmoid.py", "sigmoid.py", "21_sigmoid", 1),
    ("level1/47_Sum_reduction_over_a_dimension.py", "sum_reduction.py", "47_sum_reduction_over_a_dimension", 1),
    ("level1/4_Matrix_vector_multiplication_.py", "matvec.py", "4_matrix_vector_multiplication", 1),
    ("level2/12_Gemm_Multiply_LeakyReLU.py", "gemm_multiply_leakyrelu.py", "12_gemm_multiply_leakyrelu", 2),
]


@pytest.mark.parametrize(
    "problem, candidate, operator, level", KERNELBENCH_PROBLEMS, ids=[p[2] for p in KERNELBENCH_PROBLEMS]
)
def test_unmodified_kernelbench_problems_run_through_kope_eval(kope_cli, problem, candidate, operator, level):
    proc = kope_cli(
        "eval", str(KB / problem), str(KB / "candidates" / candidate), "--json", "--rep-ms", "10", "--warmup-ms", "2"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert (data["task"], data["family"], data["level"], data["status"]) == (operator, "unknown", level, "correct")
    assert data["cases"][0]["name"] == "default" and data["speedup"] is not None


def test_kope_eval_prints_a_per_case_table(kope_cli):
    proc = kope_cli(
        "eval",
        "softmax",
        str(REPO / "harness" / "suite" / "candidates" / "cpu" / "softmax.py"),
        "--cases",
        "2",
        "--seeds",
        "1",
        "--rep-ms",
        "10",
        "--warmup-ms",
        "2",
    )
    assert proc.returncode == 0, proc.stderr
    for text in ("softmax", "odd-4000x1023", "pass", "speedup", "correct", "1/1 cases", "ref ms"):
        assert text in proc.stdout


def test_kope_eval_exits_1_for_a_wrong_candidate(kope_cli):
    proc = kope_cli(
        "eval",
        str(ROOT / "fixtures" / "tasks" / "tiny_softmax.py"),
        str(ROOT / "adversarial" / "all_zeros.py"),
        "--no-timing",
    )
    assert proc.returncode == 1
    assert "incorrect" in proc.stdout and "FAIL" in proc.stdout and "outside tolerance" in proc.stdout


@pytest.mark.parametrize(
    "args, code, message",
    [
        (("eval", "softmax", "x.py"), 2, "error: candidate file not found: x.py"),
        (("eval", "sofmax", __file__), 2, "error: no built-in task named 'sofmax'"),
        (("eval", "softmax", __file__, "--cases", "99"), 2, "error: case index 99 is out of range"),
        (("eval", "softmax", __file__, "--target", "npu"), 2, "error: Invalid value for '--target'"),
        (("tasks", "show", "matmull"), 2, "did you mean matmul"),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(kope_cli, args, code, message):
    proc = kope_cli(*args)
    assert proc.returncode == code and message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_kope_eval_cuda_without_gpu_exits_3(kope_cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    proc = kope_cli("eval", "relu", str(ROOT / "fixtures" / "cuda" / "relu.py"), "--target", "cuda")
    assert proc.returncode == 3 and "needs an NVIDIA GPU" in proc.stderr and "Traceback" not in proc.stderr


def test_a_bad_task_file_is_reported_precisely(kope_cli, tmp_path):
    bad = tmp_path / "bad_task.py"
    bad.write_text("import torch\nFAMILY = 'activation'\n\ndef get_inputs():\n    return []\n")
    proc = kope_cli("eval", str(bad), str(ROOT / "adversarial" / "all_zeros.py"))
    assert proc.returncode == 2
    assert "FAMILY (line 2) must be one of" in proc.stderr and "no `Model` defined" in proc.stderr


def test_kope_tasks_list_and_show(kope_cli):
    listed = json.loads(kope_cli("tasks", "list", "--json", check=True).stdout)
    ops = {t["operator"]: t for t in listed}
    assert {"relu", "softmax", "mlp_block"} <= set(ops) and ops["relu"]["cpu_candidate"].endswith("relu.py")
    table = kope_cli("tasks", "list", "--family", "normalization", check=True).stdout
    assert "layer_norm" in table and "relu" not in table
    shown = kope_cli("tasks", "show", "layer_norm", check=True).stdout
    assert "offset-32x64x2048" in shown and "layer_norm.py" in shown


def test_kope_tasks_check_runs_the_references(kope_cli):
    proc = kope_cli(
        "tasks", "check", "relu", str(ROOT / "fixtures" / "tasks" / "tiny_softmax.py"), "--json", check=True
    )
    report = json.loads(proc.stdout)
    assert [r["task"] for r in report] == ["relu", "tiny_softmax"]
    assert all(c["ok"] for r in report for c in r["cases"])


def test_harness_runs_on_its_own_without_kope():
    env = dict(os.environ, PYTHONPATH=str(REPO))
    code = (
        "import sys, runpy; sys.argv = ['harness', 'eval', sys.argv[1], sys.argv[2], '--no-timing', '--json']; "
        "import builtins; real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    assert not name.startswith('kope'), name\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "runpy.run_module('harness', run_name='__main__')"
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            str(ROOT / "fixtures" / "tasks" / "tiny_softmax.py"),
            str(REPO / "harness" / "suite" / "candidates" / "cpu" / "softmax.py"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "correct"


def test_harness_never_imports_kope():
    for path in (REPO / "harness").rglob("*.py"):
        text = path.read_text()
        assert "import kope" not in text and "from kope" not in text, path
