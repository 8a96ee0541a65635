"""`kope optimize` times its best kernel as deployed after the run: best.py in plain processes, the user's settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def test_the_run_summary_and_best_outcome_carry_the_as_deployed_speedup(kope_cli, neo4j_server, tmp_path):
    env = neo4j_server.env(KOPE_NAMESPACE="as-deployed-e2e", KOPE_DATA_DIR=str(tmp_path / "data"))
    proc = kope_cli(
        "optimize", "relu", "--proposer", "offline", "--cases", "0", "--steps", "1", "--out", str(tmp_path / "out"),
        "--json", env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)[0]
    assert summary["best_speedup"] is not None  # the harness's figure, from the loop
    assert summary["best_deployed_speedup"] is not None and summary["best_deployed_speedup"] > 0, summary
    assert summary["deployed_error"] is None
    best = json.loads((Path(summary["best_path"]).parent / "best_outcome.json").read_text())
    assert best["deployed_speedup"] == summary["best_deployed_speedup"]
    assert set(best["deployed_cases"]) == {case["name"] for case in best["cases"] if case.get("speedup") is not None}
