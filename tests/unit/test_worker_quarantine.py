"""Sticky device errors are recognised in an outcome; the probe that decides whether the device is still fit runs in
tests/integration/test_worker_quarantine_probe.py."""

import pytest

from harness.serve.quarantine import result_texts, sticky_signature


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda:illegal_address"),
        ("torch.AcceleratorError: CUDA error: unspecified launch failure", "cuda:launch_failure"),
        ("CUDA error: uncorrectable ECC error encountered", "cuda:ecc"),
        ("RuntimeError: ... GPU has fallen off the bus", "cuda:device_lost"),
        ("CUDA_ERROR_MISALIGNED_ADDRESS", "cuda:misaligned_address"),
    ],
)
def test_sticky_cuda_errors_are_recognised(text, name):
    assert sticky_signature([None, text]) == name


def test_ordinary_failures_are_not_sticky():
    assert sticky_signature(["incorrect: max abs diff 3.2 at [0, 4]", "RuntimeError: shape mismatch", None]) is None


def test_the_texts_of_an_outcome_include_every_case_error():
    result = {
        "outcome": {
            "error_excerpt": "case 'a'",
            "cases": [{"error": None}, {"error": "CUDA error: an illegal memory access was encountered"}],
        }
    }
    assert sticky_signature(result_texts(result)) == "cuda:illegal_address"
    assert result_texts({"error": {"message": "reference failed"}}) == ["reference failed"]
