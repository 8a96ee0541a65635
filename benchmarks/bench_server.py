"""Benchmark of the memory server: retrieve and record through `kope serve` vs direct Bolt, same run.

    PYTHONPATH=. python benchmarks/bench_server.py                      # dedicated temporary Neo4j
    PYTHONPATH=. python benchmarks/bench_server.py --attempts 3000 --seconds 60 --clients 8
    KOPE_NEO4J_URI=... KOPE_NEO4J_PASSWORD=... python benchmarks/bench_server.py --use-configured-server

One namespace is seeded with the synthetic history of ``bench_memory.py`` (default 3,000
attempts). A real ``kope serve`` process (uvicorn, a free 127.0.0.1 port) serves it to a team
key. Then, interleaving the two paths call by call so that both see the same graph and the
same machine load:

* retrieve k=8 (known operators, random hardware, layer and error kind): ``ExperienceGraph``
  over Bolt vs ``RemoteMemory`` over HTTP, p50/p95 and the ratio server / direct;
* record one attempt (journal with fsync + the graph transaction, both paths journal
  locally): p50/p95 and the ratio;
* throughput: ``--clients`` processes of 2 teams (``kope.server.loadgen``, one key each)
  record batches of ``--batch`` attempts for ``--seconds`` seconds; attempts/s acknowledged,
  and a check that every acknowledged attempt is stored once with d(v) equal to a
  recomputation from scratch.

Goals (issue 12): server p95 <= 1.5x direct; >= 500 attempts/s with 8 clients. Timings on a
shared machine are noisy: run it alone (`kope-cpu --exclusive`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory import STEPS, History, pct, queries, seed_to  # after the sys.path entry that finds it

from kope.config import load_config
from kope.db.client import GraphClient
from kope.db.local import LocalNeo4j
from kope.db.ports import free_port
from kope.memory import ExperienceGraph, Journal, synthetic
from kope.memory.remote import RemoteMemory
from kope.memory.scoring import recompute_all
from kope.server.auth import issue_key
from kope.server.registry import Registry

NS = "bench-server"
TEAM = "bench"


def start_server(workdir: Path, config, registry: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ)
    env.update(
        KOPE_DATA_DIR=str(workdir / "server"),
        KOPE_NEO4J_URI=config.neo4j_uri,
        KOPE_NEO4J_USER=config.neo4j.user,
        KOPE_NEO4J_PASSWORD=config.neo4j_password() or "",
        KOPE_NEO4J_DATABASE=config.neo4j.database,
    )
    kope = Path(sys.executable).with_name("kope")
    log = open(workdir / "server.log", "wb")  # the server process writes it until it is stopped
    proc = subprocess.Popen(
        [str(kope), "serve", "--port", str(port), "--registry", str(registry), "--rate-limit", "10000000/minute"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"kope serve exited: {(workdir / 'server.log').read_text()}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("kope serve did not come up")


def latencies(direct: ExperienceGraph, remote: RemoteMemory, history: History, n: int) -> dict[str, list[float]]:
    rng = random.Random(11)
    out: dict[str, list[float]] = {
        "retrieve_direct": [],
        "retrieve_server": [],
        "record_direct": [],
        "record_server": [],
    }
    for q in queries(history, rng, True, 20):  # warm-up: plans, connections, caches
        direct.retrieve(q, k=8)
        remote.retrieve(q, k=8)
    for i, q in enumerate(queries(history, rng, True, n)):
        pair = [("direct", direct), ("server", remote)]
        if i % 2:
            pair.reverse()  # alternate who goes first
        for name, memory in pair:
            began = time.perf_counter()
            found = memory.retrieve(q, k=8)
            out[f"retrieve_{name}"].append((time.perf_counter() - began) * 1000)
            assert found.lineages, "retrieval found nothing"
    # record: each path its own fresh runs, attempts starting from existing decisions
    specs, attempts = history.next_runs(2 * max(1, n // STEPS + 1))
    half = len(specs) // 2
    direct.start_runs(specs[:half])
    remote.start_runs(specs[half:])
    mine = {"direct": [a for a in attempts if a.run_id in {s.run_id for s in specs[:half]}][:n]}
    mine["server"] = [a for a in attempts if a.run_id in {s.run_id for s in specs[half:]}][:n]
    for i in range(n):
        pair = [("direct", direct), ("server", remote)]
        if i % 2:
            pair.reverse()
        for name, memory in pair:
            began = time.perf_counter()
            result = memory.record_attempt(mine[name][i])
            out[f"record_{name}"].append((time.perf_counter() - began) * 1000)
            assert result.in_graph and result.created
    return out


def throughput(url: str, registry: Registry, workdir: Path, clients: int, seconds: float, batch: int) -> dict:
    teams = ("load-a", "load-b")
    seeds = {}
    for team in teams:
        with RemoteMemory(url, issue_key(registry, team, "read,write")[1]) as memory:
            memory.start_run(synthetic.run_spec("softmax", run_id=f"seed-{team}"))
            memory.record_attempts([synthetic.attempt(f"seed-{team}", 0, "softmax")])
        seeds[team] = [f"seed-{team}:s0"]
    procs = []
    for i in range(clients):
        team = teams[i % 2]
        settings = {
            "url": url,
            "token": issue_key(registry, team, "read,write")[1],
            "run_id": f"load-{i}",
            "operator": "softmax",
            "seeds": seeds[team],
            "duration": seconds,
            "batch": batch,
            "seed": i,
            "journal": str(workdir / f"journal-{i}"),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "kope.server.loadgen", json.dumps(settings)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    acknowledged: dict[str, set[str]] = {t: set() for t in teams}
    elapsed, batch_ms = [], []
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=seconds + 600)
        if proc.returncode != 0:
            raise SystemExit(f"load client {i} failed: {err[-2000:]}")
        lines = [json.loads(line) for line in out.splitlines()]
        elapsed.append(lines[-1]["elapsed"])
        for line in lines[:-1]:
            acknowledged[teams[i % 2]].update(line["acknowledged"])
            batch_ms.append(line["seconds"] * 1000)
    total = sum(len(v) for v in acknowledged.values())
    return {
        "acknowledged": acknowledged,
        "total": total,
        "rate": total / max(elapsed),
        "batch_p50": pct(batch_ms, 0.5),
        "batch_p95": pct(batch_ms, 0.95),
    }


def check_load(client: GraphClient, acknowledged: dict[str, set[str]]) -> tuple[bool, float]:
    exact, worst = True, 0.0
    for team, ids in acknowledged.items():
        rows = client._driver.execute_query(
            "MATCH (d:Decision {ns: $ns}) RETURN d.id AS id, d.r AS r, d.parent_id AS parent, d.d AS d, "
            "d.team AS team, count(*) AS n",
            {"ns": team},
        ).records
        stored = {r["id"]: r for r in rows}
        exact = exact and all(r["n"] == 1 and r["team"] == team for r in rows) and ids <= set(stored)
        reference = recompute_all({i: (r["r"], r["parent"]) for i, r in stored.items()})
        worst = max([worst] + [abs(r["d"] - reference[i]) for i, r in stored.items()])
    return exact, worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=3000, help="history seeded before measuring")
    parser.add_argument("--samples", type=int, default=200, help="retrieve and record samples per path")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=60.0, help="duration of the throughput phase")
    parser.add_argument("--batch", type=int, default=25, help="attempts per request in the throughput phase")
    parser.add_argument("--use-configured-server", action="store_true")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--pagecache", default="1g")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    workdir = Path(tempfile.mkdtemp(prefix="kope-bench-server-"))
    neo4j = serve = None
    try:
        if args.use_configured_server:
            config = load_config({"data_dir": str(workdir)})
        else:
            environ = {k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J_")}
            config = load_config(
                {
                    "data_dir": str(workdir),
                    "server.bolt_port": free_port(),
                    "server.http_port": free_port(),
                    "server.heap": args.heap,
                    "server.pagecache": args.pagecache,
                },
                environ=environ,
            )
            neo4j = LocalNeo4j(config, progress=lambda m: print(f"[neo4j] {m}", file=sys.stderr))
            neo4j.start()
        client = GraphClient.from_config(config)
        direct = ExperienceGraph(client, namespace=NS, team=TEAM, journal=Journal(workdir / "direct", NS))
        direct.init_schema()
        history = History()
        recorded, spent = seed_to(direct, history, args.attempts, 0)
        registry = Registry(workdir / "registry.sqlite3")
        token = issue_key(registry, TEAM, "read,write,admin")[1]
        registry.create_namespace(NS, TEAM)
        serve, url = start_server(workdir, config, registry.path)
        remote = RemoteMemory(url, token, namespace=NS, journal_root=workdir / "remote")
        print(
            f"namespace {NS}: {recorded} attempts seeded ({recorded / spent:.0f}/s direct); server {url}, "
            f"Neo4j {config.neo4j_uri}; {os.cpu_count()} CPUs; {args.samples} samples per path"
        )
        lat = latencies(direct, remote, history, args.samples)
        print(f"{'operation':<22} | {'direct p50/p95 ms':>18} | {'server p50/p95 ms':>18} | server/direct p95")
        for op in ("retrieve", "record"):
            d, s = lat[f"{op}_direct"], lat[f"{op}_server"]
            ratio = pct(s, 0.95) / pct(d, 0.95)
            verdict = "goal met" if ratio <= 1.5 else "goal (<= 1.5x) missed"
            print(
                f"{op + (' k=8' if op == 'retrieve' else ' one attempt'):<22} | "
                f"{pct(d, 0.5):>7.1f} / {pct(d, 0.95):>7.1f}  | {pct(s, 0.5):>7.1f} / {pct(s, 0.95):>7.1f}  | "
                f"{ratio:.2f}x ({verdict})",
                flush=True,
            )
        remote.close()
        load = throughput(url, registry, workdir, args.clients, args.seconds, args.batch)
        exact, worst = check_load(client, load["acknowledged"])
        verdict = "goal met" if load["rate"] >= 500 else "goal (>= 500/s) missed"
        print(
            f"throughput: {args.clients} clients of 2 teams, batches of {args.batch}, {args.seconds:.0f} s: "
            f"{load['total']} attempts, {load['rate']:.0f} attempts/s ({verdict}); request p50/p95 "
            f"{load['batch_p50']:.0f} / {load['batch_p95']:.0f} ms; stored exactly once in its team's namespace: "
            f"{'yes' if exact else 'NO'}; max |d(v) - recomputed| = {worst:.1e}"
        )
        client.close()
    finally:
        if serve is not None:
            serve.send_signal(signal.SIGTERM)
            try:
                serve.wait(timeout=30)
            except subprocess.TimeoutExpired:
                serve.kill()
        if neo4j is not None:
            neo4j.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
