"""``triton``: Triton kernels. On a GPU: real runs, CUDA-event timing. Without one: the Triton
interpreter (``TRITON_INTERPRET=1``) on CPU tensors, for correctness only (``timings_valid`` false)."""

from __future__ import annotations

from typing import Any

from harness.errors import TargetUnavailableError
from harness.record import Hardware
from harness.targets.base import Target, gpu_worker_env


def _has_gpu() -> bool:
    """Whether a GPU is usable, asked without initialising CUDA here (this process may still fork workers)."""
    from harness.hardware import gpu_available

    try:
        return gpu_available()
    except Exception:  # a broken CUDA install reads as no GPU
        return False


class TritonTarget(Target):
    name = "triton"

    def __init__(self, interpret: bool | None = None) -> None:
        self.interpret = (not _has_gpu()) if interpret is None else interpret
        self.device = "cpu" if self.interpret else "cuda"
        self.uses_rlimit_as = self.interpret
        # The first launch JIT-compiles (runs ptxas) on a GPU and, under the interpreter, reads the kernel's source
        # (to rewrite it for numpy): neither is a cheat, so it runs outside the guards.
        self.warmup_forward = True
        self.check_native_threads = self.interpret

    def options(self) -> dict[str, object]:
        return {"interpret": self.interpret}

    def sandbox_profile(self) -> str:
        return "cpu" if self.interpret else "triton-gpu"

    def check_available(self) -> None:
        try:
            import triton  # noqa: F401 - imported only to see whether it is installed
        except ImportError:
            raise TargetUnavailableError("target triton needs the triton package", hint="pip install triton") from None

    def timings_valid(self) -> bool:
        return not self.interpret

    def worker_env(self, threads: int) -> dict[str, str]:
        from harness.commands import cache_root

        env = super().worker_env(threads)
        if not self.interpret:
            env.update(gpu_worker_env())
        env["TRITON_INTERPRET"] = "1" if self.interpret else "0"
        env.setdefault("TRITON_CACHE_DIR", str(cache_root() / "triton"))  # compiled kernels reused across evaluations
        return env

    def synchronize(self) -> None:
        if not self.interpret:
            import torch

            torch.cuda.synchronize()

    def timer(self, hardware: Hardware) -> Any:
        if self.interpret:
            return super().timer(hardware)
        import torch

        from harness.timing import CudaTimer

        return CudaTimer(torch.device("cuda"))

    def describe_hardware(self) -> Hardware:
        if self.interpret:
            return super().describe_hardware()
        from harness.hardware import gpu_fingerprint

        return gpu_fingerprint()
