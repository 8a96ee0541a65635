"""The device lock: one evaluation at a time runs and times kernels on a device; compiling may overlap.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator

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
