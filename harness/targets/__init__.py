"""Targets by name. Add one by writing a ``Target`` subclass and registering it in ``TARGETS``."""

from __future__ import annotations

from collections.abc import Callable

from harness.errors import TargetUnavailableError
from harness.targets.base import Target


def _cpu() -> Target:
    from harness.targets.cpu import CpuTarget

    return CpuTarget()


def _triton(interpret: bool | None = None) -> Target:
    from harness.targets.triton import TritonTarget

    return TritonTarget(interpret=interpret)


def _cuda() -> Target:
    from harness.targets.cuda import CudaTarget

    return CudaTarget()


TARGETS: dict[str, Callable[..., Target]] = {"cpu": _cpu, "triton": _triton, "cuda": _cuda}


def get_target(name: str, **options: object) -> Target:
    """The target called ``name``; ``options`` are what ``Target.options()`` returned (so a worker rebuilds the same one)."""
    try:
        factory = TARGETS[name]
    except KeyError:
        raise TargetUnavailableError(f"unknown target {name!r}; known targets: {', '.join(TARGETS)}") from None
    return factory(**options)
