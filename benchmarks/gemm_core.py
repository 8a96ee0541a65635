"""The GEMM core against PyTorch (oneDNN/MKL) on this CPU, with the machine's roofline next to every time.

One run prints, with the settings that achieved each figure:

1. the measured peaks (``benchmarks/machine_peaks.py``): float32/float64 FLOP/s and memory bandwidth;
2. square float32 matmuls (512, 1024, 2048 by default): the gemm template's kernel for each setting in
   ``SQUARE`` and ``torch.mm``, interleaved in this process (one repetition of each in turn, medians);
   GFLOP/s, the share of the roofline, and kernel / PyTorch as a ratio (PyTorch time / kernel time);
3. GEMM-based operators of the suite (gemm_bias_relu, mlp_block, conv2d by default) through the real harness,
   which interleaves the reference and the candidate: per case the reference and candidate times, the
   roofline time of the case, and the geometric-mean speedup over all cases for each setting in ``TUNED``.

    PYTHONPATH=$PWD python benchmarks/gemm_core.py [--sizes 512,1024,2048] [--operator OP ...] [--json FILE]

Figures for an issue come from ``kope-cpu --exclusive`` runs: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import machine_peaks

from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_task
from harness.suite.kernel_templates import template_for
from harness.task import load_task

# Settings of the gemm template tried on the square matmuls (the best is reported per size).
SQUARE = [
    {"parallel": "grid", "pack_a": True},
    {"parallel": "m", "pack_a": True},
    {"parallel": "mn", "pack_a": True},
    {"parallel": "grid", "pack_a": False},
]
# Settings per operator for the harness runs (the template's other knobs at their defaults).
TUNED = {
    "gemm_bias_relu": [{"fusion": "fused", "parallel": "grid"}, {"fusion": "fused", "parallel": "mnk"}],
    "mlp_block": [{"fusion": "epilogue_norm", "parallel": "grid"}, {"fusion": "epilogue", "parallel": "grid"}],
    "conv2d": [
        {"algorithm": "implicit_gemm"},
        {"algorithm": "im2col"},
        {"algorithm": "direct"},
        {"algorithm": "direct", "micro_kernel": "4x3"},
    ],
}
SIZE = {"float32": 4, "float64": 8, "bfloat16": 2}


def work(operator: str, params: dict) -> tuple[float, float, str]:
    """(FLOPs, bytes of inputs + outputs, dtype) of one case of a GEMM-based operator."""
    g = dict(params)
    dt = g.get("DTYPE", "float32")
    s = SIZE[dt]
    if operator == "gemm_bias_relu":
        b, i, o = g["batch_size"], g["in_features"], g["out_features"]
        return 2.0 * b * i * o, s * (b * i + i * o + b * o + o), dt
    if operator == "mlp_block":
        rows, d, h = g["batch_size"] * g["tokens"], g["dim"], g["hidden"]
        return 4.0 * rows * d * h, s * (2 * rows * d + 2 * d * h + h + 3 * d), dt
    if operator == "conv2d":
        n, c, o, hh, ww = g["batch_size"], g["in_channels"], g["out_channels"], g["height"], g["width"]
        k, st, p = g["kernel"], g["stride"], g["padding"]
        oh, ow = (hh + 2 * p - k) // st + 1, (ww + 2 * p - k) // st + 1
        return 2.0 * n * o * oh * ow * c * k * k, s * (n * c * hh * ww + o * c * k * k + o + n * o * oh * ow), dt
    raise KeyError(operator)


def case_params(operator: str) -> list[dict]:
    """Every case's full parameters (the task module's defaults with the case applied)."""
    task = load_task(find_task(operator).path)
    names = ("batch_size", "in_features", "out_features", "tokens", "dim", "hidden", "in_channels", "out_channels")
    names += ("height", "width", "kernel", "stride", "padding", "DTYPE")
    out = []
    for case in task.cases:
        module = task.module_for_case(case)
        out.append({k: getattr(module, k) for k in names if hasattr(module, k)})
    return out


def _gemm_library(settings: dict):
    from harness.cpu import compile_cpp
    from harness.suite.cpp_kit.prelude import FLAGS

    template = template_for("matmul")
    source = template.render("matmul", template.check_settings(settings))
    return compile_cpp(re.search(r'_SOURCE = r"""(.*?)"""', source, re.S).group(1), flags=FLAGS)


def square(sizes: list[int], peaks: machine_peaks.Peaks, budget_s: float = 1.5) -> list[dict]:
    import torch

    libs = [(s, _gemm_library(s)) for s in SQUARE]
    rows = []
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        c = torch.empty(n, n)
        calls = [("torch", lambda a=a, b=b, c=c: torch.mm(a, b, out=c))]
        calls += [
            (i, lambda lib=lib, a=a, b=b, c=c, n=n: lib.gemm_f32(a, b, None, c, 1, n, n, n, 0, n, 1, 0, n, 1))
            for i, (_, lib) in enumerate(libs)
        ]
        for _, call in calls:  # warm-up (and correctness: the kernel's result must be A @ B)
            call()
        for _, lib in libs:
            c.zero_()
            lib.gemm_f32(a, b, None, c, 1, n, n, n, 0, n, 1, 0, n, 1)
            torch.testing.assert_close(c, torch.mm(a, b), rtol=1e-4, atol=1e-3)
        samples: dict = {name: [] for name, _ in calls}
        started = time.perf_counter()
        while time.perf_counter() - started < budget_s * len(calls) or len(samples["torch"]) < 5:
            for name, call in calls:  # one of each in turn: drift and bursts hit all alike
                t = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - t)
        med = {name: sorted(v)[len(v) // 2] * 1e3 for name, v in samples.items()}
        flops, nbytes = 2.0 * n**3, 12.0 * n * n
        roof = machine_peaks.roofline_ms(flops, nbytes, peaks)
        best = min(range(len(libs)), key=lambda i: med[i])
        rows.append(
            {
                "n": n,
                "torch_ms": med["torch"],
                "kernel_ms": med[best],
                "ratio": med["torch"] / med[best],
                "roofline_ms": roof,
                "settings": template_for("matmul").check_settings(SQUARE[best]),
                "all": {json.dumps(SQUARE[i]): med[i] for i in range(len(libs))},
            }
        )
        r = rows[-1]
        for i, (settings, _) in enumerate(libs):
            print(
                f"    {n}: {' '.join(f'{k}={v}' for k, v in settings.items())}: {med[i]:.2f} ms, x{med['torch'] / med[i]:.2f}"
            )
        print(
            f"  matmul {n}x{n}x{n} float32: torch {r['torch_ms']:.2f} ms ({flops / r['torch_ms'] / 1e6:.0f} GFLOP/s, "
            f"{roof / r['torch_ms']:.0%} of roofline)  kernel {r['kernel_ms']:.2f} ms "
            f"({flops / r['kernel_ms'] / 1e6:.0f} GFLOP/s, {roof / r['kernel_ms']:.0%})  ratio {r['ratio']:.2f}x  "
            f"roofline {roof:.2f} ms  [{' '.join(f'{k}={v}' for k, v in r['settings'].items())}]",
            flush=True,
        )
    return rows


def operators(names: list[str], peaks: machine_peaks.Peaks, tmp: Path) -> list[dict]:
    rows = []
    for operator in names:
        template = template_for(operator)
        params = case_params(operator)
        results = []
        for i, settings in enumerate(TUNED[operator]):
            full = template.check_settings(settings)
            path = tmp / f"{operator}_{i}.py"
            path.write_text(template.render(operator, full))
            outcome = evaluate(operator, path, EvalOptions(timing=True, seeds=1))
            results.append((full, outcome))
            print(
                f"  {operator:16} {outcome.status.value:8} {outcome.speedup or 0:5.2f}x  "
                f"{' '.join(f'{k}={v}' for k, v in full.items())}",
                flush=True,
            )
        good = [(s, o) for s, o in results if o.status.value == "correct" and o.speedup]
        if not good:
            rows.append({"operator": operator, "speedup": None})
            continue
        settings, best = max(good, key=lambda so: so[1].speedup)
        cases = []
        for case, p in zip(best.cases, params):
            flops, nbytes, dt = work(operator, p)
            roof = machine_peaks.roofline_ms(flops, nbytes, peaks, dt)
            cases.append(
                {
                    "case": case.name,
                    "ref_ms": case.ref_ms.median if case.ref_ms else None,
                    "cand_ms": case.cand_ms.median if case.cand_ms else None,
                    "speedup": case.speedup,
                    "roofline_ms": roof,
                }
            )
            c = cases[-1]
            if c["cand_ms"]:
                print(
                    f"      {case.name:28} torch {c['ref_ms']:8.3f} ms ({roof / c['ref_ms']:4.0%} of roofline)  "
                    f"kernel {c['cand_ms']:8.3f} ms ({roof / c['cand_ms']:4.0%})  {c['speedup']:.2f}x  "
                    f"roofline {roof:.3f} ms"
                )
        rows.append({"operator": operator, "speedup": best.speedup, "settings": settings, "cases": cases})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="512,1024,2048", help="square matmul sizes (comma-separated; '' for none)")
    parser.add_argument("--operator", action="append", choices=list(TUNED), help="operators for the harness runs")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    started = time.monotonic()
    peaks = machine_peaks.measure()
    print(peaks.line(), flush=True)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    print("square float32 matmul, gemm template vs torch.mm (interleaved in this process):", flush=True)
    square_rows = square(sizes, peaks) if sizes else []
    print("suite operators through the harness (reference and candidate interleaved):", flush=True)
    with tempfile.TemporaryDirectory(prefix="kope-gemm-core-") as tmp:
        op_rows = operators(args.operator or list(TUNED), peaks, Path(tmp))
    print(f"\nsummary ({(time.monotonic() - started) / 60:.1f} min)   {peaks.line()}")
    for r in square_rows:
        print(
            f"  matmul {r['n']:>5}^3 float32  {r['ratio']:.2f}x PyTorch  "
            f"[{' '.join(f'{k}={v}' for k, v in r['settings'].items())}]"
        )
    for r in op_rows:
        s = f"{r['speedup']:.2f}x" if r["speedup"] else "no correct setting"
        geo = ""
        if r.get("cases"):
            fr = [c["roofline_ms"] / c["cand_ms"] for c in r["cases"] if c["cand_ms"]]
            geo = f", geomean {math.exp(sum(map(math.log, fr)) / len(fr)):.0%} of roofline" if fr else ""
        settings = " ".join(f"{k}={v}" for k, v in (r.get("settings") or {}).items())
        print(f"  {r['operator']:18} {s} PyTorch (geomean over {len(r.get('cases') or [])} cases{geo})  [{settings}]")
    if args.json:
        args.json.write_text(
            json.dumps({"peaks": peaks.__dict__, "square": square_rows, "operators": op_rows}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
