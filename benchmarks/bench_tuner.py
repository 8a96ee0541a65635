"""Benchmark of the learning offline proposer: time per proposal with 10k and 100k attempts in memory.

    PYTHONPATH=. python benchmarks/bench_tuner.py                      # dedicated temporary Neo4j server
    PYTHONPATH=. python benchmarks/bench_tuner.py --sizes 10000
    KOPE_NEO4J_URI=... KOPE_NEO4J_PASSWORD=... python benchmarks/bench_tuner.py --use-configured-server

Seeds a deterministic synthetic memory: 8-step runs of every operator of every
cpu kernel template on 6 machines in 3 hardware classes, each attempt with
real template settings, 1-4 cases with shapes and per-case speedups drawn
from a fixed function of the settings (plus noise), ~1 in 12 a compile error.
Then, per size, it times what one step of the offline proposer costs:

* **fetch**: ``ExperienceGraph.tuning_records`` (the ranked, bounded sample);
* **plan**: features, both random forests, predictions for every untried
  setting, expected improvement, vetoes (``Tuner.plan``);
* **propose**: the whole ``OfflineProposer.propose`` (plan + rendering the
  chosen kernel), and fetch + propose together (the target: <= 200 ms at 100k);

for operators of a well-populated template (pointwise: 10 operators) and of a
template with one operator (prefix_scan), after a warm-up (Neo4j replans each
statement once after a bulk ingest). The baseline, in the same process, is the
same proposal trained on the template's whole history (no bound): the ratio
says what the bound buys. Timings on a shared machine are indicative.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from harness.suite.kernel_templates import list_templates
from kope.agent.offline import OfflineProposer
from kope.agent.proposal import ProposalRequest
from kope.config import load_config
from kope.context.state import TaskView
from kope.db.client import GraphClient
from kope.db.local import LocalNeo4j
from kope.db.ports import free_port
from kope.memory import ExperienceGraph, synthetic

MACHINES = [
    synthetic.hardware("cpu-intel-a", "x86_64-avx512", "intel"),
    synthetic.hardware("cpu-intel-b", "x86_64-avx512", "intel"),
    synthetic.hardware("cpu-intel-c", "x86_64-avx2", "intel"),
    synthetic.hardware("cpu-amd-a", "x86_64-avx2", "amd"),
    synthetic.hardware("arm-a", "aarch64-neon", "arm"),
    synthetic.hardware("arm-b", "aarch64-neon", "arm"),
]
STEPS = 8
TEMPLATES = list_templates("cpu")
OPERATORS = [(t, op) for t in TEMPLATES for op in t.operators]


def effect(*key: object) -> float:
    """A fixed pseudo-random effect in [-0.5, 0.5] for a (template, knob, value, machine class) key."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return digest[0] / 255.0 - 0.5


def speed(template, settings, hw_class: str, rng: random.Random) -> float:
    log = sum(effect(template.name, k, v, hw_class) for k, v in settings.items()) + rng.gauss(0, 0.05)
    return round(math.exp(log), 4)


class History:
    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.runs = 0

    def next_runs(self, n: int):
        specs, attempts = [], []
        for _ in range(n):
            template, operator = OPERATORS[self.runs % len(OPERATORS)]
            hw = MACHINES[self.rng.randrange(len(MACHINES))]
            cases = self.rng.choice([1, 2, 4])
            run_id = f"run{self.runs:06d}"
            self.runs += 1
            spec = synthetic.run_spec(operator, run_id=run_id, family=template.family, hw=hw, cases=cases)
            specs.append(spec)
            relevant = template.relevant_knobs(operator)
            for step in range(STEPS):
                settings = template.default_settings()
                for knob in relevant:
                    settings[knob.name] = self.rng.choice(knob.values)
                failed = self.rng.random() < 1 / 12
                a = None if failed else speed(template, settings, hw["class"], self.rng)
                attempts.append(
                    synthetic.attempt(
                        run_id,
                        step,
                        operator,
                        parent=f"{run_id}:s{step - 1}" if step else None,
                        status="compile_error" if failed else "correct",
                        speedup=a,
                        family=template.family,
                        hw=hw,
                        cases=cases,
                        code=f"// {operator} {sorted(settings.items())}\n",
                        params={"template": template.name, "settings": settings},
                    )
                )
        return specs, attempts


