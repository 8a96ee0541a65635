"""The native probe's per-call dispatch allowance (issue 33): what an honest kernel's own libtorch work costs, measured
in the reference worker by an honest kernel with an empty body, sampled like the timed units, cached per process."""

from __future__ import annotations

import os

import pytest
import torch

from harness import dispatch_allowance, native_probe
from harness.case_timer import PROBE_PERIOD_NS
from harness.worker_timed import HonestShell, TimedCalls

needs_perf = pytest.mark.skipif(not native_probe.available(), reason="perf events unavailable here")


class _Cpu:
    device = "cpu"

    def synchronize(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _fresh_cache():
    dispatch_allowance.forget()
    yield
    dispatch_allowance.forget()


def _unit(outputs: int = 1) -> TimedCalls:
    """A timed unit as the reference worker holds it after ``go``: 4 calls' inputs and outputs."""
    timed = TimedCalls(_Cpu(), None)
    timed.inputs = [[torch.randn(64, 1000), 3] for _ in range(4)]
    timed.outputs = [
        tuple(torch.randn(64, 1000) for _ in range(outputs)) if outputs > 1 else torch.randn(64, 1000) for _ in range(4)
    ]
    return timed


def test_the_honest_shell_allocates_outputs_like_the_references():
    like = [torch.randn(3, 5, dtype=torch.float64), torch.zeros(2, dtype=torch.int32)]
    outs = HonestShell()(like, torch.randn(4, 4).t(), 7)
    assert [(o.shape, o.dtype) for o in outs] == [(t.shape, t.dtype) for t in like]


def test_honest_dispatch_runs_for_the_cpu_time_asked_and_counts_outputs():
    calls, outputs = _unit(outputs=2).honest_dispatch(cpu_ms=5)
    assert outputs == 2 and calls >= 4 and calls % 4 == 0  # whole passes over the unit's calls
    assert TimedCalls(_Cpu(), None).honest_dispatch(cpu_ms=5) == (0, 0)  # no unit ran yet: nothing to imitate


@needs_perf
def test_sampled_calibration_sees_the_allocations_in_libtorch():
    sampler = native_probe.Sampler(os.getpid(), PROBE_PERIOD_NS, enabled=False)
    try:
        sampler.enable()
        calls, outputs = _unit().honest_dispatch(cpu_ms=dispatch_allowance.CPU_MS)
        sampler.disable()
        profile = sampler.profile()
    finally:
        sampler.close()
    found = dispatch_allowance.store("k", profile.reference_samples, PROBE_PERIOD_NS, calls, outputs)
    # an empty_like and a few checks: well under the 45-60 us a 64x1000 softmax spends in libtorch, above nothing
    assert profile.reference_samples > 0 and 0 < found.ns_per_output < 20_000, (profile.top(), found)


def test_the_allowance_is_the_margin_times_the_measured_cost_never_under_the_floor():
    cheap = dispatch_allowance.store("cheap", 40, PROBE_PERIOD_NS, calls=10_000, outputs=1)  # 0.2 us an output
    assert dispatch_allowance.allowance_ns(cheap, 1) == dispatch_allowance.FLOOR_NS
    dear = dispatch_allowance.store("dear", 400, PROBE_PERIOD_NS, calls=1_000, outputs=2)  # 10 us an output
    assert dear.ns_per_output == pytest.approx(10_000)
    assert dispatch_allowance.allowance_ns(dear, 3) == pytest.approx(3 * dispatch_allowance.MARGIN * 10_000)
    few = dispatch_allowance.store("few", dispatch_allowance.MIN_SAMPLES - 1, PROBE_PERIOD_NS, calls=1, outputs=1)
    assert dispatch_allowance.allowance_ns(few, 1) == dispatch_allowance.FLOOR_NS  # too few samples: no measure
    assert dispatch_allowance.allowance_ns(None, 0) == dispatch_allowance.FLOOR_NS  # no output tensor counts as one


def test_a_calibration_is_kept_per_key_until_it_is_stale(monkeypatch: pytest.MonkeyPatch):
    assert dispatch_allowance.cached("a") is None
    kept = dispatch_allowance.store("a", 100, PROBE_PERIOD_NS, calls=1_000, outputs=1)
    assert dispatch_allowance.cached("a") is kept and dispatch_allowance.cached("b") is None
    monkeypatch.setattr(dispatch_allowance, "TTL_S", -1.0)
    assert dispatch_allowance.cached("a") is None


def test_output_tensors_are_counted_from_the_workers_description():
    assert dispatch_allowance.count_tensors({"t": 0, "device": "cpu", "stride": [1]}) == 1
    assert dispatch_allowance.count_tensors({"seq": [{"t": 0}, {"v": 3}, {"seq": [{"t": 1}, {"t": 2}]}]}) == 3
    assert dispatch_allowance.count_tensors({"v": None}) == 0 and dispatch_allowance.count_tensors(None) == 0
