"""Data shipped with KOPE: the repository's top-level ``cypher/`` and ``docker/``
folders, mapped into this package at install time (see setup.py).

When KOPE runs from a source checkout (including a git worktree put first on
``PYTHONPATH``), the checkout's own folders are used, so an edit to a
``.cypher`` file takes effect without reinstalling.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parents[2]


def resource_dir(name: str) -> Path:
    """The folder of shipped resource ``name`` ("cypher" or "docker")."""
    candidate = _CHECKOUT / name
    if (candidate / "__init__.py").is_file() and (_CHECKOUT / "pyproject.toml").is_file():
        return candidate
    return Path(str(resources.files(f"kope._resources.{name}")))
