"""The structure match at the CLI: `kope optimize` and `kope bench` on KernelBench-style files, the exit code
of runs that attempted nothing, a suite file that does not load, and `kope tasks show`.

The real console script, the real harness on CPU, the real Neo4j.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kope.memory import ExperienceGraph

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench_style"
GEMM_ADD_RELU = FIXTURES / "level2" / "1_Gemm_Add_ReLU.py"
TOPK = FIXTURES / "level1" / "50_TopK.py"
NOTHING_ATTEMPTED = 12  # kope.errors.NothingAttemptedError


def env(neo4j_server, tmp_path, namespace):
    return neo4j_server.env(KOPE_NAMESPACE=namespace, KOPE_DATA_DIR=str(tmp_path / "data"))


def test_optimize_gives_a_kernelbench_file_a_correct_candidate_and_records_the_match(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    proc = kope_cli(
        "optimize",
        str(GEMM_ADD_RELU),
        "--proposer",
        "offline",
        "--steps",
        "2",
        "--out",
        str(tmp_path / "out"),
        "--json",
        env=env(neo4j_server, tmp_path, "structure-e2e"),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)[0]
    assert summary["family"] == "fused"  # inferred: the file declares no FAMILY
    assert summary["steps"][0]["status"] == "correct", summary["steps"]
    decision = ExperienceGraph(graph_client, namespace="structure-e2e").run_state(summary["run_id"]).decisions[0]
    structure = decision.params.extension["structure"]
    assert (
        decision.params.extension["template"] == "gemm_epilogue"
        and structure["structure"] == "gemm_epilogue.gemm_bias_relu"
    )
    tensors = structure["stages"][0]["tensors"]
    assert tensors["bias"]["name"] == "bias" and tensors["weight"]["name"] == "gemm.weight"


def test_optimize_of_a_task_no_template_computes_exits_12_with_the_explanation(kope_cli, neo4j_server, tmp_path):
    proc = kope_cli(
        "optimize",
        str(TOPK),
        "--proposer",
        "offline",
        "--out",
        str(tmp_path / "out"),
        env=env(neo4j_server, tmp_path, "structure-none"),
        timeout=600,
    )
    assert proc.returncode == NOTHING_ATTEMPTED, proc.stderr[-2000:]
    assert "error: no attempt was made for the operator" in proc.stderr and "aten.topk" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_bench_goes_on_past_a_suite_file_that_does_not_load(kope_cli, neo4j_server, tmp_path):
    suite = tmp_path / "suite" / "level1"
    suite.mkdir(parents=True)
    shutil.copy(FIXTURES / "level1" / "1_ReLU.py", suite / "1_ReLU.py")
    (suite / "9_Uses_einops.py").write_text(
        "import torch\nimport torch.nn as nn\nimport kope_not_a_real_module_einops\n\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
        "def get_inputs():\n    return [torch.randn(4)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    out = tmp_path / "bench"
    proc = kope_cli(
        "bench",
        "--suite",
        str(tmp_path / "suite"),
        "--configs",
        "no-memory",
        "--steps",
        "1",
        "--no-final",  # the in-loop attempt is what is checked (the final evaluation: test_bench_final)
        "--out",
        str(out),
        env=env(neo4j_server, tmp_path, "unused"),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    pairs = {p["operator"]: p for p in json.loads((out / "results.json").read_text())["pairs"]}
    assert pairs["1_relu"]["status"] != "error" and pairs["1_relu"]["attempts"][0]["status"] == "correct"
    broken = pairs["9_uses_einops"]
    assert broken["status"] == "error" and broken["attempts"] == []
    assert "No module named 'kope_not_a_real_module_einops'" in broken["error"]


def test_a_bench_in_which_nothing_was_attempted_exits_12(kope_cli, neo4j_server, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(TOPK, suite / "50_TopK.py")
    out = tmp_path / "bench"
    proc = kope_cli(
        "bench",
        "--suite",
        str(suite),
        "--configs",
        "no-memory",
        "--steps",
        "1",
        "--out",
        str(out),
        env=env(neo4j_server, tmp_path, "unused"),
        timeout=600,
    )
    assert proc.returncode == NOTHING_ATTEMPTED, proc.stderr[-2000:]
    assert "error: no attempt was made for any of the 1 operators" in proc.stderr
    assert (out / "results.json").is_file()  # the results are written all the same


def test_a_bench_skips_a_broken_level_the_levels_option_leaves_out(kope_cli, neo4j_server, tmp_path):
    (tmp_path / "suite" / "level1").mkdir(parents=True)
    (tmp_path / "suite" / "level3").mkdir(parents=True)
    shutil.copy(FIXTURES / "level1" / "1_ReLU.py", tmp_path / "suite" / "level1" / "1_ReLU.py")
    (tmp_path / "suite" / "level3" / "1_Broken.py").write_text("import kope_not_a_real_module\n")
    out = tmp_path / "bench"
    proc = kope_cli(
        "bench",
        "--suite",
        str(tmp_path / "suite"),
        "--levels",
        "1",
        "--configs",
        "no-memory",
        "--steps",
        "1",
        "--no-final",  # which levels run is what is checked, not the final evaluation (test_bench_final)
        "--out",
        str(out),
        env=env(neo4j_server, tmp_path, "unused"),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p["operator"] for p in json.loads((out / "results.json").read_text())["operators"]] == ["1_relu"]


def test_tasks_show_prints_the_matched_structure_and_its_bindings(kope_cli, tmp_path):
    proc = kope_cli("tasks", "show", str(FIXTURES / "level2" / "2_Gemm_Multiply_LeakyReLU.py"), "--json")
    assert proc.returncode == 0, proc.stderr
    structure = json.loads(proc.stdout)["structure"]
    assert structure["matched"] and structure["template"] == "pipeline"
    assert structure["structure"] == "gemm.linear -> chain(mul, leaky_relu)"
    scalars = {v["expr"] for v in structure["stages"][1]["scalars"].values()}
    assert scalars == {"self.multiplier", "self.leaky_relu.negative_slope"}
    text = kope_cli("tasks", "show", str(TOPK))
    assert (
        text.returncode == 0 and "structure: no kernel template serves it" in text.stdout and "aten.topk" in text.stdout
    )
