"""The bench's plots (matplotlib, PNG), drawn from results.json alone.

* ``pass_rate.png``: pass rate per configuration and level (and over all levels; held-out cases after a
  final evaluation);
* ``speedup.png``: per-case speedups of the best attempts per level and configuration,
  log axis, parity (1x) marked;
* ``tokens_per_step.png``: mean tokens per step index (active vs passive stand out);
* ``memory_growth.png``: decisions and nodes in each configuration's namespace as the bench went on;
* with ``--repeats`` (over the complete repeats, mean with 95% interval bars):
  ``repeats_steps.png`` steps to 90% of the best per family and overall, and
  ``repeats_paired.png`` paired speedup against the baseline per family and overall, and
  ``repeats_curve.png`` the fraction of the optimum reached after each step, one panel per family, each
  configuration's mean with its 95% band.

With repeats, the first four plots show repeat 1 (the report says so).

Figures are drawn without pyplot (no global state, no display) with fixed sizes,
fonts and a seeded jitter, so the same results.json gives the same files.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kope.bench.metrics import memory_series, pair_views, tokens_by_step

COLOURS = {"active": "#1b9e77", "passive": "#d95f02", "none": "#7570b3", "no-memory": "#e7298a"}
MARKERS = {"active": "o", "passive": "s", "none": "^", "no-memory": "D"}
STYLES = {"active": "-", "passive": "-", "none": "--", "no-memory": ":"}
PNG_METADATA = {"Software": "kope bench"}


def _figure(width: float = 8.0, height: float = 4.5) -> Any:  # a matplotlib Figure (matplotlib is imported lazily)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata=PNG_METADATA)
    return path


def _integer_x(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _configs(data: Mapping[str, Any]) -> list[str]:
    return [c["name"] for c in data["configurations"]]


def _levels(data: Mapping[str, Any]) -> list[str]:
    present = {str(o.get("level")) if o.get("level") in (1, 2, 3, 4) else "unknown" for o in data["operators"]}
    return [k for k in ("1", "2", "3", "4", "unknown") if k in present]


def _label(level: str) -> str:
    return f"L{level}" if level != "unknown" else "L?"


def pass_rate_plot(data: Mapping[str, Any], path: Path) -> Path:
    configs, levels = _configs(data), _levels(data)
    heldout = any(data["metrics"][c].get("heldout_cases") for c in configs)  # after a final evaluation
    groups = levels + ["all"] + (["held-out"] if heldout else [])
    fig = _figure()
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(configs))
    for i, config in enumerate(configs):
        metrics = data["metrics"][config]
        values = []
        for group in groups:
            if group == "held-out":
                rate = metrics.get("heldout_pass_rate")
            else:
                rate = metrics["pass_rate"] if group == "all" else metrics["levels"].get(group, {}).get("pass_rate")
            values.append(100.0 * rate if rate is not None else 0.0)
        xs = [g + (i - (len(configs) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, values, width, label=config, color=COLOURS.get(config))
        ax.bar_label(bars, labels=[f"{v:.0f}%" for v in values], fontsize=7, padding=1)
    ax.set_xticks(range(len(groups)), [g if g in ("all", "held-out") else _label(g) for g in groups])
    ax.set_ylim(0, 110)
    ax.set_ylabel("cases passed (%)")
    ax.set_title("pass rate per configuration and level")
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, path)


def speedup_plot(data: Mapping[str, Any], path: Path) -> Path:
    configs, levels = _configs(data), _levels(data)
    fig = _figure()
    ax = fig.add_subplot()
    rng = random.Random(0)
    width = 0.8 / max(1, len(configs))
    plotted = False
    for i, config in enumerate(configs):
        by_level: dict[str, list[float]] = {}
        for view in pair_views(data, config):
            by_level.setdefault(view.level, []).extend(view.speedups)
        for g, level in enumerate(levels):
            values = by_level.get(level) or []
            if not values:
                continue
            x = g + (i - (len(configs) - 1) / 2) * width
            colour = COLOURS.get(config)
            ax.boxplot(
                [values],
                positions=[x],
                widths=width * 0.8,
                showfliers=False,
                medianprops={"color": colour},
                boxprops={"color": colour},
                whiskerprops={"color": colour},
                capprops={"color": colour},
            )
            ax.scatter(
                [x + rng.uniform(-width / 4, width / 4) for _ in values],
                values,
                s=10,
                alpha=0.7,
                color=colour,
                label=config if g == min(j for j, lv in enumerate(levels) if by_level.get(lv)) else None,
            )
            plotted = True
    from matplotlib.ticker import LogLocator, ScalarFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="parity (1x)")
    ax.set_xticks(range(len(levels)), [_label(lv) for lv in levels])
    ax.set_xlim(-0.6, len(levels) - 0.4)
    ax.set_ylabel("speedup T_ref / T_cand (log)")
    ax.set_title("per-case speedup of the best attempts")
    if not plotted:
        ax.text(0.5, 0.5, "no passing, timed case", transform=ax.transAxes, ha="center", va="center")
        ax.set_ylim(0.1, 10)
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, path)


def tokens_plot(data: Mapping[str, Any], path: Path) -> Path:
    fig = _figure()
    ax = fig.add_subplot()
    drawn = False
    for config in _configs(data):
        series = tokens_by_step(data, config)
        if not series:
            continue
        main = config in ("active", "passive")
        ax.plot(
            list(series),
            list(series.values()),
            marker=MARKERS.get(config, "o"),
            markersize=5,
            label=config,
            color=COLOURS.get(config),
            linewidth=2.2 if main else 1.0,
            linestyle="-" if main else "--",
        )
        drawn = True
    _integer_x(ax)
    ax.set_xlabel("step")
    ax.set_ylabel("tokens per step (mean over operators)")
    ax.set_title(
        "tokens per step"
        + (" (offline proposer: context tokens)" if data["options"].get("proposer") == "offline" else "")
    )
    ax.set_ylim(bottom=0)
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no attempt recorded", transform=ax.transAxes, ha="center", va="center")
    return _save(fig, path)


def memory_plot(data: Mapping[str, Any], path: Path) -> Path:
    fig = _figure(9.0, 4.0)
    left, right = fig.subplots(1, 2)
    for config in _configs(data):
        series = memory_series(data, config)
        if not series:
            continue
        xs = list(range(len(series)))
        colour = COLOURS.get(config)
        style = {
            "marker": MARKERS.get(config, "o"),
            "markersize": 4,
            "linestyle": STYLES.get(config, "-"),
            "label": config,
            "color": colour,
        }
        left.plot(xs, [s["decisions"] for s in series], **style)
        right.plot(xs, [s["nodes"] for s in series], **style)
    for ax, what in ((left, "decisions"), (right, "nodes")):
        _integer_x(ax)
        ax.yaxis.get_major_locator().set_params(integer=True)
        ax.set_xlabel("operators finished")
        ax.set_ylabel(f"{what} in the namespace")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.suptitle("memory growth per configuration")
    return _save(fig, path)


def _interval_bars(ax: Any, groups: list[str], cells: dict[str, list[Any]], configs: list[str]) -> None:
    """Bars of interval means with 95% error bars; ``cells[config][i]`` is the Interval dict of group i."""
    width = 0.8 / max(1, len(configs))
    for i, config in enumerate(configs):
        xs, means, lows, highs = [], [], [], []
        for g, cell in enumerate(cells[config]):
            if cell is None or cell["mean"] is None:
                continue
            xs.append(g + (i - (len(configs) - 1) / 2) * width)
            means.append(cell["mean"])
            lows.append(cell["mean"] - (cell["low"] if cell["low"] is not None else cell["mean"]))
            highs.append((cell["high"] if cell["high"] is not None else cell["mean"]) - cell["mean"])
        bars = ax.bar(xs, means, width, label=config, color=COLOURS.get(config))
        ax.errorbar(xs, means, yerr=[lows, highs], fmt="none", ecolor="black", capsize=3, linewidth=1)
        ax.bar_label(bars, labels=[f"{m:.2f}" for m in means], fontsize=7, padding=2)
    ax.set_xticks(range(len(groups)), groups, rotation=20, fontsize=8)
    ax.legend(fontsize=8)


def repeats_steps_plot(data: Mapping[str, Any], path: Path) -> Path:
    rs = data["repeat_summary"]
    configs = _configs(data)
    families = [f for f in rs["families"] if any(rs["families"][f][c]["steps_to_90"]["n"] for c in configs)]
    groups = families + ["all"]
    cells = {
        c: [rs["families"][f][c]["steps_to_90"] for f in families] + [rs["summary"][c]["steps_to_90"]] for c in configs
    }
    fig = _figure(9.0, 4.5)
    ax = fig.add_subplot()
    _interval_bars(ax, groups, cells, configs)
    ax.set_ylabel("steps to 90% of the best (mean)")
    ax.set_ylim(bottom=0)
    ax.set_title(
        f"steps to 90% of the best, 2nd and later operators of each family "
        f"({len(rs['complete'])} repeats, 95% interval)"
    )
    return _save(fig, path)


def repeats_paired_plot(data: Mapping[str, Any], path: Path) -> Path:
    rs = data["repeat_summary"]
    baseline = rs["baseline"]
    configs = [c for c in _configs(data) if c != baseline]
    families = list(rs["families"])
    groups = families + ["all"]
    cells = {
        c: [rs["families"][f][c]["paired_speedup"] for f in families] + [rs["summary"][c]["paired_speedup"]]
        for c in configs
    }
    fig = _figure(9.0, 4.5)
    ax = fig.add_subplot()
    _interval_bars(ax, groups, cells, configs)
    ax.axhline(1.0, color="grey", linewidth=1, linestyle="--")
    ax.set_ylabel(f"paired speedup vs {baseline} (geometric mean)")
    ax.set_title(f"paired speedup at the step budget ({len(rs['complete'])} repeats, 95% interval)")
    return _save(fig, path)


def repeats_curve_plot(data: Mapping[str, Any], path: Path) -> Path:
    rs = data["repeat_summary"]
    configs = _configs(data)
    families = [f for f in rs["families"] if any(rs["families"][f][c].get("optimum_by_step") for c in configs)]
    columns = min(3, max(1, len(families)))
    rows = (len(families) + columns - 1) // columns
    fig = _figure(max(6.0, 4.0 * columns), 3.2 * max(1, rows))
    for index, family in enumerate(families):
        ax = fig.add_subplot(rows, columns, index + 1)
        for c in configs:
            cells = [
                cell for cell in rs["families"][family][c].get("optimum_by_step") or [] if cell["mean"] is not None
            ]
            steps = list(range(1, len(cells) + 1))
            means = [cell["mean"] for cell in cells]
            lows = [cell["low"] if cell["low"] is not None else cell["mean"] for cell in cells]
            highs = [cell["high"] if cell["high"] is not None else cell["mean"] for cell in cells]
            ax.plot(
                steps, means, STYLES.get(c, "-"), marker=MARKERS.get(c), color=COLOURS.get(c), label=c, markersize=4
            )
            ax.fill_between(steps, lows, highs, color=COLOURS.get(c), alpha=0.2, linewidth=0)
        ax.axhline(0.9, color="grey", linewidth=1, linestyle="--")
        ax.set_ylim(0, 1.05)
        ax.set_title(family, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        if index % columns == 0:
            ax.set_ylabel("fraction of the optimum", fontsize=8)
        _integer_x(ax)
        if index == 0:
            ax.legend(fontsize=7)
    fig.suptitle(
        f"best so far / optimum after each step, later operators ({len(rs['complete'])} repeats, 95% band)",
        fontsize=9,
    )
    return _save(fig, path)


def write_plots(data: Mapping[str, Any], folder: Path) -> list[Path]:
    """The plots of ``data`` (with repeats: ``data`` is repeat 1's view plus the ``repeat_summary``)."""
    folder = Path(folder)
    paths = [
        pass_rate_plot(data, folder / "pass_rate.png"),
        speedup_plot(data, folder / "speedup.png"),
        tokens_plot(data, folder / "tokens_per_step.png"),
        memory_plot(data, folder / "memory_growth.png"),
    ]
    if data.get("repeat_summary") and data["repeat_summary"]["complete"]:
        paths.append(repeats_steps_plot(data, folder / "repeats_steps.png"))
        if any(
            cell.get("optimum_by_step") for fam in data["repeat_summary"]["families"].values() for cell in fam.values()
        ):
            paths.append(repeats_curve_plot(data, folder / "repeats_curve.png"))
        if len(_configs(data)) > 1:
            paths.append(repeats_paired_plot(data, folder / "repeats_paired.png"))
    return paths
