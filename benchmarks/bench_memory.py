"""Benchmark of the Experience Graph memory at 1k, 10k and 100k attempts.

    PYTHONPATH=. python benchmarks/bench_memory.py                 # dedicated temporary Neo4j server
    PYTHONPATH=. python benchmarks/bench_memory.py --sizes 1000,10000
    KOPE_NEO4J_URI=... KOPE_NEO4J_PASSWORD=... python benchmarks/bench_memory.py --use-configured-server

Seeds a deterministic synthetic history (operators of 7 families, 6 machines in
3 hardware classes, 30-step runs with branches, backtracks, failures, runs
that start from an earlier run's best decision, 3 USED edges per attempt,
~1.5 KB kernels) cumulatively to each size and prints, per size:

* batched ingest rate: attempts/s of ``record_attempts`` (write-ahead log with
  fsync + Markdown journal + graph, 1000 attempts per transaction);
* single-attempt record latency p50/p95 (``record_attempt``: journal + one transaction);
* retrieval latency p50/p95 (``retrieve(query, k=8)``: pool, lineages, rules),
  for an operator with history and for a new operator of a known family, after
  a warm-up of 40 queries (right after a bulk ingest Neo4j replans each
  statement once because its statistics changed: a few hundred ms, once);
* the same ranking done naively in Python over the full history (fetch every
  decision, sort in Python) and the ratio naive / graph, with a check that both
  return the same decisions;
* a from-scratch recomputation of d(v) over the whole history against the stored values.

Everything runs in its own namespace (and, by default, its own server in a
temporary directory), which is deleted at the end. Timings on a shared machine
are noisy; the numbers are indicative.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kope.config import load_config
from kope.db.client import GraphClient
from kope.db.local import LocalNeo4j
from kope.db.ports import free_port
from kope.memory import ExperienceGraph, Journal, RetrievalQuery, UsedItem, synthetic
from kope.memory.ranking import rank_naively
from kope.memory.scoring import recompute_all

FAMILIES = {
    "elementwise": ["relu", "gelu", "silu", "add", "mul", "sigmoid"],
    "reduction": ["sum_dim", "max_dim", "argmax", "mean_dim", "cumsum"],
    "normalization": ["softmax", "layernorm", "rmsnorm", "batchnorm", "log_softmax"],
    "matmul": ["gemm", "bmm", "gemv", "matmul_t"],
    "convolution": ["conv2d", "conv1d", "depthwise_conv"],
    "fused": ["gemm_relu", "conv_bn_relu", "add_layernorm"],
    "block": ["mlp_block", "attention_block"],
}
OPERATORS = [(op, fam) for fam, ops in FAMILIES.items() for op in ops]
MACHINES = [
    synthetic.hardware("cpu-intel-a", "x86_64-avx512", "intel"),
    synthetic.hardware("cpu-intel-b", "x86_64-avx512", "intel"),
    synthetic.hardware("cpu-intel-c", "x86_64-avx2", "intel"),
    synthetic.hardware("cpu-amd-a", "x86_64-avx2", "amd"),
    synthetic.hardware("arm-a", "aarch64-neon", "arm"),
    synthetic.hardware("arm-b", "aarch64-neon", "arm"),
]
LAYERS = ["parallelization", "tiling", "vectorization", "memory_layout", "fusion", "algorithm", "instruction"]
STATUSES = ["correct"] * 13 + ["compile_error"] * 3 + ["incorrect"] * 2 + ["runtime_error", "timeout"]
STEPS = 30
KERNEL_BODY = "".join(f"    acc{i} = _mm256_fmadd_ps(a{i}, b{i}, acc{i});  // lane {i}\n" for i in range(24))


class History:
    """Deterministic generator of runs and attempts (parents always recorded before children)."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.runs = 0
        self.best: dict[str, list[str]] = {}  # operator -> good decision ids of finished runs
        self.recent: dict[str, list[str]] = {}  # operator -> decision ids usable as evidence

    def next_runs(self, count: int):
        specs, attempts = [], []
        for _ in range(count):
            op, family = OPERATORS[self.rng.randrange(len(OPERATORS))]
            hw = MACHINES[self.rng.randrange(len(MACHINES))]
            run_id = f"b{self.runs:06d}"
            self.runs += 1
            specs.append(synthetic.run_spec(op, run_id=run_id, family=family, hw=hw, started_at=1.7e9 + self.runs))
            start = None
            if self.best.get(op) and self.rng.random() < 0.2:
                start = self.rng.choice(self.best[op][-20:])
            speed = {0: 1.0}
            incumbent = 0
            evidence = self.recent.get(op, [])[-50:]
            for step in range(STEPS):
                if step == 0:
                    parent = start
                elif self.rng.random() < 0.25:
                    parent = f"{run_id}:s{self.rng.randrange(step)}"
                else:
                    parent = f"{run_id}:s{incumbent}"
                status = self.rng.choice(STATUSES)
                base = speed.get(int(parent.rsplit(":s", 1)[1]), 1.0) if parent and parent.startswith(run_id) else 1.0
                new_speed = round(max(0.2, base * self.rng.uniform(0.8, 1.3)), 4)
                layer = self.rng.choice(LAYERS)
                used = tuple(
                    UsedItem(kind="decision", id=e, tier="warm", rank=i, tokens=120)
                    for i, e in enumerate(self.rng.sample(evidence, min(3, len(evidence))))
                )
                attempts.append(
                    synthetic.attempt(
                        run_id,
                        step,
                        op,
                        parent=parent,
                        status=status,
                        speedup=new_speed,
                        layer=layer,
                        family=family,
                        hw=hw,
                        title=f"{layer} variant {self.rng.randrange(1000)}",
                        used=used,
                        code=f"// {op} {run_id} step {step}\nvoid kernel(float* x) {{\n{KERNEL_BODY}}}\n/* {self.rng.random()} */\n",
                        created_at=1.7e9 + self.runs + step / 100,
                    )
                )
                if status == "correct":
                    speed[step] = new_speed
                    if new_speed > speed.get(incumbent, 0):
                        incumbent = step
            self.best.setdefault(op, []).append(f"{run_id}:s{incumbent}")
            self.recent.setdefault(op, []).extend(f"{run_id}:s{i}" for i in range(0, STEPS, 5))
        return specs, attempts


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def seed_to(
    graph: ExperienceGraph, history: History, target: int, have: int, chunk_runs: int = 100
) -> tuple[int, float]:
    """Record attempts until ``target``; returns (attempts recorded, seconds spent recording)."""
    spent = 0.0
    recorded = 0
    while have + recorded < target:
        runs = min(chunk_runs, -(-(target - have - recorded) // STEPS))
        specs, attempts = history.next_runs(runs)
        began = time.perf_counter()
        graph.start_runs(specs)
        graph.record_attempts(attempts, batch_size=1000)
        spent += time.perf_counter() - began
        recorded += len(attempts)
    return recorded, spent


def queries(history: History, rng: random.Random, known: bool, n: int) -> list[RetrievalQuery]:
    out = []
    seen = [op for op in history.best]
    for _ in range(n):
        hw = MACHINES[rng.randrange(len(MACHINES))]
        if known:
            op = rng.choice(seen)
            family = dict(OPERATORS)[op]
        else:
            family = rng.choice(list(FAMILIES))
            op = f"new_{family}_op"
        out.append(
            RetrievalQuery(
                operator=op,
                family=family,
                target="cpu",
                hardware_id=hw["id"],
                hardware_class=hw["class"],
                vendor=hw["vendor"],
                layer=rng.choice(LAYERS),
                error_kind=rng.choice([None, "compile_error", "incorrect:mismatch"]),
            )
        )
    return out


def measure(graph: ExperienceGraph, history: History, size: int, n_single: int, n_queries: int, n_naive: int) -> dict:
    rng = random.Random(size)
    # single-attempt latency: a fresh run per sample, starting from an existing decision
    single = []
    specs, attempts = history.next_runs(max(1, n_single // STEPS + 1))
    graph.start_runs(specs)
    for attempt in attempts[:n_single]:
        began = time.perf_counter()
        result = graph.record_attempt(attempt)
        single.append((time.perf_counter() - began) * 1000)
        assert result.in_graph
    graph.record_attempts(attempts[n_single:])
    out = {"single_p50": pct(single, 0.5), "single_p95": pct(single, 0.95), "recorded": len(attempts)}
    # Warm-up: after a bulk ingest Neo4j replans every statement once (its statistics
    # changed), which costs a few hundred ms per statement; measure the steady state.
    for q in queries(history, rng, True, 20) + queries(history, rng, False, 20):
        graph.retrieve(q, k=8)
    for kind, known in (("known", True), ("new", False)):
        qs = queries(history, rng, known, n_queries)
        times = []
        for q in qs:
            began = time.perf_counter()
            graph.retrieve(q, k=8)
            times.append((time.perf_counter() - began) * 1000)
        out[f"retrieve_{kind}_p50"], out[f"retrieve_{kind}_p95"] = pct(times, 0.5), pct(times, 0.95)
    naive, graph_times, same = [], [], True
    for q in queries(history, rng, True, n_naive):
        began = time.perf_counter()
        rows = graph.candidates()
        naive_ids = [r["id"] for r in rank_naively(rows, q.rank_query(), 8, graph.weights)]
        naive.append((time.perf_counter() - began) * 1000)
        began = time.perf_counter()
        found = graph.retrieve(q, k=8)
        graph_times.append((time.perf_counter() - began) * 1000)
        same = same and found.ids == naive_ids
    out["naive_p50"] = statistics.median(naive)
    out["naive_ratio"] = statistics.median(naive) / statistics.median(graph_times)
    out["naive_same"] = same
    return out


def check_scores(graph: ExperienceGraph) -> float:
    rows = graph.client.execute("memory/bench/scores", ns=graph.namespace)
    reference = recompute_all({r["id"]: (r["r"], r["parent_id"]) for r in rows})
    return max(abs(r["d"] - reference[r["id"]]) for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument(
        "--use-configured-server",
        action="store_true",
        help="Use KOPE_NEO4J_URI (or kope.toml) instead of a temporary server.",
    )
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--pagecache", default="1g")
    parser.add_argument("--single", type=int, default=100, help="single-record samples per size")
    parser.add_argument("--queries", type=int, default=100, help="retrieval samples per size and kind")
    parser.add_argument("--naive", type=int, default=5, help="naive ranking samples per size")
    args = parser.parse_args()
    # SIGTERM (kill, a CI timeout) unwinds like Ctrl-C, so the temporary Neo4j server is stopped and removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = [int(s) for s in args.sizes.split(",")]

    workdir = Path(tempfile.mkdtemp(prefix="kope-bench-memory-"))
    server = None
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
            server = LocalNeo4j(config, progress=lambda m: print(f"[neo4j] {m}", file=sys.stderr))
            server.start()
        ns = f"bench-{os.getpid()}"
        client = GraphClient.from_config(config)
        graph = ExperienceGraph(client, namespace=ns, journal=Journal(workdir / "memory", ns))
        graph.init_schema()
        history = History()
        have = 0
        print(
            f"namespace {ns}, server {config.neo4j_uri} ({'dedicated temporary' if server else 'configured'}), "
            f"{os.cpu_count()} CPUs; shared machine: timings are indicative"
        )
        header = (
            f"{'attempts':>9} | {'ingest/s':>8} | {'record p50/p95 ms':>17} | {'retrieve p50/p95 ms':>19} | "
            f"{'new-op p50/p95 ms':>17} | {'naive ms':>8} | {'naive/graph':>11} | same"
        )
        print(header)
        print("-" * len(header))
        for size in sizes:
            recorded, spent = seed_to(graph, history, size, have)
            have += recorded
            m = measure(graph, history, size, args.single, args.queries, args.naive)
            have += m["recorded"]  # the measurement's attempts stay in the graph
            rate = recorded / spent if spent else float("nan")
            print(
                f"{have:>9} | {rate:>8.0f} | {m['single_p50']:>7.1f} / {m['single_p95']:>7.1f} | "
                f"{m['retrieve_known_p50']:>8.1f} / {m['retrieve_known_p95']:>8.1f} | "
                f"{m['retrieve_new_p50']:>7.1f} / {m['retrieve_new_p95']:>7.1f} | {m['naive_p50']:>8.0f} | "
                f"{m['naive_ratio']:>10.0f}x | {'yes' if m['naive_same'] else 'NO'}",
                flush=True,
            )
        print(f"d(v) check over {have} attempts: max |stored - recomputed| = {check_scores(graph):.2e}")
        graph.prune(everything=True)
        client.close()
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
