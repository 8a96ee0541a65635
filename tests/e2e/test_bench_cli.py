"""`kope bench` end to end: the real console script, the real harness on CPU, Neo4j, a scripted LLM.

The main test runs a three-operator suite through two configurations and checks
every metric against values computed here, by hand, from the per-case results
stored in Neo4j. The others: resume after a hard kill, parallel workers,
`kope bench report` regenerating identical files, and bad inputs.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import bench_results, kernels
from tests.support.llm_replay import ReplayLLM, Reply, Stall

SPACES = Path(__file__).resolve().parents[1] / "fixtures" / "spaces"  # recorded with `--cases 0` (test_replay_spaces)

TASK = """import torch
import torch.nn as nn

OPERATOR = "{operator}"
FAMILY = "elementwise"
LEVEL = {level}
DTYPE = "float32"
rows = 64
cols = 64
CASES = [
    {{"name": "64x64", "rows": 64, "cols": 64}},
    {{"name": "128x256", "rows": 128, "cols": 256}},
    {{"name": "32x32", "rows": 32, "cols": 32}},
]


class Model(nn.Module):
    def forward(self, x):
        return {forward}


def get_inputs():
    return [torch.randn(rows, cols, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return []
"""

# Right on the first 4096 elements only: passes 64x64 and 32x32, fails 128x256.
PARTIAL = kernels.FAST.replace(
    "for (int64_t i = 0; i < n; ++i)", "for (int64_t i = 0; i < (n < 4096 ? n : 4096); ++i)"
).replace("torch.empty_like(x)", "torch.zeros_like(x)")
MALFORMED = "Let me think about tiling first; no code in this reply."


# What the reference computes: relu (the offline proposer's pointwise template serves it, whatever the
# operator is called) or, for an operator named no_template, top-k (no kernel template computes that).
FORWARD = {"no_template": "torch.topk(x, 4, dim=-1).values"}


def write_suite(folder: Path, operators: list[tuple[str, int]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for operator, level in operators:
        forward = FORWARD.get(operator, "torch.relu(x)")
        (folder / f"{operator}.py").write_text(TASK.format(operator=operator, level=level, forward=forward))
    return folder


def llm_env(neo4j_server, server, tmp_path, **extra):
    return neo4j_server.env(
        KOPE_LLM_BASE_URL=server.url,
        KOPE_LLM_MODEL="replay-model",
        KOPE_LLM_API_KEY="test-key",
        KOPE_DATA_DIR=str(tmp_path / "data"),
        KOPE_LLM_TIMEOUT="60",
        **extra,
    )


def cypher(graph_client, query, **params):
    records, _, _ = graph_client._driver.execute_query(query, params, database_=graph_client.database)
    return [r.data() for r in records]


def stored_attempts(graph_client, namespace, run_id):
    """Per step: the outcome's speedup and per-case results, straight from Neo4j."""
    rows = cypher(
        graph_client,
        "MATCH (d:Decision {ns: $ns, run_id: $run})-[:PRODUCED]->(o:Outcome) "
        "RETURN d.step AS step, o.speedup AS speedup, o.cases_json AS cases ORDER BY step",
        ns=namespace,
        run=run_id,
    )
    return [
        {"step": r["step"], "speedup": r["speedup"], "cases": {c["name"]: c for c in json.loads(r["cases"])}}
        for r in rows
    ]


def one_error_line(proc):
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    return proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, errors


# -- the main end-to-end check --------------------------------------------------------------------------


@pytest.mark.slow
def test_three_operators_through_two_configurations_give_the_hand_computed_metrics(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    suite = write_suite(tmp_path / "suite", [("relu_a", 1), ("relu_b", 1), ("relu_c", 2)])
    # Operator-major order, configurations in canonical order (active before no-memory), two steps per run.
    script = [
        Reply(kernels.reply("openmp simd", "parallelization", kernels.FAST), 1000, 100),  # active · relu_a s0
        Reply(kernels.reply("serial chain", "algorithm", kernels.SLOW), 1010, 101),  # active · relu_a s1
        Reply(kernels.reply("first 4096 only", "tiling", PARTIAL), 1020, 102),  # no-memory · relu_a s0
        Reply(MALFORMED, 1030, 103),  # no-memory · relu_a s1
        Reply(kernels.reply("intrinsics", "instruction", kernels.BROKEN), 1040, 104),  # active · relu_b s0
        Reply(kernels.reply("openmp simd", "parallelization", kernels.FAST), 1050, 105),  # active · relu_b s1
        Reply(kernels.reply("serial chain", "algorithm", kernels.SLOW), 1060, 106),  # no-memory · relu_b s0
        Reply(kernels.reply("openmp simd", "parallelization", kernels.FAST), 1070, 107),  # no-memory · relu_b s1
        Reply(MALFORMED, 1080, 108),  # active · relu_c s0
        Reply(MALFORMED, 1090, 109),  # active · relu_c s1
        Reply(kernels.reply("identity", "algorithm", kernels.WRONG), 1100, 110),  # no-memory · relu_c s0
        Reply(MALFORMED, 1110, 111),  # no-memory · relu_c s1
    ]
    out = tmp_path / "bench"
    with ReplayLLM(script, api_key="test-key") as server:
        proc = kope_cli(
            "bench",
            "--suite",
            str(suite),
            "--proposer",
            "llm",
            "--steps",
            "2",
            "--configs",
            "no-memory,active",
            "--no-final",  # the in-loop numbers, computed here from Neo4j (the final evaluation: test_bench_final)
            "--out",
            str(out),
            "--json",
            env=llm_env(neo4j_server, server, tmp_path),
            timeout=1800,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert server.remaining == 0
    printed = json.loads(proc.stdout)
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["baseline"] == "no-memory"
    assert [(p["config"], p["operator"]) for p in results["pairs"]] == [
        ("active", "relu_a"),
        ("no-memory", "relu_a"),
        ("active", "relu_b"),
        ("no-memory", "relu_b"),
        ("active", "relu_c"),
        ("no-memory", "relu_c"),
    ]
    assert {c["name"]: c["namespace"] for c in results["configurations"]} == {
        "active": "bench-bench-active",
        "no-memory": "bench-bench-no-memory",
    }

    pairs = {(p["config"], p["operator"]): p for p in results["pairs"]}
    stored = {key: stored_attempts(graph_client, p["namespace"], p["run_id"]) for key, p in pairs.items()}
    # results.json holds exactly the per-case results Neo4j holds
    for key, pair in pairs.items():
        assert [a["step"] for a in pair["attempts"]] == [s["step"] for s in stored[key]] == [0, 1]
        for attempt, graph_attempt in zip(pair["attempts"], stored[key]):
            assert {c["name"]: (c["passed"], c["speedup"]) for c in attempt["cases"]} == {
                n: (c["passed"], c["speedup"]) for n, c in graph_attempt["cases"].items()
            }

    def speedups(attempt):
        return [c["speedup"] for c in attempt["cases"].values()]

    def fastest(key):  # both steps pass every case: the best is the one with the higher speedup
        attempts = stored[key]
        assert all(all(c["passed"] for c in a["cases"].values()) for a in attempts)
        return max(attempts, key=lambda a: a["speedup"])

    def gm(values):
        return math.exp(sum(math.log(v) for v in values) / len(values))

    # active: relu_a both steps correct (3/3), relu_b step 1 correct (step 0 is a compile error), relu_c nothing
    a_relu_a, a_relu_b = fastest(("active", "relu_a")), stored[("active", "relu_b")][1]
    assert not any(c["passed"] for c in stored[("active", "relu_b")][0]["cases"].values())
    assert all(c["passed"] for c in a_relu_b["cases"].values())
    # no-memory: relu_a step 0 passes 64x64 and 32x32 only (untimed), relu_b both correct, relu_c nothing
    n_relu_a = stored[("no-memory", "relu_a")][0]
    assert {n for n, c in n_relu_a["cases"].items() if c["passed"]} == {"64x64", "32x32"}
    assert all(c["speedup"] is None for c in n_relu_a["cases"].values())
    n_relu_b = fastest(("no-memory", "relu_b"))
    for config in ("active", "no-memory"):
        assert not any(c["passed"] for a in stored[(config, "relu_c")] for c in a["cases"].values())

    expected = {
        "active": {
            "operators_passed": 2,
            "cases_passed": 6,
            "levels": {"1": (2, 6, 6), "2": (0, 0, 3)},
            "speedups": speedups(a_relu_a) + speedups(a_relu_b),
            "prompt": 1000 + 1010 + 1040 + 1050 + 1080 + 1090,
            "completion": 100 + 101 + 104 + 105 + 108 + 109,
        },
        "no-memory": {
            "operators_passed": 2,
            "cases_passed": 5,
            "levels": {"1": (2, 5, 6), "2": (0, 0, 3)},
            "speedups": speedups(n_relu_b),
            "prompt": 1020 + 1030 + 1060 + 1070 + 1100 + 1110,
            "completion": 102 + 103 + 106 + 107 + 110 + 111,
        },
    }
    paired = gm(
        [a_relu_b["cases"][n]["speedup"] / n_relu_b["cases"][n]["speedup"] for n in ("64x64", "128x256", "32x32")]
    )
    for config, want in expected.items():
        for metrics in (results["metrics"][config], printed["metrics"][config]):
            assert metrics["operators"] == 3 and metrics["operators_missing"] == 0
            assert metrics["operators_passed"] == want["operators_passed"]
            assert (metrics["cases_passed"], metrics["cases"]) == (want["cases_passed"], 9)
            assert metrics["pass_rate"] == pytest.approx(want["cases_passed"] / 9)
            for level, (ops, passed, cases) in want["levels"].items():
                got = metrics["levels"][level]
                assert (got["operators_passed"], got["cases_passed"], got["cases"]) == (ops, passed, cases)
                assert got["pass_rate"] == pytest.approx(passed / cases)
            assert metrics["speedup_cases"] == len(want["speedups"])
            assert metrics["geomean_speedup"] == pytest.approx(gm(want["speedups"]))
            assert (metrics["prompt_tokens"], metrics["completion_tokens"]) == (want["prompt"], want["completion"])
            assert metrics["steps"] == 6
            assert metrics["tokens_per_step"] == pytest.approx((want["prompt"] + want["completion"]) / 6)
        assert results["metrics"]["active"]["paired"] == {
            "baseline": "no-memory",
            "speedup": pytest.approx(paired),
            "n": 3,
        }
        assert results["metrics"]["no-memory"]["paired"] is None

    summary = (out / "summary.md").read_text()
    tokens = expected["active"]["prompt"] + expected["active"]["completion"]  # 6,897 over 6 steps
    row = (
        f"| active | 2/3 | 6/9 | 66.7% | 100.0% | 0.0% | - | - | {gm(expected['active']['speedups']):.2f}x (n=6) | "
        f"{paired:.2f}x (n=3) | {tokens:,} | {tokens / 6:,.0f} |"
    )
    assert row in summary
    assert "| no-memory | 2/3 | 5/9 | 55.6% | 83.3% | 0.0% | - | - |" in summary
    for plot in ("pass_rate", "speedup", "tokens_per_step", "memory_growth"):
        assert (out / "plots" / f"{plot}.png").stat().st_size > 0
    # each configuration wrote only into its own namespace
    runs = cypher(
        graph_client, "MATCH (r:Run) WHERE r.ns STARTS WITH 'bench-bench-' RETURN r.ns AS ns, count(*) AS n ORDER BY ns"
    )
    assert runs == [{"ns": "bench-bench-active", "n": 3}, {"ns": "bench-bench-no-memory", "n": 3}]
    memory = cypher(
        graph_client,
        "MATCH (r:Run {ns: 'bench-bench-no-memory'}) RETURN DISTINCT r.memory_enabled AS m, r.context_policy AS p",
    )
    assert memory == [{"m": False, "p": "active"}]


# -- resume ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_killed_bench_resumes_skipping_finished_pairs_and_continuing_the_interrupted_run(
    neo4j_server, graph_client, tmp_path
):
    suite = write_suite(tmp_path / "suite", [("relu_a", 1), ("relu_b", 1)])
    out = tmp_path / "bench"
    first = [
        Reply(kernels.reply("openmp simd", "parallelization", kernels.FAST)),
        Reply(MALFORMED),
        Reply(MALFORMED),
        Stall(30),
        Reply(MALFORMED),
    ]
    exe = str(Path(sys.executable).with_name("kope"))
    with ReplayLLM(first) as server:
        env = llm_env(neo4j_server, server, tmp_path)
        proc = subprocess.Popen(
            [
                exe,
                "bench",
                "--suite",
                str(suite),
                "--proposer",
                "llm",
                "--steps",
                "2",
                "--configs",
                "active",
                "--no-final",  # resume is about the loop's pairs and runs (the final evaluation: test_bench_final)
                "--out",
                str(out),
            ],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 600
        while len(server.requests) < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(server.requests) == 4, (
            proc.communicate(timeout=5)[1][-3000:] if proc.poll() is not None else "timed out"
        )
        os.kill(proc.pid, signal.SIGKILL)  # mid-step: relu_b's step 1 is waiting for the LLM
        proc.wait()
    assert (out / "pairs" / "active" / "relu_a.json").is_file()
    assert not (out / "pairs" / "active" / "relu_b.json").exists()
    finished_a = json.loads((out / "pairs" / "active" / "relu_a.json").read_text())
    started_b = json.loads((out / "pairs" / "active" / "relu_b.run.json").read_text())["run_id"]

    with ReplayLLM([Reply(MALFORMED)]) as server:
        env = llm_env(neo4j_server, server, tmp_path)
        resumed = subprocess.run(
            [exe, "bench", "--out", str(out), "--resume"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert len(server.requests) == 1 and server.remaining == 0  # only relu_b's step 1 was asked again
    results = json.loads((out / "results.json").read_text())
    assert results["complete"]
    pairs = {p["operator"]: p for p in results["pairs"]}
    assert pairs["relu_a"]["run_id"] == finished_a["run_id"] and pairs["relu_a"]["resumed_from"] is None
    assert pairs["relu_b"]["run_id"] == started_b and pairs["relu_b"]["resumed_from"] == started_b
    assert pairs["relu_b"]["resumed_at"] == 1
    assert [a["status"] for a in pairs["relu_b"]["attempts"]] == ["format_error", "format_error"]
    runs = cypher(
        graph_client, "MATCH (r:Run {ns: 'bench-bench-active'}) RETURN r.id AS id, r.operator AS op ORDER BY op"
    )
    assert runs == [{"id": finished_a["run_id"], "op": "relu_a"}, {"id": started_b, "op": "relu_b"}]
    assert results["metrics"]["active"]["cases_passed"] == 3
    assert len(results["resumes"]) == 1 and "--resume" in results["resumes"][0]["command"]


def test_sigterm_stops_a_bench_as_ctrl_c_does_results_written_and_the_resume_command_said(
    neo4j_server, graph_client, tmp_path
):
    """`kill`, `timeout` or a job scheduler send SIGTERM: the bench ends as after Ctrl-C (exit 130, one error line,
    the resume command, results.json written, the interrupted run marked so), not silently mid-write."""
    suite = write_suite(tmp_path / "suite", [("relu_a", 1), ("relu_b", 1)])
    out = tmp_path / "bench"
    script = [Reply(kernels.reply("openmp simd", "parallelization", kernels.FAST)), Reply(MALFORMED), Stall(60)]
    exe = str(Path(sys.executable).with_name("kope"))
    with ReplayLLM(script) as server:
        proc = subprocess.Popen(
            [exe, "bench", "--suite", str(suite), "--proposer", "llm", "--steps", "2", "--configs", "active"]
            + ["--no-final", "--out", str(out)],  # the in-loop pairs are what is interrupted
            env=llm_env(neo4j_server, server, tmp_path),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 600
        while len(server.requests) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(server.requests) == 3, (
            proc.communicate(timeout=5)[1][-3000:] if proc.poll() is not None else "timed out"
        )
        proc.send_signal(signal.SIGTERM)  # relu_b's step 0 is waiting for the LLM
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: bench interrupted: 1 of 2 pairs finished"], stderr[-3000:]
    assert f"kope bench --resume --out {out}" in stderr
    results = json.loads((out / "results.json").read_text())
    assert not results["complete"] and [p["operator"] for p in results["pairs"]] == ["relu_a"]
    started_b = json.loads((out / "pairs" / "active" / "relu_b.run.json").read_text())["run_id"]
    status = cypher(graph_client, "MATCH (r:Run {id: $id}) RETURN r.status AS status", id=started_b)
    assert status == [{"status": "interrupted"}]


# -- parallel workers -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_parallel_workers_run_pairs_in_their_own_processes_into_their_own_namespaces(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    # a small relu task: the offline proposer has a template for it; for no_template (top-k) it has none
    suite = write_suite(tmp_path / "suite", [("relu", 1), ("no_template", 1)])
    out = tmp_path / "bench"
    proc = kope_cli(
        "bench",
        "--suite",
        str(suite),
        "--proposer",
        "offline",
        "--steps",
        "1",
        "--configs",
        "active,no-memory",
        "--cases",
        "0",
        "--workers",
        "2",
        "--no-final",  # the workers' mechanics; the final evaluation has its own test (test_bench_final)
        "--out",
        str(out),
        env=neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data")),
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["options"]["workers"] == 2
    pairs = {(p["config"], p["operator"]): p for p in results["pairs"]}
    assert set(pairs) == {(c, o) for c in ("active", "no-memory") for o in ("relu", "no_template")}
    # two workers, two configurations: the next pair is always of the idle configuration, so none overlapped
    assert all(p["overlapped_with"] == [] for p in results["pairs"])
    for config in ("active", "no-memory"):
        assert len(pairs[(config, "relu")]["attempts"]) == 1
        assert (
            pairs[(config, "no_template")]["attempts"] == [] and pairs[(config, "no_template")]["status"] == "exhausted"
        )
        assert results["metrics"][config]["operators_missing"] == 1
        for operator in ("relu", "no_template"):
            log = out / "logs" / config / f"{operator}.log"
            assert log.is_file() and pairs[(config, operator)]["run_id"] in log.read_text()
            ns = f"bench-bench-{config}"
            found = cypher(
                graph_client,
                "MATCH (r:Run {ns: $ns, id: $id}) RETURN r.operator AS op",
                ns=ns,
                id=pairs[(config, operator)]["run_id"],
            )
            assert found == [{"op": operator}]


@pytest.mark.slow
def test_repeats_run_in_their_own_namespaces_with_their_own_seeds_and_report_intervals(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    # Repeats are the bench's mechanics (namespaces, seeds, intervals): the outcomes are replayed from the spaces
    # committed for test_replay_spaces (add_scaled is the builtin elementwise suite's first operator), so nothing
    # is compiled or timed; live evaluation through the bench: the hand-computed-metrics test above.
    out = tmp_path / "bench"
    proc = kope_cli(
        "bench",
        "--suite",
        "builtin",
        "--family",
        "elementwise",
        "--limit",
        "1",
        "--proposer",
        "offline",
        "--steps",
        "1",
        "--configs",
        "active",
        "--cases",
        "0",
        "--evaluator",
        f"replay:{SPACES}",
        "--repeats",
        "2",
        "--name",
        "rep",
        "--out",
        str(out),
        env=neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data")),
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["repeats"] == 2
    assert sorted((p["repeat"], p["seed"], p["namespace"], p["operator"]) for p in results["pairs"]) == [
        (1, 0, "bench-rep-active", "add_scaled"),
        (2, 1, "bench-rep-active-r2", "add_scaled"),
    ]
    assert (out / "pairs" / "active" / "add_scaled.json").is_file() and (
        out / "pairs" / "active" / "r2" / "add_scaled.json"
    ).is_file()
    for namespace in ("bench-rep-active", "bench-rep-active-r2"):
        rows = cypher(graph_client, "MATCH (d:Decision {ns: $ns}) RETURN count(d) AS n", ns=namespace)
        assert rows[0]["n"] == 1, namespace
    summary = results["repeat_summary"]
    assert summary["complete"] == [1, 2] and summary["summary"]["active"]["pass_rate"]["n"] == 2
    text = (out / "summary.md").read_text()
    assert "## 2 independent repeats (2 complete)" in text and (out / "plots" / "repeats_steps.png").is_file()
    assert "repeat 1:" in proc.stdout


def _bench_one_config(kope_cli, neo4j_server, tmp_path, suite, cases, *extra):
    """`kope bench` of ``suite`` with the offline proposer, 1 step, the active configuration; (proc, results, pairs)."""
    out = tmp_path / "bench"
    proc = kope_cli(
        "bench",
        "--suite",
        str(suite),
        "--proposer",
        "offline",
        "--steps",
        "1",
        "--configs",
        "active",
        "--cases",
        cases,
        *extra,
        "--out",
        str(out),
        env=neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data")),
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    return proc, results, {p["operator"]: p for p in results["pairs"]}


def test_a_task_whose_reference_fails_is_recorded_as_an_error_and_the_bench_goes_on(kope_cli, neo4j_server, tmp_path):
    suite = write_suite(tmp_path / "suite", [("relu", 1), ("zz_after", 1)])
    broken = (
        (suite / "relu.py")
        .read_text()
        .replace(
            "        return torch.relu(x)",
            "        if x.shape[0] == 128:\n            raise RuntimeError('reference broken on purpose')\n"
            "        return torch.relu(x)",
        )
    )
    (suite / "relu.py").write_text(broken)
    _, results, pairs = _bench_one_config(kope_cli, neo4j_server, tmp_path, suite, "0-1", "--no-final")
    assert results["complete"] and set(pairs) == {"relu", "zz_after"}
    assert pairs["relu"]["status"] == "error" and "reference broken on purpose" in pairs["relu"]["error"]
    assert pairs["relu"]["attempts"] == []
    # the bench went on: zz_after (a relu; the pointwise template serves it by structure) passes both its cases
    assert len(pairs["zz_after"]["attempts"]) == 1
    assert (results["metrics"]["active"]["cases_passed"], results["metrics"]["active"]["cases"]) == (2, 4)


# -- reports and bad inputs (no database needed) --------------------------------------------------------


def test_bench_report_regenerates_identical_files_from_results_json_alone(kope_cli, tmp_path):
    bench_results.write(tmp_path / "bench")
    first = kope_cli("bench", "report", str(tmp_path / "bench"))
    assert first.returncode == 0, first.stderr
    files = [
        "summary.md",
        "plots/pass_rate.png",
        "plots/speedup.png",
        "plots/tokens_per_step.png",
        "plots/memory_growth.png",
    ]
    before = {f: (tmp_path / "bench" / f).read_bytes() for f in files}
    for f in files:
        (tmp_path / "bench" / f).unlink()
    second = kope_cli("bench", "report", str(tmp_path / "bench"))
    assert second.returncode == 0, second.stderr
    assert {f: (tmp_path / "bench" / f).read_bytes() for f in files} == before
    assert "| active | 2/3 | 4/7 | 57.1% |" in second.stdout


def test_bench_compare_puts_benches_side_by_side_against_the_first(kope_cli, tmp_path):
    bench_results.write(tmp_path / "cold")
    bench_results.write(tmp_path / "warm")
    proc = kope_cli(
        "bench",
        "compare",
        str(tmp_path / "cold"),
        str(tmp_path / "warm"),
        "--label",
        "cold",
        "--label",
        "warm",
        "-o",
        str(tmp_path / "transfer.md"),
    )
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "transfer.md").read_text().splitlines()
    assert lines[0].startswith("| bench | memory imported | configuration |") and "paired speedup vs cold" in lines[0]
    assert "| cold | none (cold start) | active | 2/3 | 4/7 | 57.1% | 1.51x | (reference) |" in lines[2]
    assert "| warm | none (cold start) | active | 2/3 | 4/7 | 57.1% | 1.51x | 1.00x (n=4) |" in lines[4]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--configs", "active,turbo"], "unknown configuration 'turbo'"),
        (["--levels", "1,9"], "bad --levels '1,9'"),
        (["--levels", "two"], "bad --levels 'two'"),
        (["--suite", "no/such/folder"], "suite folder not found: no/such/folder"),
        (["--import-memory", "missing.jsonl"], "--import-memory file not found: missing.jsonl"),
        (["--configs", "active", "--baseline", "none"], "--baseline 'none' is not one of the configurations run"),
        (["--resume", "--fresh"], "choose one"),
        (["--resume", "--out", "empty"], "no bench to resume in empty"),
        (["--name", "bad name!"], "bench name must be"),
        (["report", "no-bench-here"], "bench folder not found: no-bench-here"),
        (["--steps", "2", "report", "x"], "takes its own options; remove --steps"),
        (["compare", "a", "b", "--label", "only-one"], "give one --label per folder"),
        (["record-space", "--family", "elementwise", "--out", "o", "--transfer-from", "empty"], "no recorded spaces"),
        (["record-space", "--operators", "relu", "--out", "o", "--transfer-from", "nothere"], "no such folder"),
        (["record-space", "--operators", "relu", "--out", "o", "--confirm", "-1"], "Invalid value for '--confirm'"),
    ],
)
def test_bad_inputs_give_one_error_line_and_a_non_zero_exit(kope_cli, tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    proc = kope_cli("bench", *args, env={k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J")})
    ok, errors = one_error_line(proc)
    assert ok, proc.stderr
    assert message in errors[0], errors


def test_a_suite_path_that_is_a_file_is_refused(kope_cli, tmp_path):
    task = write_suite(tmp_path / "suite", [("relu_a", 1)]) / "relu_a.py"
    proc = kope_cli("bench", "--suite", str(task))
    ok, errors = one_error_line(proc)
    assert ok and "not a file" in errors[0], proc.stderr


def test_an_existing_bench_is_not_overwritten_without_resume_or_fresh(kope_cli, tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "plan.json").write_text("{}")
    proc = kope_cli("bench", "--out", str(tmp_path / "bench"))
    ok, errors = one_error_line(proc)
    assert ok and "already holds a bench" in errors[0], proc.stderr
    assert "--resume" in proc.stderr and "--fresh" in proc.stderr
    assert (tmp_path / "bench" / "plan.json").read_text() == "{}"


def test_a_task_whose_hot_context_cannot_fit_is_recorded_as_an_error_and_the_bench_goes_on(
    kope_cli, neo4j_server, tmp_path
):
    """ContextBudgetError is that task's failure (a 26,788-token incumbent once stopped a 100-pair bench at pair
    10, and --resume would have stopped at it again)."""
    suite = write_suite(tmp_path / "suite", [("relu", 1), ("zz_after", 1)])
    source = (suite / "relu.py").read_text()
    padding = " ".join(f"word{i}" for i in range(30_000))  # a module constant the hot tier carries whole
    (suite / "relu.py").write_text(source + f'\n_PADDING = "{padding}"\n')
    _, results, pairs = _bench_one_config(kope_cli, neo4j_server, tmp_path, suite, "0", "--no-final")
    assert results["complete"] and set(pairs) == {"relu", "zz_after"}
    assert pairs["relu"]["status"] == "error" and "the hot context needs" in pairs["relu"]["error"]
    assert len(pairs["zz_after"]["attempts"]) == 1 and pairs["zz_after"]["attempts"][0]["status"] == "correct"
