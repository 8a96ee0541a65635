"""The GPU worker model and sandbox profile (issue 32), checked without a GPU.

The torch installed here is a CUDA build, so the fork hazard is real on this machine too:
``torch.cuda.is_available()`` calls the CUDA runtime, and a process forked after it cannot use
CUDA (torch marks the fork bad). Each check that could poison runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.sandbox import CPU_PROFILE, GPU_PROFILE, PROFILES, TRITON_GPU_PROFILE
from harness.targets.cpu import CpuTarget
from harness.targets.cuda import CudaTarget
from harness.targets.triton import TritonTarget
from harness.worker import sticky_error

ROOT = Path(__file__).resolve().parents[2]
needs_cuda_build = pytest.mark.skipif(torch.version.cuda is None, reason="torch without CUDA cannot poison a fork")


def _python(source: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=300, cwd=ROOT, env=_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


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
    assert _python(BAD_FORK + "torch.cuda.is_available(); print(bad_fork())") == "True"


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
    assert _python(source) == "False"


@needs_cuda_build
def test_the_zygotes_tripwire_names_every_cuda_call_and_the_probe_fork_sees_the_poison():
    source = (
        "import json, torch\nfrom harness import zygote\n"
        "zygote.install_tripwire(); zygote.probe_fork(); clean = zygote.cuda_touched()\n"
        "torch.cuda.is_available(); zygote.probe_fork()\n"
        "print(json.dumps([clean, zygote.cuda_touched()]))"
    )
    clean, touched = json.loads(_python(source))
    assert clean is None
    assert "torch.cuda.is_available" in touched and "bad fork" in touched


def test_the_gpu_profiles_open_the_drivers_device_nodes_and_set_no_address_space_limit():
    for profile in (GPU_PROFILE, TRITON_GPU_PROFILE):
        assert {"/dev/nvidiactl", "/dev/nvidia[0-9]*", "/dev/nvidia-uvm", "/dev/nvidia-caps/*"} <= set(profile.devices)
        assert "/proc/driver/nvidia" in profile.reads
        assert profile.rlimit_as is False and profile.device_memory_fraction
    assert CPU_PROFILE.rlimit_as and not CPU_PROFILE.devices and not CPU_PROFILE.spawn
    assert not GPU_PROFILE.spawn  # CUDA builds through the parent's compile service: exec stays trapped
    assert TRITON_GPU_PROFILE.spawn and "TRITON_CACHE_DIR" in TRITON_GPU_PROFILE.scratch_env
    assert "weakened" in TRITON_GPU_PROFILE.layers()["seccomp"] and "holds" in GPU_PROFILE.layers()["seccomp"]


def test_each_target_names_its_profile():
    assert PROFILES[CpuTarget().sandbox_profile()] is CPU_PROFILE
    assert PROFILES[CudaTarget().sandbox_profile()] is GPU_PROFILE
    assert PROFILES[TritonTarget(interpret=False).sandbox_profile()] is TRITON_GPU_PROFILE
    assert PROFILES[TritonTarget(interpret=True).sandbox_profile()] is CPU_PROFILE


@pytest.mark.parametrize(("profile", "limited"), [(CPU_PROFILE, True), (GPU_PROFILE, False)])
def test_the_address_space_limit_follows_the_profile(profile, limited):
    source = (
        "import resource\nfrom harness.worker import apply_memory_limit\n"
        f"apply_memory_limit({{'rlimit_as': True, 'memory_bytes': 1 << 30, 'profile': {profile.to_config()!r}}})\n"
        "print(resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY)"
    )
    assert _python(source) == str(limited)


def test_a_gpu_worker_gets_one_device(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert CudaTarget().worker_env(2)["CUDA_VISIBLE_DEVICES"] == "3"
    assert TritonTarget(interpret=False).worker_env(2)["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert CudaTarget().worker_env(2)["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in TritonTarget(interpret=True).worker_env(2)


def test_a_sticky_cuda_error_is_recognised_and_an_ordinary_one_is_not():
    sticky = {"ok": False, "message": "AcceleratorError: CUDA error: an illegal memory access was encountered"}
    assert sticky_error(sticky) and sticky["sticky"] == "cuda:illegal_address"
    assert sticky_error({"ok": False, "message": "x", "traceback": "CUDA error: unspecified launch failure"})
    assert not sticky_error({"ok": False, "message": "RuntimeError: shapes do not match"})


def test_doctor_says_which_sandbox_layers_hold_for_each_target():
    from harness.sandbox import sandbox_status
    from kope.doctor import check_sandbox_targets

    checks = {c.name: c for c in check_sandbox_targets()}
    assert set(checks) == {"Sandbox layers (cpu)", "Sandbox layers (cuda)", "Sandbox layers (triton)"}
    if sandbox_status().available and sandbox_status().layers["landlock"].startswith("ok"):
        assert checks["Sandbox layers (cpu)"].level == "ok"
    cuda, triton = checks["Sandbox layers (cuda)"], checks["Sandbox layers (triton)"]
    assert "no address-space limit" in cuda.detail and "rlimits" in (cuda.fix or "")
    assert "seccomp: weakened" in triton.detail and "seccomp" in (triton.fix or "")
