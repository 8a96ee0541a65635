"""The physical-limit check: bound = max(bytes / bandwidth, FLOPs / FLOP rate); faster than it is impossible."""

import json

import pytest

from harness.record import CaseResult, TimingStats
from harness.roofline import FLAG_FRACTION, CaseCost, Peaks, impossible, machine_peaks, roofline

PEAKS = Peaks("cpu-test", bandwidth_bytes_s=10e9, flops_s=100e9, source="measured", detail={})
BIG = 1 << 30  # far beyond the cache


def test_a_memory_bound_case_is_bounded_by_bytes_over_bandwidth():
    line = roofline(CaseCost(bytes=BIG, flops=0), PEAKS, cand_ms=200.0, cache_bytes=32 << 20)
    assert line.limited_by == "memory" and line.bound_ms == pytest.approx(1e3 * BIG / 10e9)
    assert line.roofline_fraction == pytest.approx(line.bound_ms / 200.0)
    assert not impossible(line)


def test_a_compute_bound_case_is_bounded_by_flops_over_the_flop_rate():
    line = roofline(CaseCost(bytes=1 << 20, flops=2 * 1024**3), PEAKS, cand_ms=50.0, cache_bytes=32 << 20)
    assert line.limited_by == "compute" and line.bound_ms == pytest.approx(1e3 * 2 * 1024**3 / 100e9)


def test_a_fake_fast_outcome_is_flagged():
    # 1 GiB in and out in 10 microseconds: 100,000 GB/s on a 10 GB/s machine
    line = roofline(CaseCost(bytes=BIG, flops=0), PEAKS, cand_ms=0.01, cache_bytes=32 << 20)
    assert line.roofline_fraction > 1000 and impossible(line)


def test_just_above_the_measured_peak_is_within_the_margin():
    bound_ms = 1e3 * BIG / 10e9
    inside = roofline(CaseCost(BIG, 0), PEAKS, cand_ms=bound_ms / (FLAG_FRACTION * 0.99), cache_bytes=0)
    outside = roofline(CaseCost(BIG, 0), PEAKS, cand_ms=bound_ms / (FLAG_FRACTION * 1.01), cache_bytes=0)
    assert not impossible(inside) and impossible(outside)


def test_a_working_set_that_fits_in_cache_has_no_bandwidth_bound():
    line = roofline(CaseCost(bytes=8 << 20, flops=0), PEAKS, cand_ms=1e-6, cache_bytes=32 << 20)
    assert line.bound_ms == 0 and line.roofline_fraction is None and line.limited_by == "none"
    assert not impossible(line)


def test_pinned_peaks_are_used_as_given(tmp_path, monkeypatch):
    pinned = tmp_path / "peaks.json"
    pinned.write_text(json.dumps({"schema": "kope.peaks/1", "bandwidth_bytes_s": 5e9, "flops_s": 7e10}))
    monkeypatch.setenv("KOPE_HARNESS_PEAKS", str(pinned))
    peaks = machine_peaks(type("Hw", (), {"id": "cpu-x"})(), "cpu", 1)
    assert (peaks.bandwidth_bytes_s, peaks.flops_s, peaks.source) == (5e9, 7e10, str(pinned))


def test_cached_peaks_are_read_per_hardware_id(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPE_HARNESS_ROOFLINE_CACHE", str(tmp_path))
    (tmp_path / "peaks").mkdir()
    (tmp_path / "peaks" / "cpu-x.json").write_text(json.dumps(PEAKS.to_dict() | {"hardware_id": "cpu-x"}))
    peaks = machine_peaks(type("Hw", (), {"id": "cpu-x"})(), "cpu", 1)
    assert (peaks.bandwidth_bytes_s, peaks.flops_s) == (10e9, 100e9)


def test_a_remeasurement_only_raises_the_peaks():
    lower = Peaks("cpu-test", 5e9, 200e9, "measured", {"copy_bytes_s": 5e9})
    merged = PEAKS.merged(lower)
    assert (merged.bandwidth_bytes_s, merged.flops_s) == (10e9, 200e9)


def test_the_roofline_fields_are_optional_in_the_record():
    case = CaseResult(0, "a", {}, True, ref_ms=TimingStats(1, 0, 0, 5), cand_ms=TimingStats(1, 0, 0, 5), speedup=1.0)
    assert "roofline_fraction" not in case.to_dict()
    case.min_bytes, case.flops, case.bound_ms, case.roofline_fraction = 10, 20, 0.5, 0.5
    data = case.to_dict()
    assert (data["min_bytes"], data["flops"], data["bound_ms"], data["roofline_fraction"]) == (10, 20, 0.5, 0.5)
    assert CaseResult.from_dict(data) == case


def test_the_experience_graph_accepts_roofline_fields_and_refuses_heldout_cases():
    from kope.memory import parse_outcome, synthetic
    from kope.memory.errors import InvalidRecordError

    record = synthetic.outcome("softmax", "correct", 1.7).to_dict()
    case = CaseResult(0, "a", {}, passed=True)
    case.min_bytes, case.flops, case.bound_ms, case.roofline_fraction = 10, 0, 0.5, 0.4
    stored = parse_outcome({**record, "cases": [case.to_dict()]})
    assert (stored.cases[0].min_bytes, stored.cases[0].bound_ms, stored.cases[0].roofline_fraction) == (10, 0.5, 0.4)
    with pytest.raises(InvalidRecordError, match="heldout"):
        parse_outcome({**record, "cases": [{**case.to_dict(), "heldout": True}]})
    case.roofline_fraction = -1.0
    with pytest.raises(InvalidRecordError, match="roofline_fraction: must be >= 0"):
        parse_outcome({**record, "cases": [case.to_dict()]})
