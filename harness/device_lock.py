"""The device lock: one evaluation at a time runs and times kernels on a device; compiling may overlap. And the
reader/writer lock the machine-wide timing lock (``harness.timing.machine_lock``) and the tests' ``alone`` marker
(``tests/support/alone.py``) are made of.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from harness import settings


@contextlib.contextmanager
def device_lock() -> Iterator[None]:
    path = settings.device_lock_path()
    if not path:
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextlib.contextmanager
def reader_writer_lock(turnstile_path: Path, main_path: Path, exclusive: bool) -> Iterator[None]:
    """A reader/writer lock over two files (flock), held exclusively by a writer and shared by readers. A writer
    first takes the turnstile and keeps it, so a stream of readers cannot starve it."""
    turnstile = os.open(turnstile_path, os.O_RDWR | os.O_CREAT, 0o600)
    main = os.open(main_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        if exclusive:
            fcntl.flock(main, fcntl.LOCK_EX)
        else:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(main, fcntl.LOCK_SH)
        yield
    finally:
        os.close(main)  # closing the descriptors releases the locks
        os.close(turnstile)
