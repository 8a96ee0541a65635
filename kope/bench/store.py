"""The bench's files: where each result lives in the output folder, written atomically.

Layout of ``--out DIR``::

    plan.json                           options, command, operators: written when the bench starts
    pairs/<config>/<operator>.run.json  the run id of a started pair (a resumed bench continues that run)
    pairs/<config>/<operator>.json      a finished pair: run id, every attempt with its per-case results
    runs/<config>/<operator>/<run_id>/  what the loop writes: candidates, the best kernel and its outcome
    logs/<config>/<operator>.log        a worker process's output (--workers > 1)
    results.json                        everything above in one file (rewritten after every pair)
    summary.md, plots/*.png             the report, regenerated from results.json by `kope bench report`

Every JSON file is written to a temporary name and renamed, so an interrupted
bench never leaves half a file behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from kope.errors import UsageError

RESULTS_SCHEMA = "kope.bench/1"
OWNED = ("plan.json", "results.json", "summary.md", "pairs", "runs", "logs", "plots", "work")


class BenchStore:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # -- paths -------------------------------------------------------------------------------------
    @property
    def plan_file(self) -> Path:
        return self.root / "plan.json"

    @property
    def results_file(self) -> Path:
        return self.root / "results.json"

    def pair_file(self, config: str, operator: str) -> Path:
        return self.root / "pairs" / config / f"{operator}.json"

    def started_file(self, config: str, operator: str) -> Path:
        return self.root / "pairs" / config / f"{operator}.run.json"

    def runs_dir(self, config: str) -> Path:
        return self.root / "runs" / config

    def log_file(self, config: str, operator: str) -> Path:
        return self.root / "logs" / config / f"{operator}.log"

    def work_file(self, config: str, operator: str, suffix: str) -> Path:
        return self.root / "work" / config / f"{operator}.{suffix}.json"

    # -- state ---------------------------------------------------------------------------------------
    def exists(self) -> bool:
        return self.plan_file.is_file()

    def read_plan(self) -> dict[str, Any]:
        plan = read_json(self.plan_file, "bench plan")
        if not isinstance(plan, dict):
            raise UsageError(f"the bench plan {self.plan_file} is not a JSON object")
        return plan

    def finished(self, config: str, operator: str) -> dict[str, Any] | None:
        path = self.pair_file(config, operator)
        return read_json(path, "pair result") if path.is_file() else None

    def started_run(self, config: str, operator: str) -> str | None:
        path = self.started_file(config, operator)
        return read_json(path, "pair start")["run_id"] if path.is_file() else None

    def mark_started(self, config: str, operator: str, run_id: str) -> None:
        write_json(self.started_file(config, operator), {"config": config, "operator": operator, "run_id": run_id})

    def save_pair(self, result: dict[str, Any]) -> None:
        write_json(self.pair_file(result["config"], result["operator"]), result)

    def wipe(self) -> None:
        """Remove what an earlier bench wrote here (only the files and folders a bench owns)."""
        for name in OWNED:
            path = self.root / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True, default=str)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"no {what} at {path}") from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the {what} {path}: {exc}") from None


def load_results(folder: Path) -> dict[str, Any]:
    """``results.json`` of a bench folder, checked for its schema."""
    folder = Path(folder)
    if not folder.is_dir():
        raise UsageError(f"bench folder not found: {folder}")
    path = folder / "results.json"
    if not path.is_file():
        raise UsageError(f"no results.json in {folder}", hint="run `kope bench ... --out DIR` first")
    data = read_json(path, "bench results")
    if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA:
        raise UsageError(f"{path} is not a kope bench results file (schema {RESULTS_SCHEMA})")
    for key in ("configurations", "operators", "pairs", "options"):
        if key not in data:
            raise UsageError(f"{path} lacks {key!r}: not a complete kope bench results file")
    return data
