"""The tasks side of KOPE's boundary with the harness: the harness's record and vocabulary, tasks, the suite's
candidates and kernel templates, structure matching, the hardware fingerprint, and the translation of the
harness's errors into KOPE's (``TaskError``, ``TargetUnavailableError``). ``kope.boundary`` re-exports it all.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import HarnessError
from harness.errors import TargetUnavailableError as _HarnessTargetUnavailable
from harness.pyparse import parse as parse_source
from harness.record import EXCERPT_LIMIT, SCHEMA, CaseResult, GpuInfo, Hardware, Outcome, TimingStats, excerpt
from harness.suite.kernel_templates import KernelTemplate
from harness.task import Case, Task, TaskInfo, visible_source
from harness.vocabulary import FAMILIES, INFRASTRUCTURE_KINDS, LAYERS, STATUSES, TARGETS, UNKNOWN_FAMILY, Status
from kope.errors import ToolMissingError, UsageError

if TYPE_CHECKING:
    from harness.task_check import CaseCheck

__all__ = [
    "EXCERPT_LIMIT",
    "FAMILIES",
    "INFRASTRUCTURE_KINDS",
    "LAYERS",
    "SCHEMA",
    "STATUSES",
    "TARGETS",
    "UNKNOWN_FAMILY",
    "Case",
    "CaseResult",
    "CaseSelection",
    "GpuInfo",
    "Hardware",
    "KernelTemplate",
    "Outcome",
    "Status",
    "TargetUnavailableError",
    "Task",
    "TaskError",
    "TaskInfo",
    "TaskView",
    "TimingStats",
    "check_task",
    "excerpt",
    "find_candidate",
    "find_task",
    "hardware_for",
    "list_candidates",
    "load_task",
    "load_task_view",
    "read_task_info",
    "select_cases",
    "selected_cases",
    "suite_tasks",
    "template_for",
    "builtin_task_path",
    "inferred_family",
    "is_match",
    "level_from_path",
    "render_for_task",
    "machine_caches",
    "parse_source",
    "structure_summary",
    "task_structure",
    "templates_for_target",
    "trace_tasks",
    "visible_source",
]

# The harness's case selection: indices, ranges ("0-3") and names, as text or a list; None: every case.
CaseSelection = str | list[int | str] | tuple[int | str, ...] | None


class TaskError(UsageError):
    """The harness refused a task, a candidate file or an option (nothing was evaluated)."""


class TargetUnavailableError(TaskError, ToolMissingError):
    """This machine cannot run the target (e.g. cuda without a GPU), or the target is unknown."""

    exit_code = 3


def _kope_error(exc: HarnessError) -> TaskError:
    if isinstance(exc, _HarnessTargetUnavailable):
        return TargetUnavailableError(exc.message, hint=exc.hint)
    return TaskError(exc.message, hint=exc.hint)


@contextmanager
def _translated() -> Iterator[None]:
    """The harness's typed errors as KOPE's (the only place they are translated)."""
    try:
        yield
    except HarnessError as exc:
        raise _kope_error(exc) from exc


# -- tasks ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskView:
    """A task as KOPE's context and loop read it (from the harness's ``TaskInfo``)."""

    operator: str
    family: str
    level: int | None
    description: str
    source: str  # the task file's text without its held-out cases (the reference the prompt shows)
    cases: tuple[Mapping[str, Any], ...]  # each case: its name and parameter overrides
    path: str = ""  # the task file
    family_source: str = "file"  # "file": the task's FAMILY; "structure": inferred from its traced structure

    @classmethod
    def from_info(cls, info: TaskInfo, *, family: str | None = None) -> TaskView:
        """The view of a task; ``family`` (inferred from the structure) replaces a FAMILY the file does not set."""
        cases = tuple({"name": c.name, **dict(c.params)} for c in info.cases)
        inferred = family is not None and info.family == UNKNOWN_FAMILY
        return cls(
            info.operator,
            str(family if inferred else info.family),
            info.level,
            info.description or "",
            visible_source(info.path.read_text()),  # held-out cases never reach a prompt
            cases,
            str(info.path),
            "structure" if inferred else "file",
        )

    def case_params(self) -> list[tuple[str, dict[str, Any]]]:
        """(name, parameters) per case, as an outcome record lists them."""
        return [(str(c.get("name", i)), {k: v for k, v in c.items() if k != "name"}) for i, c in enumerate(self.cases)]


def find_task(name_or_path: str | Path) -> TaskInfo:
    """A built-in task by operator name, else a task file by path (metadata and cases, not executed)."""
    from harness import suite

    with _translated():
        return suite.find_task(name_or_path)


def load_task(path: str | Path) -> Task:
    """Load and validate a task file; its module is executed in a worker process under a timeout, never here."""
    from harness.task_loader import load_task_isolated

    with _translated():
        return load_task_isolated(path)


def read_task_info(path: str | Path) -> TaskInfo:
    from harness import task_loader

    with _translated():
        return task_loader.read_task_info(path)


def select_cases(info: TaskInfo, selection: CaseSelection, case_set: str = "visible") -> list[Case]:
    """The cases ``selection`` names among ``case_set`` (visible, heldout or all); None: all of them."""
    from harness import task

    with _translated():
        return task.select_cases(info, selection, case_set)


def selected_cases(task: TaskView, selection: CaseSelection) -> tuple[dict[str, Any], ...]:
    """The case dicts (name + parameters) of a ``TaskView`` that a harness case selection picks."""
    cases = [Case(i, str(c["name"]), {k: v for k, v in c.items() if k != "name"}) for i, c in enumerate(task.cases)]
    info = TaskInfo(task.operator, task.family, task.level, task.description, Path(task.operator), cases=cases)
    return tuple(c.as_dict() for c in select_cases(info, selection))


def load_task_view(name_or_path: str | Path) -> tuple[TaskView, Path]:
    """(TaskView, task file) for a built-in operator name or a task file path."""
    info = load_task(find_task(name_or_path).path)
    family = None
    if info.family == UNKNOWN_FAMILY:  # a plain KernelBench file: the family of its traced structure
        family = inferred_family(info.path, info.operator)
    return TaskView.from_info(info, family=family), info.path


def suite_tasks(family: str | None = None) -> list[TaskInfo]:
    """The built-in suite in suite order (family, level, operator), optionally one family."""
    from harness import suite

    with _translated():
        return suite.list_tasks(family)


def list_candidates(target: str = "cpu") -> dict[str, Path]:
    """The suite's hand-written example candidates for ``target``, by operator."""
    from harness import suite

    return suite.list_candidates(target)


