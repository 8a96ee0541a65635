"""Benchmark of Active Context Management and Injection.

    PYTHONPATH=. python benchmarks/bench_context.py            # dedicated temporary Neo4j server
    PYTHONPATH=. python benchmarks/bench_context.py --use-configured-server

Prints, in one run:

* assembly time for the ``active`` policy (retrieval from the graph + knowledge
  selection + tier packing + token counting) with a 10k-attempt graph, p50/p95
  over 40 assemblies for built-in tasks (target: <= 100 ms);
* tokens per step over a 30-step run recorded step by step (each step's kernel
  is a real-sized candidate): the prompt of the next step under ``active`` and
  under ``passive`` (the full history), and the ratio of the totals (the paper
  reports 93% fewer tokens with active context).

The 10k attempts come from bench_memory's deterministic synthetic history.
Timings on a shared machine are noisy; the numbers are indicative.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory import History, seed_to

from harness.hardware import cpu_fingerprint
from harness.suite import find_candidate, find_task
from harness.task import load_task
from kope.config import load_config
from kope.context.budget import Budget
from kope.context.state import TaskView, build_context
from kope.db.client import GraphClient
from kope.db.local import LocalNeo4j
from kope.db.ports import free_port
from kope.memory import ExperienceGraph, Journal, synthetic
from kope.memory.prune import prune_namespace

TASKS = ["softmax", "relu", "layer_norm", "matmul", "gemm_bias_relu"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def assembly_times(graph: ExperienceGraph, budget: Budget, hw: dict, n: int) -> tuple[list[float], list[float]]:
    """(first assembly of each task, later assemblies): a loop assembles the same task every step, so the
    first one (tokenising the task's source and files, Neo4j planning a query the first time) is a one-off."""
    views = [TaskView.from_info(load_task(find_task(name).path)) for name in TASKS]
    first = []
    for view in views:
        began = time.perf_counter()
        build_context(view, target="cpu", hardware=hw, budget=budget, graph=graph)
        first.append((time.perf_counter() - began) * 1000)
    times = []
    for i in range(n):
        began = time.perf_counter()
        build_context(views[i % len(views)], target="cpu", hardware=hw, budget=budget, graph=graph)
        times.append((time.perf_counter() - began) * 1000)
    return first, times


def tokens_per_step(graph: ExperienceGraph, budget: Budget, hw: dict, steps: int) -> list[tuple[int, int, int]]:
    info = load_task(find_task("softmax").path)
    view = TaskView.from_info(info)
    base = find_candidate("softmax").read_text()
    run_id = "bench-context-run"
    graph.start_run(synthetic.run_spec("softmax", run_id=run_id, family="normalization", hw=hw, cases=len(info.cases)))
    rows = []
    incumbent = None
    for step in range(steps):
        status = "correct" if step % 4 != 3 else "compile_error"
        speed = 1.0 + 0.05 * step
        code = base + f"\n# variant {step}: block size {32 * (step % 8 + 1)}\n"
        graph.record_attempt(
            synthetic.attempt(
                run_id,
                step,
                "softmax",
                parent=incumbent,
                status=status,
                speedup=speed,
                family="normalization",
                hw=hw,
                code=code,
                title=f"variant {step}",
            )
        )
        if status == "correct":
            incumbent = f"{run_id}:s{step}"
        active, _ = build_context(
            view, target="cpu", hardware=hw, budget=budget, graph=graph, run_id=run_id, policy="active"
        )
        passive, _ = build_context(
            view, target="cpu", hardware=hw, budget=budget, graph=graph, run_id=run_id, policy="passive"
        )
        rows.append((step + 1, active.tokens["prompt"], passive.tokens["prompt"]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument(
        "--window",
        type=int,
        default=128_000,
        help="W for the token-per-step comparison (large, so passive is not cut).",
    )
    parser.add_argument("--use-configured-server", action="store_true")
    args = parser.parse_args()
    # SIGTERM (kill, a CI timeout) unwinds like Ctrl-C, so the temporary Neo4j server is stopped and removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    workdir = Path(tempfile.mkdtemp(prefix="kope-bench-context-"))
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
                    "server.heap": "1g",
                    "server.pagecache": "512m",
                },
                environ=environ,
            )
            server = LocalNeo4j(config, progress=lambda m: print(f"[neo4j] {m}", file=sys.stderr))
            server.start()
        ns = f"bench-context-{os.getpid()}"
        client = GraphClient.from_config(config)
        graph = ExperienceGraph(client, namespace=ns, journal=Journal(workdir / "memory", ns))
        hw = cpu_fingerprint().to_dict()
        print(
            f"KOPE context benchmark: namespace {ns}, {'dedicated temporary' if server else 'configured'} server "
            f"{config.neo4j_uri}, load average {os.getloadavg()[0]:.1f} (shared machine: timings are indicative)"
        )

        began = time.perf_counter()
        seeded, _ = seed_to(graph, History(), args.attempts, 0)
        print(f"seeded {seeded} synthetic attempts in {time.perf_counter() - began:.1f} s")
        budget = Budget.from_settings(config.context)
        first, times = assembly_times(graph, budget, hw, args.queries)
        print(
            f"\nfirst assembly of each of {len(first)} tasks (cold: task tokenised, queries planned): "
            f"p50 {pct(first, 0.5):.1f} ms, max {max(first):.1f} ms"
        )
        print(
            f"active assembly with a {seeded}-attempt graph (retrieval + knowledge + packing + counting), "
            f"{len(times)} later prompts: p50 {pct(times, 0.5):.1f} ms, p95 {pct(times, 0.95):.1f} ms "
            f"(target p95 <= 100 ms: {'met' if pct(times, 0.95) <= 100 else 'NOT met'})"
        )

        wide = budget.with_total(args.window)
        rows = tokens_per_step(graph, wide, hw, args.steps)
        print(
            f"\ntokens per step over a {args.steps}-step run (B_k = {wide.total}; passive = full history of the task)"
        )
        print(f"{'step':>4} {'active':>8} {'passive':>9}")
        for step, a, p in rows:
            print(f"{step:>4} {a:>8} {p:>9}")
        total_a, total_p = sum(r[1] for r in rows), sum(r[2] for r in rows)
        print(
            f"total: active {total_a}, passive {total_p}; active/passive = {total_a / total_p:.3f} "
            f"({100 * (1 - total_a / total_p):.0f}% fewer tokens); active max {max(r[1] for r in rows)} "
            f"<= budget {budget.total}: {max(r[1] for r in rows) <= budget.total}; "
            f"passive grows from {rows[0][2]} to {rows[-1][2]}"
        )
        print(f"(median per-step active tokens {statistics.median(r[1] for r in rows):.0f})")
        prune_namespace(client, ns)
        graph.close()
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
