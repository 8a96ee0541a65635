"""The built-in operator suite: discovery of its tasks and hand-written candidates.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import difflib
import functools
import re
from pathlib import Path

from harness.errors import TaskFormatError, TaskNotFoundError
from harness.task import TaskInfo
from harness.task_loader import read_task_info
from harness.vocabulary import FAMILIES

SUITE_DIR = Path(__file__).resolve().parent
TASKS_DIR = SUITE_DIR / "tasks"
CANDIDATES_DIR = SUITE_DIR / "candidates"


def task_files() -> list[Path]:
    return sorted(p for p in TASKS_DIR.glob("*/*.py") if not p.name.startswith("_"))


@functools.lru_cache(maxsize=1)
def _scan(stamp: tuple) -> tuple[TaskInfo, ...]:
    infos: list[TaskInfo] = []
    seen: dict[str, Path] = {}
    for path in task_files():
        info = read_task_info(path)
        family_dir = path.parent.name
        if info.family != family_dir:
            raise TaskFormatError(f"{path}: FAMILY is {info.family!r} but the file is in tasks/{family_dir}/")
        if info.operator != path.stem:
            raise TaskFormatError(
                f"{path}: OPERATOR is {info.operator!r} but built-in task files are named <operator>.py"
            )
        if info.operator in seen:
            raise TaskFormatError(f"{path}: operator {info.operator!r} is also defined by {seen[info.operator]}")
        seen[info.operator] = path
        infos.append(info)
    order = {f: i for i, f in enumerate(FAMILIES)}
    return tuple(sorted(infos, key=lambda t: (order.get(t.family, 99), t.level or 0, t.operator)))


def _stamp() -> tuple:
    return tuple((str(p), p.stat().st_mtime_ns) for p in task_files())


def list_tasks(family: str | None = None) -> list[TaskInfo]:
    """Every built-in task (validated: FAMILY matches its folder, OPERATOR its file name, no duplicates)."""
    tasks = list(_scan(_stamp()))
    if family is not None:
        if family not in FAMILIES:
            raise TaskNotFoundError(f"unknown family {family!r}; families: {', '.join(FAMILIES)}")
        tasks = [t for t in tasks if t.family == family]
    return tasks


def find_task(name_or_path: str | Path) -> TaskInfo:
    """A built-in task by operator name, else a task file by path."""
    text = str(name_or_path)
    path = Path(text)
    if text.endswith(".py") or path.is_file() or "/" in text:
        if not path.is_file():
            raise TaskNotFoundError(f"task file not found: {path}")
        return read_task_info(path)
    tasks = {t.operator: t for t in list_tasks()}
    if text in tasks:
        return tasks[text]
    close = difflib.get_close_matches(text, list(tasks), n=3)
    hint = f"did you mean {', '.join(close)}?" if close else "see `kope tasks list`"
    if not re.fullmatch(r"[a-z][a-z0-9_]*", text):
        bad = sorted({c for c in text if not (c.isascii() and (c.isalnum() or c == "_"))})
        why = f"characters {' '.join(repr(c) for c in bad)}" if bad else "upper-case letters or a leading digit"
        raise TaskNotFoundError(
            f"{text!r} is neither a built-in operator (operator names are snake_case: lower-case letters, digits and "
            f"_, starting with a letter; this one has {why}) nor an existing task file (a path to a .py file)",
            hint=hint,
        )
    raise TaskNotFoundError(f"no built-in task named {text!r} and no such file", hint=hint)


def list_candidates(target: str = "cpu") -> dict[str, Path]:
    folder = CANDIDATES_DIR / target
    return {p.stem: p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")}


def find_candidate(operator: str, target: str = "cpu") -> Path | None:
    return list_candidates(target).get(operator)
