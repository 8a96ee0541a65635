"""The harness's settings: every ``KOPE_HARNESS_*`` environment variable, its default and how it is read.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.errors import TaskFormatError

CACHE = "KOPE_HARNESS_CACHE"  # the compile cache, reference cache and loaded tasks (default ~/.cache/kope/harness)
COMPILE_TIMEOUT = "KOPE_HARNESS_COMPILE_TIMEOUT"  # seconds per C++/extension build (default 120)
SANDBOX = "KOPE_HARNESS_SANDBOX"  # "off" (or 0/false/no): run candidates and task code without the sandbox
ZYGOTE = "KOPE_HARNESS_ZYGOTE"  # "off": every sandboxed worker boots an interpreter and torch of its own
POOL = "KOPE_HARNESS_POOL"  # warm workers kept per configuration (default one per two CPUs, 1 to 4)
REF_CACHE_MB = "KOPE_HARNESS_REF_CACHE_MB"  # the reference cache's size cap in MiB (default 2048)
REMOTE_FETCH = "KOPE_HARNESS_REMOTE_FETCH"  # "off": timed outputs come back through pipes, not process_vm_readv
INPUT_RING = "KOPE_HARNESS_INPUT_RING"  # "off": every timed call's inputs from get_inputs, not from a ring of sets
ROOFLINE_CACHE = "KOPE_HARNESS_ROOFLINE_CACHE"  # where measured peaks and costs are kept
PEAKS = "KOPE_HARNESS_PEAKS"  # a peaks file that pins the roofline's peaks (e.g. datasheet values)
TASK_TIMEOUT = "KOPE_HARNESS_TASK_TIMEOUT"  # seconds to load a task file in its worker (default 60)
DEVICE_LOCK = "KOPE_HARNESS_DEVICE_LOCK"  # a lock file the evaluation worker service sets per device

ALL = (
    CACHE,
    COMPILE_TIMEOUT,
    SANDBOX,
    ZYGOTE,
    POOL,
    REF_CACHE_MB,
    REMOTE_FETCH,
    INPUT_RING,
    ROOFLINE_CACHE,
    PEAKS,
    TASK_TIMEOUT,
    DEVICE_LOCK,
)

COMPILE_TIMEOUT_S = 120.0
TASK_TIMEOUT_S = 60.0
REF_CACHE_DEFAULT_MB = 2048
_OFF = ("off", "0", "false", "no")


def _get(name: str) -> str:
    return os.environ.get(name, "").strip()


def _user_cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache"))


def cache_dir() -> Path:
    """The harness cache: ``KOPE_HARNESS_CACHE``, else ``$XDG_CACHE_HOME/kope/harness`` (``~/.cache``)."""
    value = _get(CACHE)
    return Path(value) if value else _user_cache_home() / "kope" / "harness"


def compile_timeout_s() -> float:
    value = _get(COMPILE_TIMEOUT)
    try:
        return float(value) if value else COMPILE_TIMEOUT_S
    except ValueError:
        return COMPILE_TIMEOUT_S


def sandbox_opted_out() -> bool:
    """True when the user switched the sandbox off (``KOPE_HARNESS_SANDBOX=off``)."""
    return _get(SANDBOX).lower() in _OFF


def zygote_enabled() -> bool:
    return _get(ZYGOTE).lower() not in _OFF


def pool_size() -> int | None:
    """``KOPE_HARNESS_POOL`` when set to a whole number; None: the pool sizes itself from the CPU count."""
    value = _get(POOL)
    return int(value) if value.isdigit() else None


def ref_cache_bytes() -> int:
    value = _get(REF_CACHE_MB)
    return (int(value) if value.isdigit() else REF_CACHE_DEFAULT_MB) << 20


def remote_fetch() -> bool:
    return _get(REMOTE_FETCH).lower() != "off"


def input_ring() -> bool:
    return _get(INPUT_RING).lower() != "off"


def roofline_cache_dir() -> Path:
    """Where peaks and costs are kept: ``KOPE_HARNESS_ROOFLINE_CACHE``, else beside the harness compile cache."""
    value = _get(ROOFLINE_CACHE)
    return Path(value) if value else _user_cache_home() / "kope" / "roofline"


def pinned_peaks() -> str | None:
    return _get(PEAKS) or None


def task_timeout_s() -> float:
    """Seconds to load a task file (``KOPE_HARNESS_TASK_TIMEOUT``); a bad value is a ``TaskFormatError``."""
    raw = _get(TASK_TIMEOUT)
    if not raw:
        return TASK_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        raise TaskFormatError(f"{TASK_TIMEOUT}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise TaskFormatError(f"{TASK_TIMEOUT}={raw!r} must be a positive number of seconds")
    return value


def device_lock_path() -> str | None:
    return _get(DEVICE_LOCK) or None
