"""The GPU worker model and sandbox profile (issue 32), checked without a GPU.

The fork hazard itself (torch's CUDA runtime poisoning later forks), checked in fresh interpreters that import
torch, is in tests/integration/test_gpu_fork_hazard.py.
"""

from __future__ import annotations

import pytest

from harness.sandbox import CPU_PROFILE, GPU_PROFILE, PROFILES, TRITON_GPU_PROFILE
from harness.targets.cpu import CpuTarget
from harness.targets.cuda import CudaTarget
from harness.targets.triton import TritonTarget
from harness.worker import sticky_error
from tests.support.processes import python_line


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
    assert python_line(source) == str(limited)


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
