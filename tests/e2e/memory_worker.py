"""A recording process for the memory's concurrency and crash tests (not a test module).

Usage: python memory_worker.py '<json settings>'; prints one JSON line per
acknowledged attempt (flushed), so a test can kill it at any moment and know
what the caller had been told.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path


def main() -> int:
    from kope.db.client import GraphClient
    from kope.memory import ExperienceGraph, Journal, UsedItem, synthetic

    s = json.loads(sys.argv[1])
    client = GraphClient(s["uri"], s["user"], s["password"])
    graph = ExperienceGraph(client, namespace=s["ns"], journal=Journal(Path(s["journal"]), s["ns"]))
    go = Path(s["go"])
    while not go.exists():
        time.sleep(0.01)
    run_id = f"w{s['worker']}"
    graph.start_run(synthetic.run_spec("softmax", run_id=run_id))
    rng = random.Random(s["worker"])
    mine: list[str] = []
    seeds: list[str] = s["seeds"]
    step = 0
    while s["attempts"] is None or step < s["attempts"]:
        parent = rng.choice(seeds + mine)
        status = rng.choice(["correct", "correct", "correct", "compile_error", "incorrect"])
        used = (UsedItem(kind="decision", id=rng.choice(seeds), tier="warm", rank=0, tokens=10),)
        result = graph.record_attempt(
            synthetic.attempt(
                run_id,
                step,
                "softmax",
                parent=parent,
                status=status,
                speedup=round(rng.uniform(0.5, 2.0), 3),
                used=used,
            )
        )
        if not result.in_graph:
            print(json.dumps({"error": result.pending_reason}), flush=True)
            return 1
        mine.append(result.decision_id)
        print(json.dumps({"acknowledged": result.decision_id}), flush=True)
        step += 1
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
