"""Data shipped with KOPE: the repository's top-level ``cypher/`` and ``docker/``
folders, placed at ``kope/_resources/cypher`` and ``kope/_resources/docker`` in the
wheel (``[tool.hatch.build.targets.wheel.force-include]`` in pyproject.toml).

When KOPE runs from a source checkout (an editable install, or a git worktree put
first on ``PYTHONPATH``), the checkout's own folders are used, so an edit to a
``.cypher`` file takes effect without reinstalling.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent
_CHECKOUT = _HERE.parents[1]


def resource_dir(name: str) -> Path:
    """The folder of shipped resource ``name`` ("cypher" or "docker")."""
    installed = _HERE / name
    if installed.is_dir():
        return installed
    return _CHECKOUT / name
