"""Sticky device errors are recognised in an outcome; the probe decides whether the device is still fit."""

import os

import pytest

from harness.serve.quarantine import probe_env, result_texts, run_probe, sticky_signature


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


def test_the_cpu_probe_passes_and_reports_the_hardware_of_each_target():
    result = run_probe("cpu", probe_env(dict(os.environ)))
    assert result.ok, result.detail
    assert "cpu" in result.targets and result.hardware["cpu"]["id"].startswith("cpu-")


def test_a_failing_probe_command_fails_the_probe_with_its_output(tmp_path):
    command = "echo 'Xid 79: GPU has fallen off the bus' >&2; exit 3"
    result = run_probe("cpu", probe_env(dict(os.environ)), command)
    assert not result.ok and "exited 3" in result.detail and "fallen off the bus" in result.detail


def test_the_cuda_probe_fails_where_there_is_no_gpu():
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = run_probe("cuda", probe_env(dict(os.environ)))
    assert not result.ok and "no CUDA device" in result.detail
