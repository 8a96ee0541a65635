"""``ast.parse`` behind one process-wide lock.

CPython 3.11 keeps the AST constructor's recursion depth in per-interpreter state: two threads that parse at
once can interleave in it, and one of them fails with ``SystemError: AST constructor recursion depth mismatch``
(python/cpython#106905; seen here in ``tests/e2e/test_harness_workers.py``, three evaluations in one process, each
reading its task file). Every parse in ``harness`` and ``kope`` goes through :func:`parse`
(``tests/unit/test_pyparse.py`` holds them to it); parsing is fast and rare, so the lock costs nothing measurable.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename)
