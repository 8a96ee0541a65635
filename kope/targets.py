"""KOPE's side of the boundary with ``harness``: its errors, tasks and hardware, in KOPE's terms."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kope.errors import KopeError, ToolMissingError, UsageError


def harness_error(exc: Exception) -> KopeError:
    """The harness's typed errors as KOPE errors (exit 3 for a target this machine cannot run, else 2)."""
    from harness.errors import TargetUnavailableError

    if isinstance(exc, TargetUnavailableError):
        return ToolMissingError(exc.message, hint=exc.hint)
    return UsageError(getattr(exc, "message", str(exc)), hint=getattr(exc, "hint", None))


def load_task_view(name_or_path: str) -> tuple[Any, Path]:
    """(TaskView, task file) for a built-in operator name or a task file path."""
    from harness.errors import HarnessError
    from harness.suite import find_task
    from harness.task import load_task
    from kope.context.state import TaskView

    try:
        info = load_task(find_task(name_or_path).path)
    except HarnessError as exc:
        raise harness_error(exc) from None
    return TaskView.from_info(info), info.path


def selected_cases(task: Any, spec: Any) -> tuple[dict[str, Any], ...]:
    """The case dicts (name + parameters) of a ``TaskView`` that a harness case selection picks."""
    from harness.errors import HarnessError
    from harness.task import Case, TaskInfo, select_cases

    cases = [Case(i, str(c["name"]), {k: v for k, v in c.items() if k != "name"}) for i, c in enumerate(task.cases)]
    info = TaskInfo(task.operator, task.family, task.level, task.description, Path(task.operator), cases=cases)
    try:
        return tuple(c.as_dict() for c in select_cases(info, spec))
    except HarnessError as exc:
        raise harness_error(exc) from None


def hardware_for(target: str) -> dict[str, Any]:
    """The fingerprint of what ``target`` runs on: the GPU for triton/cuda, else this host's CPU.

    Without a GPU, ``cuda`` is an error; ``triton`` runs in the interpreter on the host (timings not valid),
    so its experience is filed under the host's CPU class."""
    from harness import hardware

    if target in ("triton", "cuda"):
        try:
            return hardware.gpu_fingerprint().to_dict()
        except Exception as exc:  # noqa: BLE001 - torch raises several kinds when no GPU is visible
            if target == "cuda":
                raise ToolMissingError(
                    f"the cuda target needs an NVIDIA GPU, and none is visible ({type(exc).__name__})"
                ) from None
    return hardware.cpu_fingerprint().to_dict()