def seed_to(graph: ExperienceGraph, history: History, target: int, have: int) -> tuple[int, float]:
    recorded, began = 0, time.perf_counter()
    while have + recorded < target:
        specs, attempts = history.next_runs(min(125, -(-(target - have - recorded) // STEPS)))
        graph.start_runs(specs)
        graph.record_attempts(attempts, batch_size=1000)
        recorded += len(attempts)
    return recorded, time.perf_counter() - began


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def request(graph: ExperienceGraph, proposer: OfflineProposer, operator: str, hw: dict, limit: int | None):
    template = next(t for t, op in OPERATORS if op == operator)
    cases = tuple({"name": f"case{i}", "n": 1024 * (i + 1)} for i in range(4))
    task = TaskView(operator, template.family, 1, operator, "", cases)
    query = proposer.tuning_query(task, "cpu", cases, hw, "run-bench-new", True)
    if limit is not None:
        query = replace(query, limit=limit)
    began = time.perf_counter()
    data = graph.tuning_records(query)
    fetch = (time.perf_counter() - began) * 1000
    req = ProposalRequest(task, "cpu", 0, hw, None, None, None, (), cases=cases, tuning=data)
    return req, fetch, len(data.records)


def measure(graph: ExperienceGraph, operators: list[str], n: int, limit: int | None) -> dict:
    proposer = OfflineProposer()
    rng = random.Random(n)
    fetch, propose, total, records = [], [], [], []
    for i in range(n):
        operator = operators[i % len(operators)]
        hw = MACHINES[rng.randrange(len(MACHINES))]
        req, f, count = request(graph, proposer, operator, hw, limit)
        began = time.perf_counter()
        proposal = proposer.propose(req)
        p = (time.perf_counter() - began) * 1000
        assert proposal.params["tuner"]["basis"] == "model", proposal.params
        fetch.append(f)
        propose.append(p)
        total.append(f + p)
        records.append(count)
    return {
        "fetch": (pct(fetch, 0.5), pct(fetch, 0.95)),
        "propose": (pct(propose, 0.5), pct(propose, 0.95)),
        "total": (pct(total, 0.5), pct(total, 0.95)),
        "records": statistics.median(records),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--use-configured-server", action="store_true")
    parser.add_argument("--heap", default="1g")
    parser.add_argument("--pagecache", default="1g")
    parser.add_argument("--proposals", type=int, default=30, help="timed proposals per size and template")
    parser.add_argument("--baseline", type=int, default=5, help="unbounded proposals per size (the baseline)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="kope-bench-tuner-"))
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
        ns = f"bench-tuner-{os.getpid()}"
        client = GraphClient.from_config(config)
        graph = ExperienceGraph(client, namespace=ns, journal=None)
        graph.init_schema()
        history, have = History(), 0
        pointwise = [op for t, op in OPERATORS if t.name == "pointwise"]
        single = [op for t, op in OPERATORS if t.name == "prefix_scan"]
        print(
            f"namespace {ns}, server {config.neo4j_uri} ({'dedicated temporary' if server else 'configured'}), "
            f"{os.cpu_count()} CPUs, {len(OPERATORS)} operators of {len(TEMPLATES)} templates; "
            "shared machine: timings are indicative"
        )
        head = (
            f"{'attempts':>9} | {'template':>11} | {'records':>7} | {'fetch p50/p95 ms':>16} | "
            f"{'propose p50/p95 ms':>18} | {'total p50/p95 ms':>16} | {'unbounded total':>15} | ratio"
        )
        print(head)
        print("-" * len(head))
        for size in sizes:
            recorded, spent = seed_to(graph, history, size, have)
            have += recorded
            print(f"(seeded {recorded} attempts in {spent:.0f} s: {recorded / max(spent, 1e-9):.0f}/s)", flush=True)
            for ops in (pointwise, single):
                measure(graph, ops, 6, None)  # warm-up: plans, caches, sklearn's first fit
                m = measure(graph, ops, args.proposals, None)
                base = measure(graph, ops, args.baseline, 10**9)
                print(
                    f"{have:>9} | {ops[0] if len(ops) == 1 else 'pointwise':>11} | {m['records']:>7.0f} | "
                    f"{m['fetch'][0]:>6.1f} / {m['fetch'][1]:>6.1f} | {m['propose'][0]:>7.1f} / {m['propose'][1]:>7.1f} | "
                    f"{m['total'][0]:>6.1f} / {m['total'][1]:>6.1f} | {base['total'][0]:>9.0f} ({base['records']:.0f}) | "
                    f"{base['total'][0] / m['total'][0]:>4.1f}x",
                    flush=True,
                )
        graph.prune(everything=True)
        client.close()
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
