"""A local Ray cluster on 127.0.0.1 for the Ray evaluator's tests and benchmarks/bench_scaleout.py.

Everything binds 127.0.0.1: the node's IP is given (``--node-ip-address``) and Ray's own address lookup
is kept on loopback (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, which makes Ray take the loopback address
as the node's); every port is a free one, and the cluster's processes are found and stopped by its own
temp folder, so two test workers can each run one (``ray stop`` would stop every cluster here).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kope.db.ports import free_port

RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def ray_command() -> str | None:
    """The ``ray`` command next to this Python (installed by the test extra), or None."""
    return shutil.which("ray", path=str(Path(sys.executable).parent))


def start_cluster(cpus: int) -> tuple[str, str]:
    """A one-node cluster with ``cpus`` CPUs: (its GCS address HOST:PORT, its temp folder for ``stop_cluster``).
    RuntimeError, with Ray's output, when it does not start."""
    ray = ray_command()
    if ray is None:
        raise RuntimeError("the `ray` command is not installed next to this Python (pip install 'kope[ray]')")
    temp_dir = tempfile.mkdtemp(prefix="kray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = free_port()
    command = [
        ray, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
        "--num-cpus", str(cpus), "--num-gpus", "0", "--include-dashboard", "false", "--disable-usage-stats",
        "--temp-dir", temp_dir, "--object-store-memory", str(100 << 20),
        "--ray-client-server-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port()),
        "--dashboard-agent-grpc-port", str(free_port()), "--metrics-export-port", str(free_port()),
        "--runtime-env-agent-port", str(free_port()), "--min-worker-port", "0", "--max-worker-port", "0",
    ]  # fmt: skip
    started = subprocess.run(command, env={**os.environ, **RAY_ENV}, capture_output=True, text=True, timeout=300)
    if started.returncode != 0:
        stop_cluster(temp_dir)
        raise RuntimeError(f"ray start failed: {started.stdout[-3000:]}{started.stderr[-3000:]}")
    return f"127.0.0.1:{port}", temp_dir


def cluster_processes(temp_dir: str) -> list[int]:
    """The processes of the cluster whose temp folder is ``temp_dir``: by command line, or (Ray's workers
    rename themselves, ``ray::IDLE``) by an open file in it (each writes its logs there)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()] if temp_dir not in cmdline else []
        except OSError:
            continue
        if temp_dir in cmdline or any(link.startswith(temp_dir) for link in links):
            found.append(int(entry.name))
    return found


def stop_cluster(temp_dir: str) -> None:
    """Stop that cluster, and nothing else on the machine, and remove its temp folder."""
    for _ in range(3):
        pids = cluster_processes(temp_dir)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)
    shutil.rmtree(temp_dir, ignore_errors=True)
