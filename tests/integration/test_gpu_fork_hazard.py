"""The GPU worker model's fork hazard (issue 32), checked without a GPU, each check in a fresh interpreter.

The torch installed here is a CUDA build, so the fork hazard is real on this machine too:
``torch.cuda.is_available()`` calls the CUDA runtime, and a process forked after it cannot use
CUDA (torch marks the fork bad). Each check that could poison runs in a fresh interpreter (seconds each:
it imports torch); the rest of the worker model's checks are in tests/unit/test_gpu_worker_model.py.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.support.processes import python_line

needs_cuda_build = pytest.mark.skipif(torch.version.cuda is None, reason="torch without CUDA cannot poison a fork")


BAD_FORK = """
import os, torch
def bad_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(3 if torch.cuda._is_in_bad_fork() else 0)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 3
"""


@needs_cuda_build
def test_asking_torch_whether_there_is_a_gpu_poisons_later_forks_here_too():
    # the hazard the worker model is built around, reproduced on this GPU-less machine
    assert python_line(BAD_FORK + "torch.cuda.is_available(); print(bad_fork())") == "True"


@needs_cuda_build
def test_the_parent_asks_for_the_gpu_without_touching_cuda_and_may_still_fork():
    source = BAD_FORK + (
        "from harness import hardware\n"
        "from harness.errors import TargetUnavailableError\n"
        "from harness.targets.cuda import CudaTarget\n"
        "from harness.targets.triton import TritonTarget\n"
        "hardware.gpu_available(); hardware.gpu_devices(); hardware._probe(None)\n"
        "TritonTarget(); CudaTarget().worker_env(1)\n"
        "try:\n    CudaTarget().check_available()\nexcept TargetUnavailableError:\n    pass\n"
        "try:\n    hardware.gpu_fingerprint()\nexcept RuntimeError:\n    pass\n"
        "print(torch.cuda.is_initialized() or bad_fork())"
    )
    assert python_line(source) == "False"


@needs_cuda_build
def test_the_zygotes_tripwire_names_every_cuda_call_and_the_probe_fork_sees_the_poison():
    source = (
        "import json, torch\nfrom harness import zygote\n"
        "zygote.install_tripwire(); zygote.probe_fork(); clean = zygote.cuda_touched()\n"
        "torch.cuda.is_available(); zygote.probe_fork()\n"
        "print(json.dumps([clean, zygote.cuda_touched()]))"
    )
    clean, touched = json.loads(python_line(source))
    assert clean is None
    assert "torch.cuda.is_available" in touched and "bad fork" in touched
