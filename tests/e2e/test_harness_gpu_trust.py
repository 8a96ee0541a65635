"""Trust checks on a real NVIDIA GPU (run by scripts/gpu_check.sh; skipped without a GPU).

A CPU fallback on a GPU target is a cheat; the end event of a timed call waits for every stream;
the physical-limit check uses the GPU's measured peaks; strides and held-out cases work on the device.
"""

import json
from pathlib import Path

import pytest
import torch

from harness.evaluate import EvalOptions, evaluate
from harness.timing import Budget, CudaTimer

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
BUDGET = Budget(warmup_ms=10, rep_ms=50)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs an NVIDIA GPU visible to torch (torch.cuda.is_available() is False)",
    ),
]


def test_a_cpu_fallback_on_the_gpu_target_is_caught():
    outcome = evaluate(
        TASK, ROOT / "fixtures" / "cuda" / "relu_cpu_fallback.py", EvalOptions(target="cuda", timing=False)
    )
    assert outcome.error_kind == "cheat_detected:device_to_host", outcome.error_excerpt
    assert "computing on the CPU is not a GPU kernel" in outcome.error_excerpt


def test_an_honest_cuda_kernel_is_not_taken_for_a_cpu_fallback_and_gets_roofline_fields():
    outcome = evaluate(
        "relu", ROOT / "fixtures" / "cuda" / "relu.py", EvalOptions(target="cuda", cases="0-4", budget=BUDGET)
    )
    assert outcome.status.value == "correct", outcome.error_excerpt
    for case in outcome.cases:
        assert case.bound_ms is not None and case.min_bytes > 0
        assert case.roofline_fraction is None or 0 < case.roofline_fraction <= 1.5


def test_the_end_event_waits_for_work_on_other_streams():
    timer = CudaTimer(torch.device("cuda"))
    side = torch.cuda.Stream()
    cycles = 200_000_000

    def on_side_stream():
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles)

    def on_this_stream():
        torch.cuda._sleep(cycles)

    on_this_stream()
    torch.cuda.synchronize()
    same, _ = timer.time(on_this_stream)
    other, _ = timer.time(on_side_stream)
    assert other >= 0.8 * same, (other, same)  # without the device-wide sync the side stream's work was not timed


def test_a_fake_fast_outcome_on_the_gpu_is_flagged(tmp_path, monkeypatch):
    pinned = tmp_path / "peaks.json"
    pinned.write_text(
        json.dumps({"schema": "kope.peaks/1", "bandwidth_bytes_s": 1e6, "flops_s": 1e6, "detail": {"cache_bytes": 0}})
    )
    monkeypatch.setenv("KOPE_HARNESS_PEAKS", str(pinned))
    outcome = evaluate(
        TASK, ROOT / "fixtures" / "cuda" / "relu.py", EvalOptions(target="cuda", cases="0", budget=BUDGET)
    )
    assert outcome.error_kind == "cheat_detected:faster_than_hardware", outcome.error_excerpt


def test_heldout_cases_run_on_the_gpu():
    outcome = evaluate(
        ROOT / "fixtures" / "tasks" / "relu_heldout.py",
        ROOT / "fixtures" / "cuda" / "relu.py",
        EvalOptions(target="cuda", case_set="all", timing=False),
    )
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert sum(c.heldout for c in outcome.cases) == 2