def find_candidate(operator: str, target: str = "cpu") -> Path | None:
    from harness import suite

    return suite.find_candidate(operator, target)


def template_for(operator: str, target: str = "cpu") -> KernelTemplate | None:
    """The suite's kernel template serving ``operator`` on ``target`` (None when there is none)."""
    from harness.suite import kernel_templates

    with _translated():
        return kernel_templates.template_for(operator, target)


def check_task(path: str | Path, *, measure: bool = False) -> tuple[Task, list[CaseCheck]]:
    """Validate a task file and run each case's reference once in a fresh process."""
    from harness import task_check

    with _translated():
        return task_check.check_task(path, measure=measure)


# -- hardware ---------------------------------------------------------------------------------------


def hardware_for(target: str) -> Hardware:
    """The fingerprint of what ``target`` runs on: the GPU for triton/cuda, else this host's CPU.

    Without a GPU, ``cuda`` is an error; ``triton`` runs in the interpreter on the host (timings not valid),
    so its experience is filed under the host's CPU class."""
    from harness import hardware

    if target in ("triton", "cuda"):
        try:
            return hardware.gpu_fingerprint()
        except Exception as exc:  # torch raises several kinds when no GPU is visible
            if target == "cuda":
                raise ToolMissingError(
                    f"the cuda target needs an NVIDIA GPU, and none is visible ({type(exc).__name__})"
                ) from None
    return hardware.cpu_fingerprint()


# -- structure matching (the offline proposer's choice of template) -----------------------------------


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=64)
def _cached_structure(path: str, digest: str, operator: str, target: str) -> Any:
    from harness.structure.match import NoMatch, match_task

    try:
        return match_task(path, operator, target)
    except HarnessError as exc:
        return NoMatch(path, digest, [], f"the reference could not be traced: {exc.message}")


def task_structure(path: str | Path, operator: str, target: str = "cpu") -> Any:
    """The structure match of the task at ``path`` (``harness.structure.match.Match`` or ``NoMatch``).

    Traced and matched once per process (the trace itself is cached on disk by the harness, by the
    file's content hash); a reference that cannot be traced is a ``NoMatch`` whose reason says why."""
    p = Path(path).resolve()
    return _cached_structure(str(p), _digest(p), operator, target)


def is_match(structure: Any) -> bool:
    """Whether ``task_structure`` found a template for the task (else it holds the explanation)."""
    from harness.structure.match import Match

    return isinstance(structure, Match)


def inferred_family(path: str | Path, operator: str) -> str | None:
    """The family of the task's matched structure (None when it matches nothing): for files without FAMILY."""
    match = task_structure(path, operator)
    return str(match.family) if is_match(match) else None


def structure_summary(match: Any) -> dict[str, Any]:
    """What a decision records about the match (``params["structure"]``, shown by ``kope tasks show``)."""
    if not is_match(match):
        return {"matched": False, "explanation": match.explanation()}
    return {"matched": True, **match.to_dict()}


def trace_tasks(paths: Sequence[str | Path]) -> int:
    """Trace every task of ``paths`` not traced yet, in one worker process; how many were traced.

    A task that fails or hangs does not stop the others (its own ``task_structure`` reports it)."""
    from harness.structure.tracing import warm

    with _translated():
        return warm(list(paths))


def templates_for_target(target: str = "cpu") -> dict[str, KernelTemplate]:
    """The kernel templates of ``target`` by name."""
    from harness.suite.kernel_templates import list_templates

    with _translated():
        return {t.name: t for t in list_templates(target)}


def render_for_task(
    template: KernelTemplate, match: Any, settings: Mapping[str, Any], caches: Mapping[str, int] | None = None
) -> str:
    """The candidate ``template`` renders for a task matched by structure (``TaskError`` when it cannot).
    ``caches``: as on a machine with these cache sizes (``tiles=auto`` writes them into the kernel; a recorded
    space's machine), else this machine's."""
    from harness.hardware import caches_as

    with _translated(), caches_as(caches) if caches is not None else nullcontext():
        return template.render_task(match, dict(settings))


def machine_caches() -> dict[str, int]:
    """This machine's cache sizes (bytes per level: l1d, l1i, l2, l3), as a template's ``tiles=auto`` reads them."""
    from harness.hardware import cache_sizes

    return cache_sizes()


def builtin_task_path(operator: str) -> Path | None:
    """The file of the built-in task named ``operator`` (None when there is none)."""
    from harness import suite

    try:
        return suite.find_task(operator).path
    except HarnessError:
        return None


def level_from_path(path: str | Path) -> int | None:
    """The KernelBench level a task file's folder names (``level2/...``), if any."""
    from harness import task

    return task.level_from_path(Path(path))
