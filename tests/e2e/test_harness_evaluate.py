"""evaluate(): timing statistics, speedups, seeds, the degenerate-reference guard, targets and the record."""

import json
from pathlib import Path

import pytest

from harness.errors import CandidateNotFoundError, OptionsError, ReferenceFailedError, TargetUnavailableError
from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_candidate
from harness.timing import Budget

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "fixtures" / "tasks"
SOFTMAX = find_candidate("softmax")


def test_correct_candidate_is_timed_case_by_case():
    outcome = evaluate(
        TASKS / "tiny_softmax.py", SOFTMAX, EvalOptions(budget=Budget(warmup_ms=5, rep_ms=30, min_reps=5))
    )
    assert outcome.status.value == "correct" and outcome.timings_valid
    for case in outcome.cases:
        assert case.ref_ms.n >= 5 and case.cand_ms.n >= 5
        assert case.ref_ms.median > 0 and case.cand_ms.iqr >= 0 and case.cand_ms.cv >= 0
        assert case.speedup == pytest.approx(case.ref_ms.median / case.cand_ms.median)
    product = 1.0
    for case in outcome.cases:
        product *= case.speedup
    assert outcome.speedup == pytest.approx(product ** (1 / len(outcome.cases)))
    assert outcome.threads >= 1 and outcome.duration_s > 0


def test_outcome_json_is_the_contract_record():
    outcome = evaluate(TASKS / "tiny_softmax.py", SOFTMAX, EvalOptions(cases="0", timing=False))
    data = json.loads(outcome.to_json())
    assert data["schema"] == "kope.outcome/1" and data["status"] == "correct" and data["task"] == "tiny_softmax"
    assert data["cases_total"] == 1 and data["cases"][0]["name"] == "64x1000" and data["speedup"] is None


def test_a_fixed_seed_gives_reproducible_inputs():
    options = EvalOptions(cases="1", timing=False, seed=1234)
    a = evaluate(TASKS / "tiny_softmax.py", ROOT / "adversarial" / "all_zeros.py", options)
    b = evaluate(TASKS / "tiny_softmax.py", ROOT / "adversarial" / "all_zeros.py", options)
    assert a.cases[0].error == b.cases[0].error  # same seed in the message, same first mismatch


def test_degenerate_reference_inputs_are_regenerated():
    # Half of the seeds make this task's reference all zeros; an all-zeros candidate must still fail.
    zeros = ROOT / "adversarial" / "all_zeros.py"
    for seed in range(2):
        outcome = evaluate(
            TASKS / "often_degenerate.py", zeros, EvalOptions(timing=False, seed=seed, static_checks=False)
        )
        assert outcome.error_kind == "incorrect:mismatch", outcome.error_excerpt


def test_a_reference_that_is_always_degenerate_is_a_task_error():
    with pytest.raises(ReferenceFailedError, match="stays degenerate"):
        evaluate(TASKS / "always_degenerate.py", ROOT / "adversarial" / "all_zeros.py", EvalOptions(timing=False))


def test_triton_runs_under_the_interpreter_without_a_gpu():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the triton target runs for real (see test_harness_gpu.py)")
    outcome = evaluate(TASKS / "tiny_relu.py", ROOT / "fixtures" / "triton" / "relu.py", EvalOptions(target="triton"))
    assert outcome.status.value == "correct" and outcome.target == "triton"
    assert outcome.timings_valid is False and outcome.speedup is None
    assert all(c.ref_ms is None and c.cand_ms is None for c in outcome.cases)


def test_a_wrong_triton_kernel_is_incorrect_under_the_interpreter():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    outcome = evaluate(
        TASKS / "tiny_relu.py", ROOT / "fixtures" / "triton" / "relu_wrong.py", EvalOptions(target="triton")
    )
    assert outcome.error_kind == "incorrect:mismatch"


@pytest.mark.slow
def test_load_inline_candidates_work_and_are_cached():
    first = evaluate(TASKS / "tiny_relu.py", ROOT / "fixtures" / "load_inline" / "relu.py", EvalOptions(timing=False))
    assert first.status.value == "correct", first.error_excerpt
    second = evaluate(TASKS / "tiny_relu.py", ROOT / "fixtures" / "load_inline" / "relu.py", EvalOptions(timing=False))
    assert second.status.value == "correct"
    assert second.compile_time_s < 10  # the build directory is keyed by the source hash: no rebuild


@pytest.mark.slow
def test_a_load_inline_build_failure_is_a_compile_error():
    outcome = evaluate(
        TASKS / "tiny_relu.py", ROOT / "fixtures" / "load_inline" / "broken.py", EvalOptions(timing=False)
    )
    assert outcome.error_kind == "compile_error" and "kope-no-such-option" in outcome.error_excerpt


def test_cuda_without_a_gpu_is_a_clear_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(TargetUnavailableError, match="needs an NVIDIA GPU"):
        evaluate(TASKS / "tiny_relu.py", ROOT / "fixtures" / "cuda" / "relu.py", EvalOptions(target="cuda"))


def test_bad_options_and_paths_are_errors():
    with pytest.raises(TargetUnavailableError, match="unknown target 'npu'"):
        evaluate(TASKS / "tiny_relu.py", SOFTMAX, EvalOptions(target="npu"))
    with pytest.raises(CandidateNotFoundError):
        evaluate(TASKS / "tiny_relu.py", ROOT / "nope.py")
    with pytest.raises(OptionsError, match="seeds must be at least 1"):
        EvalOptions(seeds=0)
    with pytest.raises(OptionsError, match="has no case"):
        evaluate(TASKS / "tiny_relu.py", SOFTMAX, EvalOptions(cases="nope"))
