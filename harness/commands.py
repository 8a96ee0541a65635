"""Process helpers every harness layer may use: the harness's cache folder, a command run with a
timeout that kills its whole process group, and a command wrapped in the compile sandbox.

A leaf of the harness: it imports only ``harness.sandbox`` (itself a leaf), never a module above it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from harness import settings
from harness.sandbox import clean_env, hidden_paths, launcher

_CACHE_ROOT: Path | None = None  # set in a worker (which sees no KOPE_* variables)


def set_cache_root(path: str | Path) -> None:
    global _CACHE_ROOT
    _CACHE_ROOT = Path(path)


def cache_root() -> Path:
    return _CACHE_ROOT if _CACHE_ROOT is not None else settings.cache_dir()


def default_compile_timeout() -> float:
    return settings.compile_timeout_s()


def run_with_timeout(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group; on timeout kill the whole group (the compiler's children too)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return None, ""


def sandboxed_command(cmd: list[str], writable: list[str]) -> tuple[list[str], dict[str, str]]:
    """``cmd`` wrapped in the compile sandbox, and its env: namespaces, read-only tree except ``writable`` (also its
    ``TMPDIR``), the reference cache and the signing key hidden, then no capabilities, Landlock and seccomp
    (``harness.sandbox.exec_main``)."""
    root = str(Path(__file__).resolve().parent.parent)
    wrapper = [sys.executable, "-S", "-m", "harness.sandbox", "exec"]
    for w in writable:
        wrapper += ["--writable", w]
    keys = cache_root() / "keys"  # the cache's signing key (harness.cpu.library_key): made now, so it is hidden
    keys.mkdir(parents=True, exist_ok=True, mode=0o700)
    for h in hidden_paths([cache_root() / "refs", keys]):
        wrapper += ["--hide", h]
    return [*launcher(), *wrapper, "--", *cmd], clean_env({"PYTHONPATH": root})


def secret_file(path: Path) -> bytes:
    """A 32-byte random secret kept at ``path`` (mode 0600, in a folder the sandboxes hide), created on first use.

    Written to a temporary file and linked into place, so the first writer wins and every process reads the
    same secret, even when several create it at once."""
    try:
        data = path.read_bytes()
        if len(data) == 32:
            return data
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, os.urandom(32))
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)
    except FileExistsError:
        if len(path.read_bytes()) != 32:  # a damaged secret is replaced, not used
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_bytes()
