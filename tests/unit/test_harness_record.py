"""The outcome record serialises to exactly the kope.outcome/1 contract."""

import json

import pytest

from harness.record import CaseResult, GpuInfo, Hardware, Outcome, Status, TimingStats, excerpt, geometric_mean

CONTRACT_KEYS = {
    "schema",
    "status",
    "task",
    "family",
    "level",
    "target",
    "cases_total",
    "cases_passed",
    "speedup",
    "error_kind",
    "error_excerpt",
    "compile_time_s",
    "timings_valid",
    "threads",
    "duration_s",
    "hardware",
    "cases",
}
HARDWARE_KEYS = {"id", "class", "vendor", "arch", "cpu_model", "cores", "isa", "caches", "gpu"}
CASE_KEYS = {"index", "name", "params", "passed", "error", "ref_ms", "cand_ms", "speedup"}


def hardware(gpu=None):
    return Hardware(
        id="cpu-3f9a1c2e",
        class_="x86_64-avx512",
        vendor="intel",
        arch="x86_64",
        cpu_model="Xeon",
        cores=2,
        isa=["avx2", "avx512f"],
        caches={"l1d": 49152, "l2": 2097152},
        gpu=gpu,
    )


def outcome(**kw):
    base = dict(
        status=Status.CORRECT,
        task="softmax",
        family="normalization",
        level=1,
        target="cpu",
        cases_total=2,
        cases_passed=2,
        speedup=1.5,
        error_kind=None,
        error_excerpt=None,
        compile_time_s=0.9,
        timings_valid=True,
        threads=2,
        duration_s=4.2,
        hardware=hardware(),
        cases=[
            CaseResult(
                0, "a", {"dim": 3}, True, None, TimingStats(3.0, 0.1, 0.02, 40), TimingStats(2.0, 0.1, 0.03, 60), 1.5
            ),
            CaseResult(1, "b", {}, False, "not run"),
        ],
    )
    base.update(kw)
    return Outcome(**base)


def test_outcome_json_has_exactly_the_contract_fields():
    data = json.loads(outcome().to_json())
    assert set(data) == CONTRACT_KEYS
    assert data["schema"] == "kope.outcome/1" and data["status"] == "correct"
    assert set(data["hardware"]) == HARDWARE_KEYS and data["hardware"]["class"] == "x86_64-avx512"
    assert all(set(c) == CASE_KEYS for c in data["cases"])
    assert data["cases"][0]["ref_ms"] == {"median": 3.0, "iqr": 0.1, "cv": 0.02, "n": 40}


def test_absent_values_are_null_not_minus_one():
    data = outcome(speedup=None, compile_time_s=None).to_dict()
    assert data["speedup"] is None and data["compile_time_s"] is None and data["error_kind"] is None
    assert data["cases"][1]["ref_ms"] is None and data["cases"][1]["speedup"] is None
    assert -1 not in [v for v in data.values() if not isinstance(v, (dict, list))]


def test_outcome_round_trips_through_json():
    gpu = GpuInfo(name="H100", compute_capability="9.0", sms=132, memory_bytes=80 << 30)
    original = outcome(
        status=Status.INCORRECT, error_kind="incorrect:mismatch", error_excerpt="x", hardware=hardware(gpu)
    )
    again = Outcome.from_json(original.to_json())
    assert again.to_dict() == original.to_dict()


def test_error_kind_must_start_with_a_status():
    with pytest.raises(ValueError, match="does not start with a status"):
        outcome(error_kind="weird:thing")


def test_from_dict_rejects_another_schema():
    data = outcome().to_dict()
    data["schema"] = "kope.outcome/2"
    with pytest.raises(ValueError, match="not a kope.outcome/1 record"):
        Outcome.from_dict(data)


def test_timing_stats_median_iqr_and_cv():
    stats = TimingStats.from_samples([1.0, 2.0, 3.0, 4.0, 100.0])
    assert stats.median == 3.0 and stats.n == 5
    assert stats.iqr == pytest.approx(2.0)
    assert stats.cv > 1.0  # one outlier makes the spread large
    assert TimingStats.from_samples([2.0, 2.0]).cv == 0.0


def test_geometric_mean_ignores_missing_values():
    assert geometric_mean([2.0, 8.0]) == pytest.approx(4.0)
    assert geometric_mean([None, 4.0]) == pytest.approx(4.0)
    assert geometric_mean([]) is None


def test_excerpt_keeps_first_and_last_lines_within_the_limit():
    text = "\n".join(f"line {i}" for i in range(2000))
    short = excerpt(text, 500)
    assert len(short) <= 500
    assert short.startswith("line 0\n") and short.endswith("line 1999")
    assert "elided" in short
    assert excerpt("short") == "short" and excerpt(None) is None
