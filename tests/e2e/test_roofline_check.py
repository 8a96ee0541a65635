"""The physical-limit check end to end: a fake-fast outcome is flagged; an honest kernel gets its fraction of roofline."""

import json
from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.timing import Budget

REPO = Path(__file__).resolve().parents[2]
MATMUL = REPO / "harness" / "suite" / "candidates" / "cpu" / "matmul.py"
BUDGET = Budget(warmup_ms=5, rep_ms=20)


def pin(tmp_path: Path, bandwidth: float, flops: float) -> Path:
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"schema": "kope.peaks/1", "bandwidth_bytes_s": bandwidth, "flops_s": flops}))
    return path


def test_an_outcome_faster_than_the_hardware_allows_is_flagged(tmp_path, monkeypatch):
    # The machine claims 1 MFLOP/s: the 268 MFLOPs of a 512^3 product cannot take milliseconds.
    monkeypatch.setenv("KOPE_HARNESS_PEAKS", str(pin(tmp_path, 1e6, 1e6)))
    monkeypatch.setenv("KOPE_HARNESS_ROOFLINE_CACHE", str(tmp_path / "cache"))
    outcome = evaluate("matmul", MATMUL, EvalOptions(cases="0", seeds=1, budget=BUDGET))
    assert outcome.error_kind == "cheat_detected:faster_than_hardware", outcome.error_excerpt
    assert "the physical limit" in outcome.error_excerpt and "268,435,456 FLOPs" in outcome.error_excerpt
    case = outcome.cases[0]
    assert case.flops == 2 * 512**3 and case.roofline_fraction > 1000
    # a flagged outcome vouches for nothing: no passed case, no speedup (issue 33, item 6)
    assert outcome.cases_passed == 0 and outcome.speedup is None
    assert not case.passed and case.speedup is None and "flagged" in (case.error or "")


def test_an_honest_kernel_gets_its_fraction_of_roofline_in_kope_eval_json(kope_cli, tmp_path):
    import os

    env = dict(os.environ, KOPE_HARNESS_ROOFLINE_CACHE=str(tmp_path / "cache"))
    proc = kope_cli("eval", "matmul", str(MATMUL), "--cases", "0", "--seeds", "1", "--rep-ms", "20", "--json", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (case,) = json.loads(proc.stdout)["cases"]
    assert case["flops"] == 2 * 512**3 and case["min_bytes"] == 3 * 512 * 512 * 4
    assert case["bound_ms"] > 0 and 0 < case["roofline_fraction"] <= 1.5
    peaks = json.loads(next((tmp_path / "cache" / "peaks").glob("*.json")).read_text())
    assert peaks["bandwidth_bytes_s"] > 0 and peaks["flops_s"] > 0 and peaks["source"] == "measured"
