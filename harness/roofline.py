"""The physical-limit check: no kernel can be faster than the hardware allows.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness import settings
from harness.jsonfile import read_json as _read_json
from harness.jsonfile import write_json as _write_json

FLAG_FRACTION = 1.5
PEAKS_SCHEMA = "kope.peaks/1"
COSTS_SCHEMA = "kope.costs/1"
MEASURE_TIMEOUT_S = 300.0
COSTS_MEMORY_BYTES = 64 << 30  # the cost helper's address space: the reference runs on real inputs


@dataclass(frozen=True)
class Peaks:
    hardware_id: str
    bandwidth_bytes_s: float
    flops_s: float
    source: str  # "measured" or the pinned file
    detail: dict[str, float]  # every measurement, for the record
    measured_at: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PEAKS_SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str | None = None) -> Peaks:
        if data.get("schema") != PEAKS_SCHEMA:
            raise ValueError(f"not a {PEAKS_SCHEMA} record")
        bandwidth, flops = float(data["bandwidth_bytes_s"]), float(data["flops_s"])
        if not (bandwidth > 0 and flops > 0):
            raise ValueError("bandwidth_bytes_s and flops_s must be positive")
        return cls(
            hardware_id=str(data.get("hardware_id", "")),
            bandwidth_bytes_s=bandwidth,
            flops_s=flops,
            source=source or str(data.get("source", "measured")),
            detail={k: float(v) for k, v in (data.get("detail") or {}).items()},
            measured_at=float(data.get("measured_at", 0.0)),
        )

    def merged(self, other: Peaks) -> Peaks:
        """The higher of both peaks (a re-measurement can only make the bound more lenient)."""
        return Peaks(
            self.hardware_id,
            max(self.bandwidth_bytes_s, other.bandwidth_bytes_s),
            max(self.flops_s, other.flops_s),
            "measured",
            {**self.detail, **{f"{k}:remeasured": v for k, v in other.detail.items()}},
            max(self.measured_at, other.measured_at),
        )


@dataclass(frozen=True)
class CaseCost:
    bytes: int
    flops: int


@dataclass(frozen=True)
class Roofline:
    """One case against the machine's limits (the optional roofline fields of ``harness.record.CaseResult``)."""

    min_bytes: int
    flops: int
    bound_ms: float
    roofline_fraction: float | None
    limited_by: str  # "memory", "compute" or "none" (neither term applies)


def cache_dir() -> Path:
    """Where peaks and costs are kept: ``KOPE_HARNESS_ROOFLINE_CACHE``, else beside the harness compile cache."""
    return settings.roofline_cache_dir()


# -- the machine's peaks -----------------------------------------------------------------------------------------
def machine_peaks(hardware: Any, device: str, threads: int, *, fresh: bool = False) -> Peaks:
    """Pinned (``KOPE_HARNESS_PEAKS``), cached, or measured now in a separate process and cached."""
    from harness.errors import HarnessError

    pinned = settings.pinned_peaks()
    if pinned:
        data = _read_json(Path(pinned))
        try:
            return Peaks.from_dict(data or {}, source=pinned)
        except (ValueError, KeyError, TypeError) as exc:
            raise HarnessError(f"{settings.PEAKS}={pinned}: not a valid peaks file ({exc})") from None
    path = cache_dir() / "peaks" / f"{hardware.id}.json"
    cached = None
    data = _read_json(path)
    if data is not None:
        try:
            cached = Peaks.from_dict(data)
        except (ValueError, KeyError, TypeError):
            cached = None
    if cached is not None and not fresh:
        return cached
    measured = _run_helper(["peaks", device, str(threads)], MEASURE_TIMEOUT_S)
    peaks = Peaks(hardware.id, measured["bandwidth_bytes_s"], measured["flops_s"], "measured", measured["detail"])
    peaks = Peaks(peaks.hardware_id, peaks.bandwidth_bytes_s, peaks.flops_s, "measured", peaks.detail, time.time())
    if cached is not None:
        peaks = cached.merged(peaks)
    _write_json(path, peaks.to_dict())
    return peaks


