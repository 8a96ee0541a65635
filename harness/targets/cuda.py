"""``cuda``: CUDA C++ through ``torch.utils.cpp_extension.load_inline`` on an NVIDIA GPU."""

from __future__ import annotations

from typing import Any

from harness.errors import TargetUnavailableError
from harness.record import Hardware
from harness.targets.base import Target, gpu_worker_env


class CudaTarget(Target):
    name = "cuda"
    device = "cuda"
    uses_rlimit_as = False  # the CUDA runtime reserves far more virtual memory than any sane limit
    warmup_forward = True  # lazy CUDA/cuBLAS initialisation happens on the first call
    check_native_threads = False

    def check_available(self) -> None:
        from harness.hardware import gpu_available

        if not gpu_available():  # asked in a fresh interpreter: this process may still fork workers
            raise TargetUnavailableError(
                "target cuda needs an NVIDIA GPU, and torch sees none (torch.cuda.is_available() is False)",
                hint="run on a machine with an NVIDIA GPU and a CUDA build of torch; use --target cpu here",
            )

    def worker_env(self, threads: int) -> dict[str, str]:
        return {**super().worker_env(threads), **gpu_worker_env()}

    def sandbox_profile(self) -> str:
        return "gpu"

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def timer(self, hardware: Hardware) -> Any:
        import torch

        from harness.timing import CudaTimer

        return CudaTimer(torch.device("cuda"))

    def describe_hardware(self) -> Hardware:
        from harness.hardware import gpu_fingerprint

        return gpu_fingerprint()
