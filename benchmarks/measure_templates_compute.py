"""Speedups of the compute templates' candidates over the PyTorch reference: default vs tuned settings.

For every operator of the matmul, convolution, fused and block templates, the
default settings and a few hand-picked settings (below: what an expert would
try first, not an exhaustive search) are rendered and
evaluated with timing on; the table gives the geometric-mean speedup over the
task's cases for the default and for the best of the tuned settings.

    PYTHONPATH=$PWD python benchmarks/measure_templates_compute.py [--operator OP] [--family F] [--json FILE]

The machine is shared with other jobs: timings are noisy (the harness
interleaves reference and candidate, which cancels slow drift but not bursts).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.suite.kernel_templates import list_templates

FAMILIES = ("matmul", "convolution", "fused", "block")
_GEMM = {"micro_kernel": "auto", "isa": "avx512", "tiles": "auto"}  # sized to this CPU's ISA and caches
TUNED = {
    "gemm": [dict(_GEMM, pack_a=True, parallel="grid"), dict(_GEMM, pack_a=True, parallel="mnk")],
    "gemm_epilogue": [dict(_GEMM, fusion="fused", parallel="grid"), dict(_GEMM, fusion="fused", parallel="mnk")],
    "conv": [
        dict(_GEMM, algorithm="implicit_gemm"),
        dict(_GEMM, algorithm="im2col"),
        {"algorithm": "direct", "micro_kernel": "6x2", "isa": "avx512"},
    ],
    "conv_epilogue": [
        {"fusion": "fused", "algorithm": "implicit_gemm", "micro_kernel": "auto", "isa": "avx512"},
        {"fusion": "fused", "algorithm": "direct", "micro_kernel": "6x2", "isa": "avx512"},
    ],
    "conv_transpose": [  # its own micro_kernel/tiles values (no 'auto')
        {"algorithm": "gemm_col2im", "micro_kernel": "6x2", "isa": "avx512", "tiles": "96x256x1024"},
        {"algorithm": "direct", "micro_kernel": "6x2", "isa": "avx512", "tiles": "96x256x1024"},
    ],
    "window": [
        {"algorithm": "padded", "unroll_kernel": True, "parallel": "rows_16"},
        {"algorithm": "split", "unroll_kernel": True, "parallel": "planes"},
    ],
    "bias_scale_tanh": [
        {"tanh": "exp_poly", "vector_width": 512, "chunk": "131072"},
        {"tanh": "exp_poly", "vector_width": 256, "chunk": "plane"},
    ],
    "residual_layer_norm": [
        {"sum_buffer": "store", "accumulate": "float", "vector_width": 512, "rows_per_task": 8},
        {"sum_buffer": "recompute", "accumulate": "float", "vector_width": 512, "rows_per_task": 1},
    ],
    "mlp": [dict(_GEMM, fusion="epilogue_norm", parallel="grid"), dict(_GEMM, fusion="epilogue", parallel="grid")],
    "attention": [
        {"algorithm": "online", "micro_kernel": "6x2", "isa": "avx512", "tiles": "64x128", "parallel": "bhq"},
        {"algorithm": "two_pass", "micro_kernel": "6x2", "isa": "avx512", "tiles": "32x64", "parallel": "bhq"},
    ],
    "rnn_cell": [dict(_GEMM, fusion="fused", parallel="grid"), dict(_GEMM, fusion="fused", parallel="m")],
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, action="append")
    parser.add_argument("--operator", action="append")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    templates = [t for t in list_templates("cpu") if t.family in set(args.family or FAMILIES)]
    rows, started = [], time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kope-measure-") as tmp:
        for template in templates:
            for operator in template.operators:
                if args.operator and operator not in args.operator:
                    continue
                results = []
                for i, settings in enumerate([template.default_settings(), *TUNED.get(template.name, [])]):
                    full = template.check_settings(settings)
                    path = Path(tmp) / f"{operator}_{i}.py"
                    path.write_text(template.render(operator, full))
                    outcome = evaluate(operator, path, EvalOptions(timing=True, seeds=1))
                    results.append((full, outcome))
                    print(
                        f"  {operator:22} {'default' if i == 0 else f'tuned {i}':8} {outcome.status.value:10} "
                        f"{outcome.speedup or 0:6.2f}x  {' '.join(f'{k}={v}' for k, v in full.items())}",
                        flush=True,
                    )
                default = results[0][1]
                tuned = [(s, o) for s, o in results if o.status.value == "correct" and o.speedup]
                best_settings, best = max(tuned, key=lambda so: so[1].speedup) if tuned else (None, None)
                rows.append(
                    {
                        "template": template.name,
                        "operator": operator,
                        "default_speedup": default.speedup,
                        "default_status": default.status.value,
                        "best_speedup": best.speedup if best else None,
                        "best_settings": best_settings,
                        "best_cases": {c.name: c.speedup for c in best.cases} if best else None,
                    }
                )
    print(
        f"\n{'operator':24} {'default':>9} {'best':>9}  best settings   ({(time.monotonic() - started) / 60:.0f} min)"
    )
    for r in rows:
        d = f"{r['default_speedup']:.2f}x" if r["default_speedup"] else r["default_status"]
        b = f"{r['best_speedup']:.2f}x" if r["best_speedup"] else "-"
        s = " ".join(f"{k}={v}" for k, v in (r["best_settings"] or {}).items())
        print(f"{r['operator']:24} {d:>9} {b:>9}  {s}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
