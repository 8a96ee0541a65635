"""``cpu``: C/C++ kernels (OpenMP/SIMD) through ``harness.cpu.compile_cpp`` or ``load_inline``."""

from __future__ import annotations

import shutil

from harness.errors import TargetUnavailableError
from harness.targets.base import Target


class CpuTarget(Target):
    name = "cpu"
    device = "cpu"

    def check_available(self) -> None:
        import os

        if not any(shutil.which(c) for c in (os.environ.get("CXX") or "", "c++", "g++", "clang++") if c):
            raise TargetUnavailableError(
                "target cpu needs a C++ compiler and none was found", hint="install g++ (with OpenMP) or set CXX"
            )
