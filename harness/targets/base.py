"""The target plug-in interface: compile, run, time, describe the hardware.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.record import Hardware

# Environment variables that change how fast a kernel runs (threads, OpenMP wait policy, affinity, BLAS): the
# harness forces some of them (``Target.worker_env``); an as-deployed measurement takes the user's own.
PERFORMANCE_PREFIXES = ("OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "TORCH_NUM_", "ATEN_")


class Target:
    name = "base"
    device = "cpu"  # torch device type tensors live on for this target
    uses_rlimit_as = True  # False where the runtime needs a huge virtual address space (CUDA)
    warmup_forward = False  # True for JIT targets: one unguarded forward per case first (it compiles, e.g. calls ptxas)
    check_native_threads = True  # False where the runtime starts its own threads lazily (CUDA)

    # -- parent side ---------------------------------------------------------------------------
    def options(self) -> dict[str, object]:
        """Keyword arguments that rebuild this target in a worker (``get_target(name, **options)``)."""
        return {}

    def check_available(self) -> None:
        """Raise ``TargetUnavailableError`` (with the reason) when this machine cannot run the target."""

    def timings_valid(self) -> bool:
        return True

    def sandbox_profile(self) -> str:
        """The name of the sandbox profile its workers run under (``harness.sandbox.PROFILES``): ``cpu`` or ``gpu``."""
        return "cpu"

    def worker_env(self, threads: int) -> dict[str, str]:
        """Fixed thread count for every runtime. OMP_WAIT_POLICY=PASSIVE: torch's OpenMP runtime and the
        candidate's (often a different libgomp) alternate in one process while timing; spinning idle
        threads of one would steal the cores of the other."""
        value = str(threads)
        return {
            "OMP_NUM_THREADS": value,
            "MKL_NUM_THREADS": value,
            "OPENBLAS_NUM_THREADS": value,
            "OMP_DYNAMIC": "FALSE",
            "OMP_WAIT_POLICY": "PASSIVE",
        }

    def deployed_env(self) -> dict[str, str]:
        """What the workers of an as-deployed measurement (``EvalOptions.deployed``) run with: what the target
        needs that is not a performance setting (a GPU's device, Triton's cache), plus the user's own values of
        the performance settings ``worker_env`` forces (``OMP_*``, ``MKL_*``, ...) where the user set them, and
        nothing forced: what ``import best`` gets in the user's plain Python process."""
        forced = Target.worker_env(self, 1)
        env = {k: v for k, v in self.worker_env(1).items() if k not in forced}
        env.update({k: v for k, v in os.environ.items() if k.startswith(PERFORMANCE_PREFIXES)})
        return env

    # -- worker side ---------------------------------------------------------------------------
    def setup_worker(self, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass  # already set (only possible before any inter-op work)

    def configure_worker(self, threads: int, deployed: bool = False) -> int:
        """Set a worker up for a ``load`` request; returns its thread count: the harness's fixed one
        (``setup_worker``), or, as deployed, torch's own default, nothing set."""
        if deployed:
            import torch

            return torch.get_num_threads()
        self.setup_worker(threads)
        return threads

    def prime(self) -> None:
        """Initialise the device runtime before the harness snapshots what may not be patched."""
        import torch

        if self.device != "cpu":
            torch.zeros(1, device=self.device).add_(1)
            self.synchronize()

    def compile(self, path: Path) -> ModuleType:
        """Import the candidate file (which compiles its kernels); returns the module."""
        return import_file(path, "kope_candidate")

    def synchronize(self) -> None:
        pass

    def run(self, model: Any, inputs: list[Any]) -> Any:
        out = model(*inputs)
        self.synchronize()
        return out

    def timer(self, hardware: Hardware) -> Any:
        from harness.timing import CpuTimer

        private = hardware.caches.get("l2", 1 << 20) * max(1, hardware.cores)
        return CpuTimer(scrub_bytes=min(max(2 * private, 4 << 20), 64 << 20))

    def describe_hardware(self) -> Hardware:
        from harness.hardware import cpu_fingerprint

        return cpu_fingerprint()


def gpu_worker_env() -> dict[str, str]:
    """What a GPU target's worker runs with: one device, the first of ``CUDA_VISIBLE_DEVICES`` (else 0; an
    evaluation worker service sets one per device)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return {"CUDA_VISIBLE_DEVICES": visible or "0"}


def import_file(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def compile_seconds() -> float | None:
    """Seconds spent in the harness's compile paths so far (None: nothing was compiled)."""
    from harness import cpu
    from harness.targets import torch_ext

    calls = cpu.STATS["calls"] + torch_ext.STATS["calls"]
    return None if calls == 0 else cpu.STATS["seconds"] + torch_ext.STATS["seconds"]


def now() -> float:
    return time.perf_counter()
