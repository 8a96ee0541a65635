"""The worker service's device probe, run for real (a probe evaluation in worker processes, seconds each): it decides
whether the device is still fit. Recognising sticky errors in an outcome: tests/unit/test_worker_quarantine.py."""

import os

import pytest

from harness.serve.quarantine import probe_env, run_probe


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
