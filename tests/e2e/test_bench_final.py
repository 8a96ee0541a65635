"""`kope bench` reports the final evaluation: visible and held-out pass rates, final speedups, overfit kernels."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.support import kernels
from tests.support.llm_replay import ReplayLLM, Reply

ROOT = Path(__file__).resolve().parents[1]
TASK = (ROOT / "fixtures" / "tasks" / "relu_heldout.py").read_text()
# Hard-coded to the visible element counts (64x64, 128x256, 32x32): zeros for anything else.
OVERFIT = kernels.FAST.replace(
    "        y = torch.empty_like(x)\n",
    "        if x.numel() not in (4096, 32768, 1024):\n            return torch.zeros_like(x)\n"
    "        y = torch.empty_like(x)\n",
)
FAST64 = (ROOT / "fixtures" / "honest" / "tiny_relu_carries_task.py").read_text()  # float32 and float64


@pytest.mark.slow
def test_bench_reports_visible_and_heldout_pass_rates_from_the_final_evaluation(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    suite = tmp_path / "suite"
    suite.mkdir()
    for operator in ("relu_a", "relu_b"):
        (suite / f"{operator}.py").write_text(TASK.replace('OPERATOR = "relu_heldout"', f'OPERATOR = "{operator}"'))
    script = [
        Reply(kernels.reply("tuned to the shapes", "algorithm", OVERFIT)),  # relu_a: right on visible cases only
        Reply(kernels.reply("openmp simd", "parallelization", FAST64)),  # relu_b: right everywhere
    ]
    out = tmp_path / "bench"
    with ReplayLLM(script, api_key="test-key") as server:
        env = neo4j_server.env(
            KOPE_LLM_BASE_URL=server.url,
            KOPE_LLM_MODEL="replay-model",
            KOPE_LLM_API_KEY="test-key",
            KOPE_DATA_DIR=str(tmp_path / "data"),
            KOPE_LLM_TIMEOUT="60",
        )
        proc = kope_cli(
            "bench", "--suite", str(suite), "--proposer", "llm", "--steps", "1", "--configs", "active",
            "--final-seeds", "2", "--final-rep-ms", "20", "--out", str(out), env=env, timeout=1500,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    pairs = {p["operator"]: p for p in results["pairs"]}
    for operator in ("relu_a", "relu_b"):
        final = pairs[operator]["final"]
        assert final["settings"]["seeds"] == 2 and final["decision_id"] == pairs[operator]["attempts"][0]["decision_id"]
        assert (final["visible"]["cases"], final["heldout"]["cases"]) == (3, 2)
        assert Path(final["kernel"]).is_file()
    assert pairs["relu_a"]["attempts"][0]["status"] == "correct"  # in the loop it looked right
    assert (pairs["relu_a"]["final"]["heldout"]["passed"], pairs["relu_a"]["final"]["overfit"]) == (0, True)
    assert (pairs["relu_b"]["final"]["heldout"]["passed"], pairs["relu_b"]["final"]["overfit"]) == (2, False)

    metrics = results["metrics"]["active"]
    assert (metrics["cases_passed"], metrics["cases"], metrics["pass_rate"]) == (6, 6, 1.0)
    assert (metrics["heldout_cases_passed"], metrics["heldout_cases"], metrics["heldout_pass_rate"]) == (2, 4, 0.5)
    assert metrics["overfit_operators"] == ["relu_a"] and metrics["final_evaluated"] == 2
    final_speedups = [
        c["speedup"] for p in pairs.values() for c in p["final"]["outcome"]["cases"] if not c.get("heldout")
    ]
    assert metrics["speedup_cases"] == 6 and all(s and s > 0 for s in final_speedups)
    gm = 1.0
    for s in final_speedups:
        gm *= s
    assert metrics["geomean_speedup"] == pytest.approx(gm ** (1 / 6))  # the final evaluation's, not the loop's

    # each final kernel was also timed as deployed (its file in plain processes, the user's own settings)
    deployed = [
        c.get("deployed_speedup")
        for p in pairs.values()
        for c in p["final"]["outcome"]["cases"]
        if not c.get("heldout")
    ]
    assert all(d and d > 0 for d in deployed), [p["final"]["outcome"].get("deployed_error") for p in pairs.values()]
    assert metrics["deployed_speedup_cases"] == 6

    summary = (out / "summary.md").read_text()
    assert "| held-out passed | held-out pass rate |" in summary and "| 2/4 | 50.0% |" in summary
    assert "| as-deployed geomean speedup | geomean speedup (harness) |" in summary
    assert "Correct on every visible case but wrong on held-out cases" in summary and "`active` · `relu_a`" in summary
    assert "## Fraction of roofline (final evaluation)" in summary or "Numbers are from the final evaluation" in summary

    # held-out results never reach the Experience Graph
    rows = graph_client._driver.execute_query(
        "MATCH (o:Outcome) WHERE o.ns = 'bench-bench-active' RETURN o.cases_json AS cases"
    ).records
    assert rows and all("heldout" not in r["cases"] for r in rows)

    # the visible cases' as-deployed figures do reach it, on the best attempt's Outcome (#33 item 7)
    for pair in pairs.values():
        final = pair["final"]
        found = graph_client._driver.execute_query(
            "MATCH (:Decision {uid: $uid})-[:PRODUCED]->(o:Outcome) RETURN o.deployed_speedup AS s, o.cases_json AS c",
            {"uid": f"bench-bench-active/{final['decision_id']}"},
        ).records
        want = {c["name"]: c["deployed_speedup"] for c in final["outcome"]["cases"] if not c.get("heldout")}
        assert {c["name"]: c.get("deployed_speedup") for c in json.loads(found[0]["c"])} == want
        assert found[0]["s"] == pytest.approx(math.exp(sum(math.log(v) for v in want.values()) / len(want)))
