"""The device lock: one evaluation at a time runs and times kernels on a device; compiling may overlap.

An evaluation holds it from its first correctness trial to the end of its timing, so the
candidate's kernels never share the device with another evaluation's timed repetitions,
while loading and compiling the next candidate (the import that builds its extension)
goes on beside them. The worker service (``python -m harness serve``) gives each of its
devices one lock file and sets ``KOPE_HARNESS_DEVICE_LOCK`` to it in the processes that
evaluate on that device; where the variable is unset (a local evaluation) it does nothing.
It is an ``flock``, so it is released when its holder exits, however it exits.
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
