"""Scale-out benchmark: the overhead of remote evaluation, and bench pairs per hour with 1 and 2 workers.

    PYTHONPATH=. python benchmarks/bench_scaleout.py                 # everything, a temporary Neo4j and cluster
    PYTHONPATH=. python benchmarks/bench_scaleout.py --skip-pairs    # the per-evaluation overhead only

1. **Overhead of one evaluation**: the same candidate (the honest relu of the tests, correctness and
   timing on, 2 cases) evaluated through each evaluator, the evaluators interleaved round by round so
   that all see the same machine load: ``local`` (``harness.evaluate`` in this process's workers), an
   HTTP evaluation worker (a ``python -m harness serve`` process on a free 127.0.0.1 port) and, when
   Ray is installed, a Ray cluster started here (``ray start --head`` on 127.0.0.1). Medians and the
   ratios remote / local.
2. **Pairs per hour**: ``kope bench`` over a small suite (3 relu-like operators, 2 configurations,
   2 steps, case 0, offline proposer, no final evaluation) with ``--workers 1`` and ``--workers 2``,
   local evaluator, each against a temporary Neo4j; wall time and pairs/hour.

On a 2-core machine a second worker mostly shares the same two cores with the first, so 2 workers
are not expected to double the rate here; the figure says what a second process buys on this
machine. Run it alone (nothing else loading the machine): timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kope.config import load_config  # after the sys.path entry that finds it
from kope.db.local import LocalNeo4j
from kope.db.ports import free_port
from tests.support.ray_cluster import RAY_ENV, ray_command, start_cluster, stop_cluster

TASK = ROOT / "tests" / "fixtures" / "tasks" / "tiny_relu.py"
CANDIDATE = ROOT / "tests" / "fixtures" / "sandbox" / "relu_honest.py"


def start_http_worker(workdir: Path, key: str) -> tuple[subprocess.Popen[bytes], str]:
    port_file = workdir / "worker.port"
    env = {**os.environ, "KOPE_WORKER_KEY": key}
    command = [sys.executable, "-m", "harness", "serve", "--port", "0", "--devices", "none",
               "--cache-dir", str(workdir / "worker-cache"), "--port-file", str(port_file)]  # fmt: skip
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the evaluation worker did not start: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.2)
    return proc, f"http://127.0.0.1:{port_file.read_text().strip()}"


def start_ray() -> tuple[str, str] | None:
    """A local cluster with this machine's CPUs (tests/support/ray_cluster.py), or None without Ray."""
    if ray_command() is None:
        print("Ray is not installed (pip install 'kope[ray]'): the Ray evaluator is not measured")
        return None
    try:
        return start_cluster(cpus=os.cpu_count() or 1)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from None


def overhead(rounds: int, workdir: Path) -> None:
    from kope.boundary import eval_options
    from kope.evaluators import make_evaluator

    key = "bench-scaleout-" + os.urandom(12).hex()
    worker, url = start_http_worker(workdir, key)
    ray = start_ray()
    evaluators = {}
    try:
        os.environ["KOPE_WORKER_KEY"] = key
        config = load_config()
        evaluators["local"] = make_evaluator(config, "local")
        evaluators["http worker"] = make_evaluator(config, url)
        if ray is not None:
            os.environ.update(RAY_ENV)
            os.environ["RAY_ADDRESS"] = ray[0]
            evaluators["ray"] = make_evaluator(config, "ray")
        options = eval_options(target="cpu", timing=True)
        walls: dict[str, list[float]] = {name: [] for name in evaluators}
        for name, evaluator in evaluators.items():  # a first evaluation each: boots, compiles, caches
            outcome = evaluator.evaluate(TASK, CANDIDATE, options)
            assert outcome.status.value == "correct", (name, outcome.error_excerpt)
        for _ in range(rounds):
            for name, evaluator in evaluators.items():
                began = time.perf_counter()
                outcome = evaluator.evaluate(TASK, CANDIDATE, options)
                walls[name].append(time.perf_counter() - began)
                assert outcome.status.value == "correct", (name, outcome.error_excerpt)
        base = statistics.median(walls["local"])
        print(f"\none evaluation (tiny_relu, 2 cases, timed), {rounds} rounds interleaved, after one warm-up each")
        print(f"{'evaluator':<12} | {'median s':>8} | {'min s':>6} | {'max s':>6} | vs local")
        for name, values in walls.items():
            med = statistics.median(values)
            print(f"{name:<12} | {med:>8.2f} | {min(values):>6.2f} | {max(values):>6.2f} | {med / base:.2f}x")
    finally:
        for evaluator in evaluators.values():
            evaluator.close()
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
        if ray is not None:
            stop_cluster(ray[1])


def pairs_per_hour(workdir: Path) -> None:
    from tests.e2e.test_bench_cli import write_suite

    suite = write_suite(workdir / "suite", [("relu_a", 1), ("relu_b", 1), ("relu_c", 2)])
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J_")}
    config = load_config(
        {"data_dir": str(workdir / "data"), "server.bolt_port": free_port(), "server.http_port": free_port()},
        environ=environ,
    )
    neo4j = LocalNeo4j(config, progress=lambda m: print(f"[neo4j] {m}", file=sys.stderr))
    neo4j.start()
    try:
        env = {**environ, "KOPE_DATA_DIR": str(workdir / "data"), "KOPE_NEO4J_URI": config.neo4j_uri,
               "KOPE_NEO4J_PASSWORD": config.neo4j_password() or ""}  # fmt: skip
        kope = str(Path(sys.executable).parent / "kope")
        print("\nkope bench: 3 operators x 2 configurations, 2 steps, case 0, offline proposer, --no-final")
        print(f"{'workers':>7} | {'pairs':>5} | {'wall s':>7} | pairs/hour")
        for workers in (1, 2):
            out = workdir / f"bench-{workers}"
            command = [kope, "bench", "--suite", str(suite), "--proposer", "offline", "--steps", "2", "--configs",
                       "active,no-memory", "--cases", "0", "--no-final", "--workers", str(workers), "--out", str(out)]  # fmt: skip
            began = time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=3600)
            wall = time.perf_counter() - began
            if done.returncode != 0:
                raise SystemExit(f"kope bench --workers {workers} failed: {done.stderr[-2000:]}")
            pairs = len(json.loads((out / "results.json").read_text())["pairs"])
            print(f"{workers:>7} | {pairs:>5} | {wall:>7.1f} | {pairs * 3600 / wall:.0f}")
    finally:
        neo4j.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="evaluations per evaluator after the warm-up")
    parser.add_argument("--skip-pairs", action="store_true", help="measure the per-evaluation overhead only")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="kope-bench-scaleout-"))
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at the start")
    try:
        overhead(args.rounds, workdir)
        if not args.skip_pairs:
            pairs_per_hour(workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
