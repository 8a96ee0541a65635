"""A markdown table of a folder of recorded spaces (not a test): per (operator, template) its design, how many
settings of its grid were measured, the defaults' speedup, the optimum with the knobs that differ from the
defaults, and how many settings lie within 90 % of the optimum (what "steps to 90 %" has to find).

    python benchmarks/space_table.py benchmarks/spaces-r2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from replay_bounds import speed  # a setting's speedup, 0 when not correct (this folder is on sys.path as a script)

from kope.memory.effects import shipped_template_knobs


def row(path: Path) -> tuple[str, str] | None:
    space = json.loads(path.read_text())
    settings = space["settings"]
    if not settings:
        return None
    knobs = shipped_template_knobs(space["template"], space.get("target", "cpu"))
    defaults = dict(knobs.defaults) if knobs else settings[0]["settings"]
    best = max(settings, key=speed)
    optimum = speed(best)
    at_defaults = [speed(e) for e in settings if e["settings"] == defaults]
    differs = ", ".join(f"{k}={v}" for k, v in best["settings"].items() if defaults.get(k) != v) or "the defaults"
    near = sum(speed(e) >= 0.9 * optimum for e in settings)
    correct = sum(e["outcome"]["status"] == "correct" for e in settings)
    design = space["design"]
    cells = [
        space["operator"],
        space["family"],
        space["template"],
        design["kind"],
        f"{len(settings)} of {design.get('grid_size', '?')} ({correct} correct)",
        f"{at_defaults[0]:.2f}x" if at_defaults else "not measured",
        f"{optimum:.2f}x ({differs})",
        str(near),
    ]
    return space["family"], "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    paths = sorted(args.folder.glob("*.space.json"))
    if not paths:
        print(f"error: no *.space.json in {args.folder}", file=sys.stderr)
        return 2
    rows = sorted(r for r in map(row, paths) if r is not None)
    print("| operator | family | template | design | settings | defaults | optimum (knobs that differ) | within 90 % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for _, line in rows:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
