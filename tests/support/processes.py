"""Processes seen from /proc: a process's descendants, and whether a pid still runs; a fresh interpreter's answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def python_line(source: str) -> str:
    """The last line ``python -c source`` prints, run in a fresh interpreter in the repository (which must exit 0)."""
    proc = subprocess.run(
        [sys.executable, "-c", source],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1]


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (children, their children, ...), read from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat[stat.rfind(")") + 2 :].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def zygote_processes() -> set[int]:
    """The process ids of every live zygote (its ``unshare`` and the zygote itself; not the workers it forked)."""
    from harness import zygote_client

    with zygote_client._ZYGOTES_LOCK:
        zygotes = [z for z in zygote_client._ZYGOTES.values() if z.alive()]
    pids = set()
    for zygote in zygotes:
        pids.add(zygote.proc.pid)
        try:
            pids.update(
                int(p) for p in Path(f"/proc/{zygote.proc.pid}/task/{zygote.proc.pid}/children").read_text().split()
            )
        except OSError:
            pass
    return pids
