"""The triton and cuda targets on a real NVIDIA GPU (run by scripts/gpu_check.sh; skipped without a GPU)."""

from pathlib import Path

import pytest
import torch

from harness.evaluate import EvalOptions, evaluate
from harness.timing import Budget

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="needs an NVIDIA GPU visible to torch (torch.cuda.is_available() is False)",
    ),
]
BUDGET = Budget(warmup_ms=10, rep_ms=50)


def test_triton_kernel_runs_on_the_gpu_with_valid_timings():
    outcome = evaluate(TASK, ROOT / "fixtures" / "triton" / "relu.py", EvalOptions(target="triton", budget=BUDGET))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.timings_valid and outcome.speedup is not None
    assert outcome.hardware.class_.startswith("nvidia-sm") and outcome.hardware.gpu is not None
    assert all(c.ref_ms.n >= 5 and c.cand_ms.n >= 5 for c in outcome.cases)


def test_wrong_triton_kernel_is_incorrect_on_the_gpu():
    outcome = evaluate(TASK, ROOT / "fixtures" / "triton" / "relu_wrong.py", EvalOptions(target="triton", timing=False))
    assert outcome.error_kind == "incorrect:mismatch"


def test_cuda_load_inline_kernel_is_correct_and_timed():
    outcome = evaluate(TASK, ROOT / "fixtures" / "cuda" / "relu.py", EvalOptions(target="cuda", budget=BUDGET))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.timings_valid and outcome.speedup is not None and outcome.compile_time_s is not None
    assert outcome.hardware.gpu.compute_capability


def test_calling_torch_on_the_gpu_is_caught():
    outcome = evaluate(
        ROOT / "fixtures" / "tasks" / "tiny_softmax.py",
        ROOT / "adversarial" / "ref_obfuscated_method.py",
        EvalOptions(target="cuda", timing=False, static_checks=False),
    )
    assert outcome.error_kind == "cheat_detected:reference_call"
