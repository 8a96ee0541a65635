"""Render the cpu kernel templates and evaluate the candidates with the real harness.

Which settings, per template (each evaluated on every operator it serves):

* default: a covering set: the default settings first, then settings chosen
  greedily until every value of every knob and every pair of values of any two
  knobs has appeared in at least one of them (pairwise coverage);
* ``--all-combinations``: every combination of knob values;
* ``--defaults``: only the default settings;
* ``--settings '{"math": "poly"}'``: these settings (the rest default); repeat the option for several
  settings (``--settings '{}'`` is the defaults);
* ``--search``: (implies ``--time``) a greedy search per operator: from the
  defaults, try every other value of one knob at a time, keep the best
  correct setting, repeat while it improves; reports default vs best.

Each evaluation is ``harness.evaluate`` (isolated workers, every case, static and
run-time anti-cheat checks) with timing off unless ``--time``; the table shows
status, cases passed, speedup over PyTorch (timed runs) and seconds. The exit
status is 1 when any candidate is not correct. Timings on a shared machine are
noisy: read speedups as rough.

    PYTHONPATH=. python benchmarks/check_templates.py [--family F] [--template T] [--operator OP[,OP]]
        [--all-combinations | --defaults | --settings JSON | --search] [--time] [--seeds N] [--json PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_task
from harness.suite.kernel_templates import KernelTemplate, TemplateError, list_templates

FAMILIES = ("elementwise", "reduction", "normalization")


def covering_settings(template: KernelTemplate) -> list[dict]:
    """Defaults first, then greedy picks until every value and every pair of values of two knobs is covered."""
    knobs = template.knobs
    sizes = [len(k.values) for k in knobs]
    combos = list(itertools.product(*[range(n) for n in sizes]))
    default = tuple(k.values.index(k.default) for k in knobs)

    def items(combo: tuple) -> set:
        singles = {(i, combo[i]) for i in range(len(combo))}
        pairs = {(i, combo[i], j, combo[j]) for i, j in itertools.combinations(range(len(combo)), 2)}
        return singles | pairs

    uncovered = set().union(*(items(c) for c in combos)) - items(default)
    chosen = [default]
    while uncovered:
        best = max(combos, key=lambda c: len(items(c) & uncovered))
        chosen.append(best)
        uncovered -= items(best)
    return [{k.name: k.values[i] for k, i in zip(knobs, combo)} for combo in chosen]


def all_settings(template: KernelTemplate) -> list[dict]:
    names = [k.name for k in template.knobs]
    return [dict(zip(names, values)) for values in itertools.product(*[k.values for k in template.knobs])]


def short(template: KernelTemplate, settings: dict) -> str:
    """The settings that differ from the defaults, as k=v (or 'defaults')."""
    changed = [f"{k}={v}" for k, v in settings.items() if template.knob(k).default != v]
    return " ".join(changed) or "defaults"


class Runner:
    def __init__(self, args: argparse.Namespace, folder: Path) -> None:
        self.args, self.folder = args, folder
        self.rows: list[dict] = []

    def evaluate(self, template: KernelTemplate, operator: str, settings: dict, timing: bool) -> dict:
        source = template.render(operator, settings)
        digest = hashlib.sha256(source.encode()).hexdigest()[:10]
        path = self.folder / f"{template.name}_{operator}_{digest}.py"
        path.write_text(source)
        started = time.perf_counter()
        outcome = evaluate(operator, path, EvalOptions(timing=timing, seeds=self.args.seeds))
        seconds = time.perf_counter() - started
        row = {
            "template": template.name,
            "operator": operator,
            "settings": settings,
            "changed": short(template, settings),
            "status": outcome.status.value,
            "cases_passed": outcome.cases_passed,
            "cases_total": outcome.cases_total,
            "speedup": outcome.speedup,
            "error_kind": outcome.error_kind,
            "seconds": round(seconds, 1),
            "candidate": str(path),
            "case_speedups": {c.name: (None if c.speedup is None else round(c.speedup, 3)) for c in outcome.cases},
        }
        if outcome.status.value != "correct":
            row["error_excerpt"] = outcome.error_excerpt
        self.rows.append(row)
        speed = "-" if outcome.speedup is None else f"{outcome.speedup:.2f}x"
        print(
            f"{template.name:14} {operator:14} {row['status']:15} {outcome.cases_passed:>2}/{outcome.cases_total:<2} "
            f"{speed:>7} {seconds:6.1f}s  {row['changed']}",
            flush=True,
        )
        if timing and self.args.verbose:
            print(
                "    " + "  ".join(f"{k} {'-' if v is None else f'{v:.2f}x'}" for k, v in row["case_speedups"].items()),
                flush=True,
            )
        if outcome.status.value != "correct":
            print(
                f"    {outcome.error_kind}: {(outcome.error_excerpt or '')[:600]}\n    candidate kept at {path}",
                flush=True,
            )
        return row

    def search(self, template: KernelTemplate, operator: str) -> tuple[dict, dict]:
        """Greedy one-knob-at-a-time search from the defaults; returns (default row, best row)."""
        best_settings = template.default_settings()
        best = default = self.evaluate(template, operator, best_settings, True)
        tried = {json.dumps(best_settings, sort_keys=True)}
        improved = True
        while improved:
            improved = False
            base = dict(best_settings)
            for knob in template.knobs:
                for value in knob.values:
                    trial = {**base, knob.name: value}
                    key = json.dumps(trial, sort_keys=True)
                    if key in tried:
                        continue
                    tried.add(key)
                    row = self.evaluate(template, operator, trial, True)
                    if row["status"] == "correct" and (row["speedup"] or 0) > (best["speedup"] or 0):
                        best, best_settings, improved = row, trial, True
        return default, best


def selected(args: argparse.Namespace) -> list[tuple[KernelTemplate, list[str]]]:
    chosen = []
    wanted_ops = set(args.operator.split(",")) if args.operator else None
    for template in list_templates("cpu"):
        if template.family not in FAMILIES or (args.family and template.family != args.family):
            continue
        if args.template and template.name != args.template:
            continue
        ops = [op for op in template.operators if wanted_ops is None or op in wanted_ops]
        if ops:
            chosen.append((template, ops))
    if not chosen:
        raise SystemExit("error: no template matches the given --family/--template/--operator")
    if wanted_ops:
        for op in wanted_ops:
            find_task(op)  # an unknown operator name is an error with suggestions
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=FAMILIES)
    parser.add_argument("--template")
    parser.add_argument("--operator", help="one operator or a comma-separated list")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--all-combinations", action="store_true")
    mode.add_argument("--defaults", action="store_true")
    mode.add_argument("--settings", action="append", help="JSON object of knob settings (the rest default); repeatable")
    mode.add_argument("--search", action="store_true", help="greedy search per operator with timing; default vs best")
    parser.add_argument("--time", action="store_true", help="time the candidates (speedup over the PyTorch reference)")
    parser.add_argument("--seeds", type=int, default=1, help="correctness trials per case (default 1)")
    parser.add_argument("--verbose", action="store_true", help="with --time: print every case's speedup")
    parser.add_argument("--json", type=Path, help="write every evaluation's row to this file")
    args = parser.parse_args()

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kope-templates-") as tmp:
        runner = Runner(args, Path(tmp))
        summary = []
        for template, operators in selected(args):
            if args.search:
                for op in operators:
                    summary.append(runner.search(template, op))
                continue
            if args.settings:
                try:
                    settings_list = [template.check_settings(json.loads(text)) for text in args.settings]
                except (TemplateError, json.JSONDecodeError) as exc:
                    raise SystemExit(f"error: --settings for template {template.name}: {exc}") from None
            elif args.defaults:
                settings_list = [template.default_settings()]
            elif args.all_combinations:
                settings_list = all_settings(template)
            else:
                settings_list = covering_settings(template)
            for op in operators:
                for settings in settings_list:
                    runner.evaluate(template, op, settings, args.time)
        bad = [r for r in runner.rows if r["status"] != "correct"]
        for r in bad:  # failing candidates stay readable after the temporary folder is gone
            r["source"] = Path(r["candidate"]).read_text()
    if args.json:
        args.json.write_text(
            json.dumps({"rows": runner.rows, "search": [{"default": d, "best": b} for d, b in summary]}, indent=1)
        )
    if args.time and not summary:  # default vs best among the evaluated settings, per operator
        for op in dict.fromkeys(r["operator"] for r in runner.rows):
            rows = [r for r in runner.rows if r["operator"] == op]
            default = next((r for r in rows if r["changed"] == "defaults"), rows[0])
            best = max(
                (r for r in rows if r["status"] == "correct" and r["speedup"]),
                key=lambda r: r["speedup"],
                default=default,
            )
            summary.append((default, best))
    if summary:
        print(f"\n{'operator':14} {'default':>8} {'best':>8}  best settings")
        for d, b in summary:
            ds = "-" if d["speedup"] is None else f"{d['speedup']:.2f}x"
            bs = "-" if b["speedup"] is None else f"{b['speedup']:.2f}x"
            print(f"{d['operator']:14} {ds:>8} {bs:>8}  {b['changed']}")
    minutes = (time.perf_counter() - started) / 60
    print(
        f"\n{len(runner.rows)} evaluations, {len(runner.rows) - len(bad)} correct, {len(bad)} not correct "
        f"({minutes:.1f} min, seeds per case: {args.seeds})"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
