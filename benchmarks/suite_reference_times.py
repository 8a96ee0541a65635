"""Median reference time (ms) of every built-in suite task, per case.

Used to check the suite's sizing: each case's reference call should take
roughly 1-100 ms on a 2-core CPU with torch's default thread count. Timings on
a shared machine are noisy; read them as sizes, not as results. When another
process keeps a core busy, torch's two OpenMP threads wait on each other and a
case can read 10x slower; `--threads 1` then gives a steadier upper bound (the
2-thread time lies between about half of it and all of it).

    PYTHONPATH=$PWD python benchmarks/suite_reference_times.py [--filter gelu] [--budget-ms 300] [--threads 1]

Tasks are loaded straight from their files (importlib), the way the harness
loader will load them; the lead switches this to that loader when merged.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import torch

TASKS_DIR = Path(__file__).resolve().parent.parent / "harness" / "suite" / "tasks"
LOW_MS, HIGH_MS = 1.0, 100.0


def task_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*.py") if not p.name.startswith("_"))


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"suite_task_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def apply_case(module, case: dict) -> None:
    if hasattr(module, "apply_case"):
        module.apply_case(dict(case))
        return
    for key, value in case.items():
        if key != "name":
            setattr(module, key, value)


def time_case(path: Path, case: dict, budget_ms: float, seed: int = 0) -> tuple[float, float]:
    """(median, min) wall time in ms of one reference forward, fresh module per case."""
    module = load_module(path)
    apply_case(module, case)
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).eval()
    inputs = module.get_inputs()
    samples: list[float] = []
    with torch.no_grad():
        model(*inputs)  # warm-up: one-time allocations and kernel selection
        deadline = time.perf_counter() + budget_ms / 1e3
        while len(samples) < 3 or (time.perf_counter() < deadline and len(samples) < 100):
            start = time.perf_counter()
            model(*inputs)
            samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples), min(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks-dir", type=Path, default=TASKS_DIR)
    parser.add_argument("--filter", default="", help="only tasks whose path contains this text")
    parser.add_argument("--budget-ms", type=float, default=300.0, help="timing budget per case")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: torch's own); 1 gives steadier numbers on a busy machine",
    )
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)

    paths = [p for p in task_files(args.tasks_dir) if args.filter in str(p.relative_to(args.tasks_dir))]
    if not paths:
        print(f"no task files under {args.tasks_dir} matching {args.filter!r}", file=sys.stderr)
        return 2
    threads = torch.get_num_threads()
    print(f"torch {torch.__version__}, threads={threads}, {args.budget_ms:.0f} ms timing budget per case")
    print("load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    summary = []
    outside = []
    for path in paths:
        module = load_module(path)
        cases = getattr(module, "CASES", None) or [{"name": "default"}]
        times = []
        for case in cases:
            ms, fastest = time_case(path, case, args.budget_ms)
            times.append(ms)
            flag = "" if LOW_MS <= ms <= HIGH_MS else "  <-- outside 1-100 ms"
            if flag:
                outside.append((path.stem, case["name"], ms))
            print(
                f"{path.parent.name:>13}/{path.stem:<24} {case['name']:<28} {ms:9.2f} ms (min {fastest:.2f}){flag}",
                flush=True,
            )
        summary.append((path.parent.name, path.stem, getattr(module, "LEVEL", None), len(cases), times))

    print("\nsummary: min / median / max over the cases' median ms per reference call")
    print(f"{'family':<14}{'operator':<24}{'L':>2}{'cases':>6}{'min':>9}{'median':>9}{'max':>9}")
    for family, name, level, count, times in summary:
        print(
            f"{family:<14}{name:<24}{level!s:>2}{count:>6}"
            f"{min(times):9.2f}{statistics.median(times):9.2f}{max(times):9.2f}"
        )
    print(f"\n{len(summary)} tasks, {sum(s[3] for s in summary)} cases, {len(outside)} outside 1-100 ms")
    for name, case, ms in outside:
        print(f"  {name} {case}: {ms:.2f} ms")
    print("load average at end: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
