"""A recording client for load tests and the server benchmark (not used on the optimization path).

``python -m kope.server.loadgen '<json settings>'`` records synthetic attempts through a memory
server (``RemoteMemory``, journal first, as ``kope optimize`` does) for ``duration`` seconds, in
batches, each attempt starting from a seed decision or one of this client's earlier attempts
(so concurrent clients of one team grow the same lineages). It prints one JSON line per
acknowledged batch (``{"acknowledged": [ids], "seconds": request time}``), flushed, and a last
line ``{"done": count, "elapsed": seconds}``.

Settings: url, token, namespace (optional), run_id, operator, seeds (decision ids), duration (s),
batch, seed (random), journal (a folder).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

STATUSES = ("correct", "correct", "correct", "compile_error", "incorrect")


def record_load(settings: dict[str, Any], emit: Any = print) -> int:
    from kope.memory import UsedItem, synthetic
    from kope.memory.remote import RemoteMemory

    rng = random.Random(settings.get("seed", 0))
    memory = RemoteMemory(
        settings["url"],
        settings["token"],
        namespace=settings.get("namespace"),
        journal_root=Path(settings["journal"]),
    )
    operator, run_id = settings["operator"], settings["run_id"]
    seeds: list[str] = list(settings.get("seeds", ()))
    batch_size = int(settings.get("batch", 20))
    try:
        memory.start_run(synthetic.run_spec(operator, run_id=run_id))
        mine: list[str] = []
        step = 0
        began = time.monotonic()
        while time.monotonic() - began < float(settings["duration"]):
            batch = []
            for _ in range(batch_size):
                parent = rng.choice(seeds + mine) if seeds or mine else None
                used = (
                    (UsedItem(kind="decision", id=rng.choice(seeds), tier="warm", rank=0, tokens=10),) if seeds else ()
                )
                batch.append(
                    synthetic.attempt(
                        run_id,
                        step,
                        operator,
                        parent=parent,
                        status=rng.choice(STATUSES),
                        speedup=round(rng.uniform(0.5, 2.0), 3),
                        used=used,
                    )
                )
                mine.append(f"{run_id}:s{step}")
                step += 1
            sent = time.perf_counter()
            results = memory.record_attempts(batch)
            seconds = time.perf_counter() - sent
            missing = [r.decision_id for r in results if not r.in_graph]
            if missing:
                emit(json.dumps({"error": results[0].pending_reason, "missing": missing}))
                return 1
            emit(json.dumps({"acknowledged": [r.decision_id for r in results], "seconds": seconds}))
        emit(json.dumps({"done": step, "elapsed": time.monotonic() - began}))
        return 0
    finally:
        memory.close()


def main() -> int:
    return record_load(json.loads(sys.argv[1]), emit=lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
