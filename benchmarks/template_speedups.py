"""Speedup over PyTorch of the elementwise/reduction/normalization templates: default settings vs tuned ones.

For every operator (or those selected), the template's default settings and a
short list of settings an expert would try first (``TRIED`` below: the knobs
that matter most for the family, in the order a person would turn them) are
evaluated with the real harness, timing on; the table shows the default's
speedup, the best correct one and its settings. This is a quick hand-guided
sweep, not an exhaustive search (``check_templates.py --search`` does a greedy
one). Timings on a shared, loaded machine are noisy: the harness interleaves
reference and candidate, which cancels slow drift but not bursts.

    PYTHONPATH=. python benchmarks/template_speedups.py [--family F] [--operator OP[,OP]] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from check_templates import FAMILIES, Runner

from harness.suite.kernel_templates import list_templates

POLY = {"math": "poly"}
TRIED = {
    "pointwise": [
        POLY,
        {**POLY, "vector_width": 512},
        {**POLY, "vector_width": 512, "store": "streaming"},
        {**POLY, "vector_width": 512, "unroll": 4, "block": 65536},
    ],
    "axis_reduce": [
        {"lanes": 16},
        {"lanes": 16, "accumulate": "float"},
        {"lanes": 64, "accumulate": "float", "vector_width": 512},
        {"lanes": 16, "accumulate": "float", "tile": 2048, "prefetch": "on"},
    ],
    "row_logsumexp": [
        POLY,
        {**POLY, "lanes": 16, "split_rows": "few_rows"},
        {**POLY, "lanes": 16, "split_rows": "few_rows", "algorithm": "online"},
        {**POLY, "lanes": 64, "split_rows": "few_rows", "algorithm": "online", "vector_width": 512},
    ],
    "row_softmax": [
        POLY,
        {**POLY, "lanes": 16, "split_rows": "few_rows"},
        {**POLY, "lanes": 16, "split_rows": "few_rows", "algorithm": "online"},
        {**POLY, "lanes": 64, "split_rows": "few_rows", "algorithm": "online", "vector_width": 512},
    ],
    "prefix_scan": [
        {"lanes": 4},
        {"lanes": 8},
        {"lanes": 4, "split_rows": "few_rows"},
        {"lanes": 8, "split_rows": "few_rows", "schedule": "dynamic"},
    ],
    "row_norm": [
        {"lanes": 16},
        {"lanes": 16, "variance": "shifted", "split_rows": "few_rows"},
        {"lanes": 16, "variance": "shifted", "split_rows": "few_rows", "accumulate": "float"},
        {"lanes": 64, "variance": "shifted", "split_rows": "few_rows", "accumulate": "float", "vector_width": 512},
    ],
    "channel_norm": [
        {"affine": "folded"},
        {"affine": "folded", "lanes": 16},
        {"affine": "folded", "lanes": 16, "variance": "shifted", "accumulate": "float"},
        {
            "affine": "folded",
            "lanes": 64,
            "variance": "shifted",
            "accumulate": "float",
            "vector_width": 512,
            "schedule": "dynamic",
        },
    ],
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=FAMILIES)
    parser.add_argument("--operator", help="one operator or a comma-separated list")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.verbose = True
    wanted = set(args.operator.split(",")) if args.operator else None
    started = time.perf_counter()
    results = []
    with tempfile.TemporaryDirectory(prefix="kope-template-speedups-") as tmp:
        runner = Runner(args, Path(tmp))
        for template in list_templates("cpu"):
            if template.name not in TRIED or (args.family and template.family != args.family):
                continue
            for op in template.operators:
                if wanted and op not in wanted:
                    continue
                rows = [
                    runner.evaluate(template, op, template.check_settings(s), True) for s in [{}] + TRIED[template.name]
                ]
                correct = [r for r in rows if r["status"] == "correct" and r["speedup"]]
                best = max(correct, key=lambda r: r["speedup"]) if correct else rows[0]
                results.append({"template": template.name, "operator": op, "default": rows[0], "best": best})
    print(f"\n{'template':14} {'operator':14} {'default':>8} {'best':>8}  best settings")
    for r in results:
        d, b = r["default"]["speedup"], r["best"]["speedup"]
        print(
            f"{r['template']:14} {r['operator']:14} {'-' if d is None else f'{d:.2f}x':>8} "
            f"{'-' if b is None else f'{b:.2f}x':>8}  {r['best']['changed']}"
        )
    bad = [row for row in runner.rows if row["status"] != "correct"]
    print(
        f"\n{len(runner.rows)} timed evaluations, {len(bad)} not correct ({(time.perf_counter() - started) / 60:.1f} min)"
    )
    if args.json:
        args.json.write_text(json.dumps({"results": results, "rows": runner.rows}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
