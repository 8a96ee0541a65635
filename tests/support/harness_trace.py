"""The harness's own trace (its ``harness`` logger at DEBUG) kept while a test evaluates, so that an assertion about a
verdict can say why the verdict came out as it did (the native probe's samples, the calibrated allowance, the wait
stretches): a timing-sensitive test that fails once in a loaded CI run is diagnosable from its message alone."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname.lower()}: {record.getMessage()}")


@contextlib.contextmanager
def kept_trace() -> Iterator[list[str]]:
    """Yields the list the harness's trace lines are appended to while the block runs."""
    log = logging.getLogger("harness")
    kept, level = _Kept(), log.level
    log.addHandler(kept)
    log.setLevel(logging.DEBUG)
    try:
        yield kept.lines
    finally:
        log.removeHandler(kept)
        log.setLevel(level)


def explain(outcome: object, lines: list[str], last: int = 40) -> str:
    """An assertion message: the outcome's error excerpt and the trace's last ``last`` lines."""
    excerpt = getattr(outcome, "error_excerpt", None)
    return f"{excerpt}\n--- the harness's trace (last {last} lines):\n" + "\n".join(lines[-last:])
