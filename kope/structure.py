"""KOPE's view of a task's traced structure (``harness.structure``): which template serves it, and how.

``task_structure(path, operator)`` traces and matches a task once per process (the trace
itself is cached on disk by the harness, by the file's content hash) and returns a
``Match`` or a ``NoMatch``; a reference that cannot be traced is a ``NoMatch`` whose
reason says why. ``inferred_family`` is the family of the matched structure, for task
files that declare none. ``summary`` is the compact record kept with each decision
(``params["structure"]``) and shown by ``kope tasks show``.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@functools.lru_cache(maxsize=64)
def _cached(path: str, digest: str, operator: str, target: str) -> Any:
    from harness.errors import HarnessError
    from harness.structure.match import NoMatch, match_task

    try:
        return match_task(path, operator, target)
    except HarnessError as exc:
        return NoMatch(path, digest, [], f"the reference could not be traced: {exc.message}")


def task_structure(path: str | Path, operator: str, target: str = "cpu") -> Any:
    """The structure match of the task at ``path`` (``harness.structure.match.Match`` or ``NoMatch``)."""
    p = Path(path).resolve()
    return _cached(str(p), _digest(p), operator, target)


def inferred_family(path: str | Path, operator: str) -> str | None:
    """The family of the task's matched structure (None when it matches nothing)."""
    from harness.structure.match import Match

    match = task_structure(path, operator)
    return match.family if isinstance(match, Match) else None


def summary(match: Any) -> dict[str, Any]:
    """What a decision records about the match: template, operator, family, stages and their bindings."""
    from harness.structure.match import Match

    if not isinstance(match, Match):
        return {"matched": False, "explanation": match.explanation()}
    return {"matched": True, **match.to_dict()}
