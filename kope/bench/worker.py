"""A worker process of ``kope bench --workers N``: runs one pair and leaves its result in the bench folder.

Usage (by the bench runner only): ``python -m kope.bench.worker SPEC.json``. The spec
names the pair and the bench folder; the worker writes the pair's start marker and
result there (``kope.bench.store``), or, on an error, ``work/<config>/<operator>.error.json``
with the message. It connects to the same Neo4j as its parent (the configuration
comes from the same environment) and writes only its own run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _print_step(kind: str, data: Any) -> None:
    if kind == "step":
        speed = f"{data.speedup:.2f}x" if isinstance(data.speedup, (int, float)) else "-"
        print(f"step {data.step}: {data.status} {speed} {data.title}", file=sys.stderr, flush=True)
    elif kind == "run":
        resumed = f" (resumed at step {data['resumed_at']})" if data.get("resumed_at") is not None else ""
        print(f"run {data['run_id']}{resumed}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    from kope.bench.pair import PairSpec, run_pair
    from kope.bench.store import BenchStore, write_json
    from kope.config import load_config
    from kope.errors import KopeError

    spec_file = Path(argv[0])
    raw = json.loads(spec_file.read_text(encoding="utf-8"))
    store = BenchStore(Path(raw.pop("bench_dir")))
    spec = PairSpec(**raw)
    error_file = store.work_file(spec.config, spec.operator, "error", spec.repeat)
    error_file.unlink(missing_ok=True)
    try:
        result = run_pair(
            spec,
            load_config(),
            on_started=lambda run_id: store.mark_started(spec.config, spec.operator, run_id, spec.repeat),
            progress=_print_step,
        )
    except KopeError as exc:
        write_json(error_file, {"message": exc.message, "hint": exc.hint, "exit_code": exc.exit_code})
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        write_json(error_file, {"message": "interrupted", "hint": None, "exit_code": 130})
        return 130
    store.save_pair(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
