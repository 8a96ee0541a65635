"""The bench's plots (matplotlib, PNG), drawn from results.json alone.

* ``pass_rate.png``: pass rate per configuration and level (and over all levels);
* ``speedup.png``: per-case speedups of the best attempts per level and configuration,
  log axis, parity (1x) marked;
* ``tokens_per_step.png``: mean tokens per step index (active vs passive stand out);
* ``memory_growth.png``: decisions and nodes in each configuration's namespace as the bench went on.

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
    groups = levels + ["all"]
    fig = _figure()
    ax = fig.add_subplot()
    width = 0.8 / max(1, len(configs))
    for i, config in enumerate(configs):
        metrics = data["metrics"][config]
        values = []
        for group in groups:
            rate = metrics["pass_rate"] if group == "all" else metrics["levels"].get(group, {}).get("pass_rate")
            values.append(100.0 * rate if rate is not None else 0.0)
        xs = [g + (i - (len(configs) - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, values, width, label=config, color=COLOURS.get(config))
        ax.bar_label(bars, labels=[f"{v:.0f}%" for v in values], fontsize=7, padding=1)
    ax.set_xticks(range(len(groups)), [_label(g) if g != "all" else "all" for g in groups])
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


def write_plots(data: Mapping[str, Any], folder: Path) -> list[Path]:
    folder = Path(folder)
    return [
        pass_rate_plot(data, folder / "pass_rate.png"),
        speedup_plot(data, folder / "speedup.png"),
        tokens_plot(data, folder / "tokens_per_step.png"),
        memory_plot(data, folder / "memory_growth.png"),
    ]
