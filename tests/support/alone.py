"""Tests that must run with no other test beside them (the ``alone`` marker).

Some adversarial fixtures race the harness's own scheduling (a burst that waits for a quiet gap, a fill that lands
a few microseconds after the call returned): on an idle machine they are caught every time, beside a whole suite's
other pytest worker they were sometimes accepted (docs/harness-workers.md, "Known limits"). Their tests carry
``@pytest.mark.alone``: under pytest-xdist such a test takes a lock that every other test of the run holds shared
for its whole protocol (setup, call, teardown), so the other workers finish the test they are in and wait until
it is over (``harness.device_lock.reader_writer_lock``, the timing lock's: a stream of other tests cannot starve it). Without xdist (one
process) nothing runs beside any test and no lock is taken. tests/conftest.py imports the hook; elsewhere
``-p tests.support.alone`` loads it as a plugin.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.device_lock import reader_writer_lock


@functools.cache
def lock_folder(run_id: str) -> Path:
    """The folder of one pytest run's locks (every xdist worker of the run gets the same ``run_id``; two empty files
    left in the temporary folder), found once per worker (a test may change the temporary folder)."""
    folder = Path(tempfile.gettempdir()) / f"kope-pytest-{run_id}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def held(folder: Path, alone: bool) -> contextlib.AbstractContextManager[None]:
    """Hold the run's lock: exclusively for a test that runs alone, shared for any other."""
    return reader_writer_lock(folder / "turnstile.lock", folder / "alone.lock", alone)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        yield
        return
    with held(lock_folder(workerinput["testrunuid"]), item.get_closest_marker("alone") is not None):
        yield
