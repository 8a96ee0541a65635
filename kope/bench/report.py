"""The bench report: ``summary.md`` in the paper's layout and the plots, from results.json alone.

``write_report(folder, data)`` recomputes every metric from the stored pairs
(never trusting a stored ``metrics`` block), so ``kope bench report DIR``
regenerates byte-identical files from the same results.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kope.bench.metrics import LEVEL_KEYS, bench_metrics, pair_views, steps_to_best
from kope.bench.plan import default_baseline
from kope.bench.plots import write_plots
from kope.bench.repeats import for_repeat, repeat_count, repeat_summary
from kope.errors import UsageError

SUMMARY = "summary.md"
PLOTS = "plots"


def pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def count(value: float | int | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def with_metrics(data: Mapping[str, Any], baseline: str | None = None) -> dict[str, Any]:
    """``data`` with its metrics recomputed (against ``baseline``, default the bench's own).

    With repeats, the per-operator metrics, tables and the first plots are repeat 1's (``pairs`` is
    repeat 1's; ``runs`` keeps every pair) and ``repeat_summary`` holds every repeat's metrics with
    their means and 95% intervals."""
    configs = [c["name"] for c in data["configurations"]]
    baseline = baseline or data.get("baseline") or default_baseline(configs)
    if baseline not in configs:
        raise UsageError(f"baseline {baseline!r} is not a configuration of this bench ({', '.join(configs)})")
    first = for_repeat(data, 1)
    metrics = bench_metrics(first, baseline)
    full = {
        **first,
        "runs": list(data["pairs"]),
        "baseline": baseline,
        "metrics": {c: m.to_dict() for c, m in metrics.items()},
        "steps_to_best": steps_to_best(first).to_dict(),
    }
    if repeat_count(data) > 1:
        full["repeat_summary"] = repeat_summary(data, baseline)
    return full


def ci(cell: Mapping[str, Any] | None, fmt: str = ".2f", suffix: str = "") -> str:
    """``mean [low, high]`` of an interval (``repeats.Interval`` as a dict); ``-`` without values."""
    if not cell or cell.get("mean") is None:
        return "-"
    text = f"{format(cell['mean'], fmt)}{suffix}"
    if cell.get("low") is not None:
        text += f" [{format(cell['low'], fmt)}, {format(cell['high'], fmt)}]"
    return text


def repeats_table(data: Mapping[str, Any]) -> str:
    """Configurations as rows: each metric's mean over the complete repeats with its 95% interval."""
    rs = data["repeat_summary"]
    baseline = rs["baseline"]
    head = [
        "configuration",
        "pass rate",
        "geomean speedup",
        f"paired speedup vs {baseline}",
        "steps to 90% (2nd+ operators)",
        f"steps ratio vs {baseline}",
        "reached 90%",
        "tokens / step",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for config in (c["name"] for c in data["configurations"]):
        s = rs["summary"][config]
        pass_rate = s["pass_rate"]
        rate = {**pass_rate, **{k: 100 * pass_rate[k] for k in ("mean", "low", "high") if pass_rate.get(k) is not None}}
        lines.append(
            "| "
            + " | ".join(
                [
                    config,
                    ci(rate, ".1f", "%"),
                    ci(s["geomean_speedup"], ".2f", "x"),
                    "(baseline)" if config == baseline else ci(s.get("paired_speedup"), ".2f", "x"),
                    ci(s["steps_to_90"]),
                    "(baseline)" if config == baseline else ci(s.get("steps_ratio")),
                    ci(s["reached_90"], ".1f"),
                    ci(s["tokens_per_step"], ",.0f"),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def family_table(data: Mapping[str, Any]) -> str:
    """Per family: steps to 90% of the best on its 2nd and later operators, and the paired speedup."""
    rs = data["repeat_summary"]
    baseline = rs["baseline"]
    configs = [c["name"] for c in data["configurations"]]
    others = [c for c in configs if c != baseline]
    head = ["family", "operators (2nd+)"] + [f"steps: {c}" for c in configs] + [f"paired: {c}" for c in others]
    head += [f"severe: {c}" for c in configs]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    later = data["steps_to_best"]["per_operator"]
    for family, cells in rs["families"].items():
        n = sum(1 for r in later if r["family"] == family and r["later"])
        row = [family, str(n)] + [ci(cells[c]["steps_to_90"]) for c in configs]
        row += [ci(cells[c].get("paired_speedup"), ".2f", "x") for c in others]
        row += [ci(cells[c].get("severe")) for c in configs]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def has_final(data: Mapping[str, Any]) -> bool:
    """Whether any pair was judged by a final evaluation (then the tables show held-out columns)."""
    return any(p.get("final") for p in data["pairs"])


def has_deployed(data: Mapping[str, Any]) -> bool:
    """Whether any final evaluation timed its kernel as deployed (then the tables show the as-deployed speedup)."""
    return any(
        case.get("deployed_speedup") is not None
        for p in data["pairs"]
        for case in ((p.get("final") or {}).get("outcome") or {}).get("cases") or []
    )


def summary_table(data: Mapping[str, Any]) -> str:
    """Configurations as rows, the paper's columns (plus held-out columns after a final evaluation, and the
    as-deployed speedup beside the harness's when the final evaluations measured it)."""
    baseline = data["baseline"]
    final = has_final(data)
    deployed = has_deployed(data)
    head = [
        "configuration",
        "operators passed",
        "cases passed",
        "pass rate",
        "L1",
        "L2",
        "L3",
        "L4",
        *(["held-out passed", "held-out pass rate"] if final else []),
        *(["as-deployed geomean speedup", "geomean speedup (harness)"] if deployed else ["geomean speedup"]),
        f"paired speedup vs {baseline}",
        "tokens",
        "tokens / step",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for config in data["configurations"]:
        m = data["metrics"][config["name"]]
        levels = [pct(m["levels"][k]["pass_rate"]) if k in m["levels"] else "-" for k in LEVEL_KEYS]
        paired = m.get("paired")
        if config["name"] == baseline:
            paired_cell = "(baseline)"
        elif paired is None or paired["n"] == 0:
            paired_cell = "- (no common timed case)"
        else:
            paired_cell = f"{times(paired['speedup'])} (n={paired['n']})"
        speed = times(m["geomean_speedup"]) + (f" (n={m['speedup_cases']})" if m["speedup_cases"] else "")
        row = [
            config["name"],
            f"{m['operators_passed']}/{m['operators']}",
            f"{m['cases_passed']}/{m['cases']}",
            pct(m["pass_rate"]),
            *levels,
            *([f"{m['heldout_cases_passed']}/{m['heldout_cases']}", pct(m["heldout_pass_rate"])] if final else []),
            *([_deployed_cell(m)] if deployed else []),
            speed,
            paired_cell,
            count(m["tokens"]),
            count(m["tokens_per_step"]),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def _deployed_cell(m: Mapping[str, Any]) -> str:
    n = m.get("deployed_speedup_cases") or 0
    return times(m.get("deployed_geomean_speedup")) + (f" (n={n})" if n else "")


def operator_table(data: Mapping[str, Any]) -> str:
    configs = [c["name"] for c in data["configurations"]]
    lines = ["| operator | family | level | cases | " + " | ".join(configs) + " |", "|" + "---|" * (4 + len(configs))]
    per = {c: {v.operator: v for v in pair_views(data, c)} for c in configs}
    for op in data["operators"]:
        cells = []
        for config in configs:
            view = per[config][op["operator"]]
            if view.missing:
                cells.append("missing")
                continue
            speeds = data["metrics"][config]["per_operator"]
            mine = next(p for p in speeds if p["operator"] == op["operator"])
            speed = times(mine["geomean_speedup"])
            if view.deployed_speedups:  # the as-deployed figure first: what a user of best.py gets
                speed = f"{times(mine.get('deployed_geomean_speedup'))} as deployed ({speed} harness)"
            held = f" · held-out {view.heldout_passed}/{view.heldout_cases}" if view.final else ""
            flag = " · **wrong on held-out**" if view.overfit else ""
            cells.append(f"{view.passed}/{len(view.cases)}{held} · {speed} · step {view.best_step}{flag}")
        level = f"L{op['level']}" if op.get("level") else "?"
        lines.append(
            f"| {op['operator']} | {op['family']} | {level} | {len(op['cases'])} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def steps_table(data: Mapping[str, Any]) -> str:
    """Steps to reach 90% of the best speedup, for the second and later operators of each family."""
    stb = data["steps_to_best"]
    configs = [c["name"] for c in data["configurations"]]
    later = [r for r in stb["per_operator"] if r["later"]]
    if not later:
        return ""
    lines = ["| operator | family | best speedup | " + " | ".join(configs) + " |", "|" + "---|" * (3 + len(configs))]
    for row in later:
        cells = ["-" if row["steps"][c] is None else str(row["steps"][c]) for c in configs]
        lines.append(f"| {row['operator']} | {row['family']} | {times(row['best'])} | " + " | ".join(cells) + " |")
    means = []
    for config in configs:
        s = stb["summary"][config]
        mean = "-" if s["mean_steps"] is None else f"{s['mean_steps']:.2f}"
        means.append(f"{mean} ({s['reached']}/{s['operators']} reached)")
    lines.append("| **mean** | | | " + " | ".join(means) + " |")
    return "\n".join(lines)


def roofline_table(data: Mapping[str, Any]) -> str:
    """Per case of every final evaluation: the physical lower bound, the measured time and the fraction of roofline."""
    lines = [
        "| configuration | operator | case | held-out | least bytes | FLOPs | bound ms | measured ms | fraction of roofline |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    rows = 0
    for pair in data["pairs"]:
        for case in ((pair.get("final") or {}).get("outcome") or {}).get("cases") or []:
            if case.get("bound_ms") is None:
                continue
            measured = (case.get("cand_ms") or {}).get("median")
            fraction = case.get("roofline_fraction")
            lines.append(
                f"| {pair['config']} | {pair['operator']} | {case['name']} | {'yes' if case.get('heldout') else ''} | "
                f"{count(case.get('min_bytes'))} | {count(case.get('flops'))} | {case['bound_ms']:.4g} | "
                f"{'-' if measured is None else f'{measured:.4g}'} | {'-' if fraction is None else f'{fraction:.3f}'} |"
            )
            rows += 1
    return "\n".join(lines) if rows else ""


def runs_table(data: Mapping[str, Any]) -> str:
    lines = [
        "| configuration | operator | run | attempts | status | stop reason | overlapped with |",
        "|---|---|---|---|---|---|---|",
    ]
    for pair in data.get("runs", data["pairs"]):
        reason = (pair.get("stop_reason") or "").replace("|", "/").replace("\n", " ")
        if len(reason) > 120:
            reason = reason[:117] + "..."
        config = pair["config"] + (f" (r{pair['repeat']})" if int(pair.get("repeat", 1)) > 1 else "")
        lines.append(
            f"| {config} | {pair['operator']} | `{pair['run_id']}` | {len(pair.get('attempts') or [])} | "
            f"{pair['status']} | {reason} | {', '.join(pair.get('overlapped_with') or []) or '-'} |"
        )
    return "\n".join(lines)


def _suite_line(data: Mapping[str, Any]) -> str:
    opts = data["options"]
    hw = data.get("hardware") or {}
    cases = sum(len(o["cases"]) for o in data["operators"])
    levels = ",".join(str(x) for x in opts.get("levels") or []) or "all"
    model = f" ({opts['model']})" if opts.get("model") else ""
    return (
        f"Suite `{opts['suite']}` (levels {levels}{', family ' + opts['family'] if opts.get('family') else ''}"
        f"{', cases ' + opts['cases'] if opts.get('cases') else ''}): {len(data['operators'])} operators, "
        f"{cases} cases. Target `{opts['target']}` on {hw.get('cpu_model') or hw.get('id') or 'unknown hardware'} "
        f"(`{hw.get('class', '?')}`, {hw.get('cores', '?')} cores). Proposer `{opts['proposer']}`{model}, "
        f"{opts['steps']} step(s) per run, {opts.get('workers', 1)} worker(s)."
    )


def final_note(data: Mapping[str, Any]) -> list[str]:
    """Where the numbers come from: the final evaluation (settings, coverage) and the kernels it caught."""
    finals = [p["final"] for p in data["pairs"] if p.get("final")]
    if not finals:
        return ["Numbers are from the in-loop evaluations (no final evaluation: `--no-final`).", ""]
    settings = finals[0].get("settings") or {}
    judged = sum(data["metrics"][c["name"]]["final_evaluated"] for c in data["configurations"])
    lines = [
        f"Numbers are from the final evaluation: each pair's best kernel re-evaluated in fresh workers with "
        f"{settings.get('seeds', '?')} seeds and {settings.get('rep_ms', '?'):g} ms of timing per implementation "
        f"and case, on the selected visible cases and every held-out case (cases no prompt, template or "
        f"proposer saw); {judged} of {len(data['pairs'])} finished pairs had one. Speedups are over the visible "
        "cases; held-out columns count the held-out cases.",
        "",
    ]
    if has_deployed(data):
        lines += [
            "As deployed: each final kernel was also timed the same way (same cases, interleaved with the reference, "
            "same statistic) with its file imported as a user imports `best.py`, in plain processes with the user's "
            "own thread and OpenMP settings, none forced by the harness; the harness's own figure (its workers run "
            "with a fixed thread count and `OMP_WAIT_POLICY=PASSIVE`) is beside it.",
            "",
        ]
    overfit = [
        f"`{c['name']}` · `{op}`"
        for c in data["configurations"]
        for op in data["metrics"][c["name"]]["overfit_operators"]
    ]
    if overfit:
        lines += [
            "Correct on every visible case but wrong on held-out cases (e.g. hard-coded to the visible shapes): "
            + ", ".join(overfit)
            + ".",
            "",
        ]
    return lines


def render_markdown(data: Mapping[str, Any]) -> str:
    done = len(data.get("runs", data["pairs"]))
    total = data.get("pairs_total", done)
    status = "complete" if data.get("complete") else f"**incomplete: {done} of {total} pairs finished**"
    commands = [data["command"], *(r["command"] for r in data.get("resumes") or [])]
    lines = [
        f"# kope bench: {data['options']['name']}",
        "",
        "```\n" + "\n".join(commands) + "\n```",
        "",
        _suite_line(data),
        f"Started {data['created_at']}; {status}.",
        "",
    ]
    if data.get("imports"):
        files = sorted({i["file"] for i in data["imports"]})
        lines += [f"Memory imported into every configuration before the run: {', '.join(f'`{f}`' for f in files)}.", ""]
    repeats = data.get("repeat_summary")
    if repeats:
        n = len(repeats["complete"])
        lines += [
            f"## {repeats['repeats']} independent repeats ({n} complete)",
            "",
            "Each repeat is the whole bench in fresh namespaces with proposer seed k - 1. Cells: mean over the "
            "complete repeats [95% confidence interval, Student's t over the repeats]; speedups and ratios are "
            "geometric means. Steps to 90%: the second and later operators of each family that some "
            "configuration solved, a miss counted as budget + 1; steps ratio: per repeat, the configuration's mean "
            f"steps over {repeats['baseline']}'s.",
            "",
            repeats_table(data),
            "",
            "### Per family",
            "",
            family_table(data),
            "",
            "![steps to 90% per family](plots/repeats_steps.png)",
            "",
            "![paired speedup per family](plots/repeats_paired.png)",
            "",
            "![fraction of the optimum reached after each step, per family](plots/repeats_curve.png)",
            "",
            "## Repeat 1",
            "",
            "The tables and plots below are repeat 1's (every repeat's numbers are in results.json under "
            "`repeat_summary.per_repeat`).",
            "",
        ]
    lines += [summary_table(data), ""]
    lines += final_note(data)
    lines += [
        "Configurations: "
        + "; ".join(
            f"`{c['name']}` = {c['description']} (namespace `{c['namespace']}`)" for c in data["configurations"]
        )
        + ".",
        "",
    ]
    if data["options"].get("proposer") == "offline":
        lines += [
            "Tokens: the offline proposer calls no LLM; its tokens are the context tokens the loop "
            "assembled for each step (what an LLM would have been sent, recorded as prompt tokens); "
            "completion tokens are 0.",
            "",
        ]
    overlapped = sum(1 for p in data["pairs"] if p.get("overlapped_with"))
    if overlapped:
        lines += [
            f"{overlapped} pair(s) ran while another operator of the same configuration was running "
            "(--workers): they could not see that operator's experience.",
            "",
        ]
    lines += [
        "## Per operator",
        "",
        "Best attempt per configuration: cases passed · geometric-mean speedup of its passing cases · step.",
        "",
        operator_table(data),
        "",
    ]
    steps = steps_table(data)
    if steps:
        pct_bar = f"{100 * data['steps_to_best']['fraction']:.0f}%"
        lines += [
            f"## Steps to {pct_bar} of the best speedup",
            "",
            f"For the second and later operators of each family (where earlier operators' experience can "
            f"help; in-loop speedups, step by step): the step at which each configuration's first correct attempt reached {pct_bar} of the best "
            f"speedup any configuration found for that operator; - = never within the budget. The mean is over the "
            f"operators some configuration got correct and counts a miss as budget + 1 = "
            f"{data['steps_to_best']['budget'] + 1} steps.",
            "",
            steps,
            "",
        ]
    lines += [
        "## Plots",
        "",
        f"![pass rate per configuration and level]({PLOTS}/pass_rate.png)",
        "",
        f"![per-case speedup per level, log axis]({PLOTS}/speedup.png)",
        "",
        f"![tokens per step]({PLOTS}/tokens_per_step.png)",
        "",
        f"![memory growth]({PLOTS}/memory_growth.png)",
        "",
    ]
    lines += [
        "## Definitions",
        "",
        "- Each (configuration, operator) is judged by its best attempt: most passing cases, then highest "
        "speedup, then earliest step; its per-case results are what counts (those of its final evaluation "
        "when it had one: fresh workers, more seeds, longer timing, visible and held-out cases).",
        "- Held-out passed: passing held-out cases of the final evaluations over all their held-out cases; "
        "held-out cases are never shown to a proposer, so a kernel tuned to the visible shapes fails them.",
        "- Operators passed: best attempt passes at least one case. Cases passed / cases: over every selected "
        "case of every operator; a missing operator (no finished run, or no attempt) counts all its cases as "
        "failures. Pass rate = cases passed / cases; L1-L4: the same per KernelBench level.",
        "- Geomean speedup: geometric mean of the per-case speedups (T_ref / T_cand) of the best attempts' "
        "passing cases, positive values only; n = how many.",
        f"- Paired speedup vs `{data['baseline']}` (without/with): on the exact intersection of cases both "
        "configurations timed, the geometric mean of speedup_with / speedup_without (= T_without / T_with); "
        "> 1 means the row's configuration found faster kernels; n = the intersection's size.",
        "- Tokens: prompt + completion tokens of every recorded attempt; per step = tokens / attempts.",
        "",
    ]
    roof = roofline_table(data)
    if roof:
        lines += [
            "## Fraction of roofline (final evaluation)",
            "",
            "Per timed case: the least bytes moved (inputs, parameters, outputs) and FLOPs of the reference, the "
            "lower bound on time they give with this machine's measured peak bandwidth and FLOP/s (the bandwidth "
            "term only beyond twice the last-level cache; `-` when neither applies), the measured median and "
            "bound / measured (1.0 = at the measured peak; above 1.5 the harness reports "
            "`cheat_detected:faster_than_hardware`).",
            "",
            roof,
            "",
        ]
    lines += ["## Runs", "", runs_table(data), ""]
    return "\n".join(lines)


def write_report(folder: Path, data: Mapping[str, Any], baseline: str | None = None) -> list[Path]:
    """summary.md and the plots in ``folder`` (metrics recomputed from ``data``'s pairs)."""
    folder = Path(folder)
    full = with_metrics(data, baseline)
    summary = folder / SUMMARY
    summary.write_text(render_markdown(full), encoding="utf-8")
    return [summary, *write_plots(full, folder / PLOTS)]
