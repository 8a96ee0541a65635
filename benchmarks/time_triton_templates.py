"""Time the Triton templates' candidates against PyTorch on an NVIDIA GPU (run by scripts/gpu_check.sh).

For every Triton template and operator it serves, the default settings (and, with ``--all-values``, every
knob value in turn) are rendered and evaluated by the harness with ``--target triton`` on the GPU, timing
on (CUDA events; the harness interleaves reference and candidate). Without a GPU it refuses (exit 2): the
interpreter's timings mean nothing.

    PYTHONPATH=$PWD python benchmarks/time_triton_templates.py [--operator OP ...] [--cases 0-2] [--all-values]
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.suite.kernel_templates import list_templates
from harness.timing import Budget


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operator", action="append")
    parser.add_argument("--cases", default="0-2", help="cases per operator (harness selection; default 0-2)")
    parser.add_argument("--all-values", action="store_true", help="also every knob value (others at defaults)")
    parser.add_argument("--rep-ms", type=float, default=100.0)
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("error: no NVIDIA GPU visible to torch; Triton templates can only be timed on a GPU", file=sys.stderr)
        return 2
    failures, speedups = 0, []
    with tempfile.TemporaryDirectory(prefix="kope-triton-time-") as tmp:
        for template in list_templates("triton"):
            for operator in template.operators:
                if args.operator and operator not in args.operator:
                    continue
                settings_list = [{}]
                if args.all_values:
                    settings_list += [{k.name: v} for k in template.knobs for v in k.values if v != k.default]
                for n, settings in enumerate(settings_list):
                    full = template.check_settings(settings)
                    path = Path(tmp) / f"{operator}_{n}.py"
                    path.write_text(template.render(operator, full))
                    options = EvalOptions(
                        target="triton", cases=args.cases, seeds=1, budget=Budget(warmup_ms=25, rep_ms=args.rep_ms)
                    )
                    outcome = evaluate(operator, path, options)
                    ok = outcome.status.value == "correct"
                    failures += not ok
                    if ok and outcome.speedup:
                        speedups.append(outcome.speedup)
                    cases = "  ".join(
                        f"{c.name} {c.cand_ms.median:.3f} ms vs {c.ref_ms.median:.3f} ms"
                        for c in outcome.cases
                        if c.cand_ms and c.ref_ms
                    )
                    knobs = " ".join(f"{k}={v}" for k, v in full.items())
                    print(
                        f"{template.name:14} {operator:20} {outcome.status.value:10} "
                        f"{(outcome.speedup or 0):6.2f}x  {knobs}  [{cases}]",
                        flush=True,
                    )
    if speedups:
        geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
        print(f"\n{len(speedups)} timed candidates, geomean speedup over PyTorch {geo:.2f}x, {failures} not correct")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