def measure_peaks(device: str, threads: int) -> dict[str, Any]:
    """Bandwidth and FLOP/s, best of several repetitions of each method (run in a helper process)."""
    import torch

    torch.set_num_threads(threads)
    dev = torch.device(device)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def best(fn, reps: int = 5) -> float:
        fn()
        sync()
        times = []
        for _ in range(reps):
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        return min(times)

    detail: dict[str, float] = {}
    if dev.type == "cuda":  # the GPU's own last-level cache (the host's is in the hardware fingerprint)
        detail["cache_bytes"] = float(getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 0) or 64 << 20)
    nbytes = (1 << 30) if dev.type == "cuda" else (256 << 20)

    def stream() -> None:  # its buffers are freed on return, before the matrix products
        a = torch.empty(nbytes // 4, dtype=torch.float32, device=dev).uniform_()
        b = torch.empty_like(a)
        detail["copy_bytes_s"] = 2 * nbytes / best(lambda: b.copy_(a))
        detail["read_bytes_s"] = nbytes / best(lambda: a.sum())
        detail["fill_bytes_s"] = nbytes / best(lambda: b.fill_(1.0))

    stream()
    n = 8192 if dev.type == "cuda" else 2048
    dtypes = [torch.float32, torch.bfloat16] + ([torch.float16] if dev.type == "cuda" else [])
    for dtype in dtypes:
        key = f"mm_{str(dtype).removeprefix('torch.')}_flops_s"
        size = n
        if dev.type == "cpu" and dtype != torch.float32:
            # A CPU without native bf16 runs it ~100x slower than float32 (minutes at n = 2048): a small product
            # first, and the full size only where it is fast enough to raise the peak at all.
            small = 512
            x = torch.randn(small, small).to(dtype)
            y = torch.randn(small, small).to(dtype)
            detail[key] = 2 * small**3 / best(lambda x=x, y=y: x @ y, reps=3)
            if detail[key] < 0.5 * detail["mm_float32_flops_s"]:
                continue
        x = torch.randn(size, size, device=dev).to(dtype)
        y = torch.randn(size, size, device=dev).to(dtype)
        detail[key] = 2 * size**3 / best(lambda x=x, y=y: x @ y, reps=3)
    bandwidth = max(v for k, v in detail.items() if k.endswith("_bytes_s"))  # cache_bytes is not a rate
    flops = max(v for k, v in detail.items() if k.endswith("_flops_s"))
    return {"bandwidth_bytes_s": bandwidth, "flops_s": flops, "detail": detail}


# -- each case's least work ------------------------------------------------------------------------------------
def case_costs(task: Any, indices: list[int], device: str, threads: int) -> dict[int, CaseCost]:
    """Bytes and FLOPs per case, cached per task file content (computed by running the reference elsewhere)."""
    digest = hashlib.sha256(Path(task.path).read_bytes()).hexdigest()
    path = cache_dir() / "costs" / f"{digest[:32]}-{device}.json"
    data = _read_json(path) or {}
    known = {c["name"]: c for c in data.get("cases", [])} if data.get("schema") == COSTS_SCHEMA else {}
    wanted = [i for i in indices if task.case(i).name not in known]
    if wanted:
        computed = _run_costs(Path(task.path), device, threads, wanted)
        for case in computed["cases"]:
            known[case["name"]] = case
        _write_json(path, {"schema": COSTS_SCHEMA, "task": str(task.path), "cases": sorted(known.values(), key=str)})
    return {
        i: CaseCost(int(known[n]["bytes"]), int(known[n]["flops"]))
        for i in indices
        if (n := task.case(i).name) in known
    }


def _nbytes(value: Any) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def measure_costs(task_path: str, device: str, threads: int, indices: list[int]) -> dict[str, Any]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from harness.task import load_task
    from harness.worker_common import build_reference, init_inputs, make_inputs, model_tensors

    torch.set_num_threads(threads)
    task = load_task(task_path)
    cases = []
    for index in indices:
        case = task.case(index)
        module = task.module_for_case(case)
        init = init_inputs(module, 0, case.name)
        model = build_reference(module, init, 0, device, case.name)
        inputs = make_inputs(module, 1, device, case.name)
        counter = FlopCounterMode(display=False)
        with torch.no_grad(), counter:
            out = model(*inputs)
        moved = _nbytes(inputs) + _nbytes(model_tensors(model)) + _nbytes(out)
        cases.append({"name": case.name, "bytes": moved, "flops": int(counter.get_total_flops())})
    return {"cases": cases}


# -- the check ------------------------------------------------------------------------------------------------------
def last_level_cache(hardware: Any) -> int:
    caches = dict(getattr(hardware, "caches", {}) or {})
    if "l3" in caches:
        return int(caches["l3"])
    return int(caches.get("l2", 1 << 20)) * max(1, int(getattr(hardware, "cores", 1) or 1))


def roofline(cost: CaseCost, peaks: Peaks, cand_ms: float, cache_bytes: int) -> Roofline:
    memory_s = cost.bytes / peaks.bandwidth_bytes_s if cost.bytes > 2 * cache_bytes else 0.0
    compute_s = cost.flops / peaks.flops_s
    bound_ms = 1e3 * max(memory_s, compute_s)
    limited = "none" if bound_ms == 0 else ("memory" if memory_s >= compute_s else "compute")
    fraction = bound_ms / cand_ms if cand_ms > 0 and bound_ms > 0 else None
    return Roofline(cost.bytes, cost.flops, bound_ms, fraction, limited)


def impossible(line: Roofline) -> bool:
    return line.roofline_fraction is not None and line.roofline_fraction > FLAG_FRACTION


def check_cases(task: Any, results: list[Any], hardware: Any, device: str, threads: int) -> str | None:
    """Fill the roofline fields of every timed case; a message when one is faster than the hardware allows.

    ``results`` are ``CaseResult`` objects with ``cand_ms``. When the costs or peaks cannot be
    measured the fields stay ``None`` (logged): a missing bound never fails an evaluation."""
    import logging

    from harness.errors import HarnessError

    timed = [r for r in results if r.cand_ms is not None]
    if not timed:
        return None
    try:
        costs = case_costs(task, [r.index for r in timed], device, threads)
        peaks = machine_peaks(hardware, device, threads)
    except HarnessError as exc:
        logging.getLogger("harness").warning("no physical-limit check: %s", exc.message)
        return None
    cache = int(peaks.detail.get("cache_bytes", last_level_cache(hardware)))

    def assess(peaks: Peaks) -> list[Any]:
        bad = []
        for result in timed:
            cost = costs.get(result.index)
            if cost is None:
                continue
            line = roofline(cost, peaks, result.cand_ms.median, cache)
            result.min_bytes, result.flops = line.min_bytes, line.flops
            result.bound_ms, result.roofline_fraction = round(line.bound_ms, 6), line.roofline_fraction
            if impossible(line):
                bad.append((result, line))
        return bad

    bad = assess(peaks)
    if bad and peaks.source == "measured":
        try:
            peaks = machine_peaks(hardware, device, threads, fresh=True)  # the cached peaks may be from a busy machine
        except HarnessError:
            pass
        bad = assess(peaks)
    if not bad:
        return None
    result, line = bad[0]
    return (
        f"case {result.name!r}: the candidate took {result.cand_ms.median:.4g} ms, but moving its "
        f"{line.min_bytes:,} bytes and doing its {line.flops:,} FLOPs takes at least {line.bound_ms:.4g} ms on this "
        f"machine (peaks: {peaks.bandwidth_bytes_s / 1e9:.3g} GB/s, {peaks.flops_s / 1e9:.3g} GFLOP/s, "
        f"{peaks.source}): {line.roofline_fraction:.2f}x the physical limit (flagged above {FLAG_FRACTION}x)"
    )


# -- the helper process -------------------------------------------------------------------------------------------
def _run_helper(args: list[str], timeout: float) -> dict[str, Any]:
    import harness
    from harness.errors import HarnessError
    from harness.task_loader import clean_env

    root = str(Path(harness.__file__).resolve().parent.parent)
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="kope-roofline-") as scratch:
        out = Path(scratch) / "out.json"
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "harness.roofline", *args, str(out)],
                cwd=scratch,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            raise HarnessError(f"measuring the physical limits ({args[0]}) took longer than {timeout:.0f} s") from None
        data = _read_json(out)
        if proc.returncode != 0 or data is None:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise HarnessError(f"measuring the physical limits ({args[0]}) failed: {tail[0]}")
        return data


