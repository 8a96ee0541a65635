"""The Ray evaluator against a real local Ray cluster (`ray start --head`, two worker processes' worth of CPUs).

Everything binds 127.0.0.1: the node's IP is given (`--node-ip-address`) and Ray's own address lookup is
kept on loopback (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, which makes Ray take the loopback address as the
node's); the cluster's processes are found and stopped by their own temp folder, so two test workers can
each run one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kope.db.ports import free_port
from tests.e2e.test_bench_cli import one_error_line, write_suite

ROOT = Path(__file__).resolve().parents[1]
RELU = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def _ray_bin() -> str:
    found = shutil.which("ray", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("the `ray` command is not installed next to this Python (the test extra installs ray[client])")
    return found


def _cluster_processes(temp_dir: str) -> list[int]:
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


def _stop(temp_dir: str) -> None:
    """Stop that cluster, and nothing else on the machine (``ray stop`` would stop every cluster here)."""
    for _ in range(3):
        pids = _cluster_processes(temp_dir)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node cluster with 2 CPUs on 127.0.0.1; yields its GCS address (HOST:PORT)."""
    temp_dir = tempfile.mkdtemp(prefix="kray-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    port = free_port()
    env = {**os.environ, **RAY_ENV}
    command = [
        _ray_bin(), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
        "--num-cpus", "2", "--num-gpus", "0", "--include-dashboard", "false", "--disable-usage-stats",
        "--temp-dir", temp_dir, "--object-store-memory", str(100 << 20),
        "--ray-client-server-port", str(free_port()), "--dashboard-agent-listen-port", str(free_port()),
        "--dashboard-agent-grpc-port", str(free_port()), "--metrics-export-port", str(free_port()),
        "--runtime-env-agent-port", str(free_port()), "--min-worker-port", "0", "--max-worker-port", "0",
    ]  # fmt: skip
    started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    try:
        assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
        yield f"127.0.0.1:{port}"
    finally:
        _stop(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def ray_env(neo4j_server, tmp_path, address, **extra):
    return neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), RAY_ADDRESS=address, **RAY_ENV, **extra)


def differences(a, b, where="results"):
    """Where two JSON values differ in structure: the keys of every object, the kinds of values, the shape
    of list elements; not the numbers (timings differ run to run), and null matches anything (a value
    that was not measured). Lists of different lengths differ only where their lengths are part of the
    bench's structure (pairs, attempts), which the test checks itself."""
    if a is None or b is None:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a if k not in LOOSE for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        return [d for x in a[:1] for y in b[:1] for d in differences(x, y, f"{where}[0]")]
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return [] if type(a) is type(b) else [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
    return [] if isinstance(a, (int, float)) and isinstance(b, (int, float)) else [f"{where}: {a!r} vs {b!r}"]


LOOSE = {"overlapped_with"}  # which pairs happened to run at the same time


def comparable(pair):
    """What must agree between a local and a Ray pair: the attempts' statuses and case results."""
    return [
        (a.get("status"), a.get("error_kind"), a.get("cases_passed"), a.get("cases_total")) for a in pair["attempts"]
    ]


def test_a_three_operator_bench_over_ray_matches_a_local_bench(kope_cli, neo4j_server, tmp_path, ray_cluster):
    suite = write_suite(tmp_path / "suite", [("relu_a", 1), ("relu_b", 1), ("relu_c", 2)])
    common = ["bench", "--suite", str(suite), "--proposer", "offline", "--steps", "1", "--configs",
              "active,no-memory", "--cases", "0", "--no-final", "--json"]  # fmt: skip
    results = {}
    for evaluator in ("local", "ray"):
        out = tmp_path / evaluator
        proc = kope_cli(  # two pair processes: over Ray, their evaluations spread over the cluster's two CPUs
            *common, "--workers", "2", "--evaluator", evaluator, "--out", str(out),
            env=ray_env(neo4j_server, tmp_path, ray_cluster, KOPE_EVALUATOR_RAY_CPUS="1"), timeout=1500,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]
        results[evaluator] = json.loads((out / "results.json").read_text())
    local, ray = results["local"], results["ray"]
    assert ray["complete"] and local["complete"]
    assert ray["options"]["evaluator"] == "ray" and local["options"]["evaluator"] == "local"
    # structurally identical: the same keys everywhere, the same pairs, the same attempts per pair
    assert differences(ray, local) == []
    by_pair = {name: {(p["config"], p["operator"]): p for p in r["pairs"]} for name, r in results.items()}
    assert (
        set(by_pair["ray"])
        == set(by_pair["local"])
        == {(c, o) for c in ("active", "no-memory") for o in ("relu_a", "relu_b", "relu_c")}
    )
    for key, pair in by_pair["ray"].items():
        assert comparable(pair) == comparable(by_pair["local"][key]), key
        assert len(pair["attempts"]) == 1
    # evaluated on this machine's hardware, through the cluster
    assert ray["hardware"]["id"] == local["hardware"]["id"]


def test_the_harness_checks_run_on_the_node_and_cheats_are_caught_there(ray_cluster, monkeypatch):
    from kope.boundary import eval_options
    from kope.config import load_config
    from kope.evaluators import make_evaluator

    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster)
    monkeypatch.setenv("KOPE_SECRET_TOKEN", "must-not-reach-the-outcome")
    evaluator = make_evaluator(load_config(), "ray")
    try:
        assert evaluator.cpus == 2  # the smallest (only) node's CPUs: a timed evaluation has it to itself
        options = eval_options(target="cpu", timing=False)
        expect = {
            ROOT / "fixtures" / "sandbox" / "relu_honest.py": "correct",
            ROOT / "adversarial" / "alias_input.py": "cheat_detected:output_aliases_input",
            ROOT / "adversarial" / "background_spinner.py": "cheat_detected:forbidden_api",
        }
        for candidate, kind in expect.items():
            outcome = evaluator.evaluate(RELU, candidate, options)
            assert (outcome.error_kind or outcome.status.value) == kind, (candidate.name, outcome.error_excerpt)
            assert "must-not-reach-the-outcome" not in json.dumps(outcome.to_dict())
    finally:
        evaluator.close()


def test_no_cluster_at_the_address_is_one_error_line(kope_cli, neo4j_server, tmp_path):
    closed = free_port()  # nothing listens there
    proc = kope_cli(
        "optimize", "relu", "--steps", "1", "--evaluator", "ray",
        env=neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), RAY_ADDRESS=f"127.0.0.1:{closed}", **RAY_ENV),
        timeout=300,
    )  # fmt: skip
    ok, errors = one_error_line(proc)
    assert ok, proc.stderr[-3000:]
    assert "no Ray cluster answers at 127.0.0.1:" in errors[0]