def _run_costs(task_path: Path, device: str, threads: int, indices: list[int]) -> dict[str, Any]:
    """``measure_costs`` in the sandbox of ``harness.isolated``: it runs the task's code (its reference)."""
    from harness.errors import HarnessError
    from harness.isolated import run_module

    args = ["costs", str(task_path), device, str(threads), ",".join(map(str, indices)), "-"]
    done = run_module(
        "harness.roofline",
        args,
        timeout_s=MEASURE_TIMEOUT_S,
        reads=[task_path],
        memory_bytes=COSTS_MEMORY_BYTES,
        cpu_s=MEASURE_TIMEOUT_S * max(1, threads),
        threads=threads,
        gpu=device != "cpu",
    )
    if done.timed_out:
        raise HarnessError(f"{task_path}: measuring the cases' costs took longer than {MEASURE_TIMEOUT_S:.0f} s")
    try:
        data = json.loads(done.report.decode("utf-8"))
        cases = [{"name": str(c["name"]), "bytes": int(c["bytes"]), "flops": int(c["flops"])} for c in data["cases"]]
    except (UnicodeDecodeError, ValueError, KeyError, TypeError):
        cases = None
    if done.returncode != 0 or cases is None:
        tail = done.output.splitlines()[-1:] or ["no output"]
        raise HarnessError(f"{task_path}: measuring the cases' costs failed ({done.describe_exit()}): {tail[0]}")
    return {"cases": cases}


def main(argv: list[str]) -> int:
    kind, out = argv[0], argv[-1]
    channel = None
    if out == "-":  # the report on stdout; what the task prints goes to stderr
        channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
    if kind == "peaks":
        data = measure_peaks(argv[1], int(argv[2]))
    elif kind == "costs":
        data = measure_costs(argv[1], argv[2], int(argv[3]), [int(i) for i in argv[4].split(",") if i])
    else:
        raise SystemExit(f"unknown request {kind!r}")
    if channel is not None:
        channel.write(json.dumps(data))
        channel.flush()
    else:
        Path(out).write_text(json.dumps(data), encoding="utf-8")
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    os._exit(code)  # the task may have started threads: do not wait for them
