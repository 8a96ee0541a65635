"""Effect insights: what one technique (a knob value) did to speed, with its uncertainty.

Evidence comes from **controlled comparisons**: two correct attempts of the
same operator, on the same cases (case-set signature) and the same machine,
whose template settings differ in exactly one knob that matters for the
operator. Their speedup ratio ``a(knob=value) / a(knob=baseline)`` is one
observation of that technique's effect (attempts with identical settings there
are averaged first, geometrically, so a repeated setting counts once).

Observations are grouped by (family, hardware class, shape class, template,
knob, value, baseline). For each group with at least ``MIN_SUPPORT``
observations, the insight holds:

* ``effect``: the geometric mean of the ratios;
* ``low`` / ``high``: its 95% confidence interval, Student's t on the log
  ratios with n - 1 degrees of freedom (zero width when every observation
  agrees exactly);
* ``support`` = n, the number of comparisons; ``confidence``: the share of
  them on the same side of 1x as the mean (how consistent the effect is).

Orientation: ``baseline`` is the knob's default when one side is the default,
else the value listed first in the template (else the smaller in sort order).
The text reads like "On x86_64-avx512, elementwise (elu, gelu) at
float32:2^22: math=poly vs math=libm 4.1-12.6x faster (n=6, 95% interval,
geometric mean 7.20x)". Each insight is DERIVED_FROM the outcomes of every
attempt in its comparisons and ABOUT the operators and hardware. The same
graph gives the same insights (every grouping and list is ordered).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kope.memory.ids import insight_id, uid

MIN_SUPPORT = 2
KnobInfo = Callable[[str, str], "TemplateKnobs | None"]


@dataclass(frozen=True)
class TemplateKnobs:
    """What distillation needs to know of a template: each knob's values (in order) and default, and which
    operators each knob matters for (None: all)."""

    values: Mapping[str, tuple[Any, ...]]
    defaults: Mapping[str, Any]
    operators: Mapping[str, tuple[str, ...] | None]

    def relevant(self, knob: str, operator: str) -> bool:
        only = self.operators.get(knob)
        return only is None or operator in only


def shipped_template_knobs(template: str, target: str) -> TemplateKnobs | None:
    """The knobs of a template shipped with KOPE (None for a template this version does not have: then every
    recorded knob counts as relevant)."""
    from kope.boundary import templates_for_target

    t = templates_for_target(target).get(template)
    if t is None:
        return None
    return TemplateKnobs(
        {k.name: k.values for k in t.knobs}, t.default_settings(), {k.name: k.operators for k in t.knobs}
    )


@dataclass
class _Group:
    family: str
    hw_class: str
    shape_class: str
    template: str
    knob: str
    value: Any
    baseline: Any
    logs: list[float] = field(default_factory=list)
    outcomes: set[str] = field(default_factory=set)
    operators: set[str] = field(default_factory=set)
    hardware: set[str] = field(default_factory=set)


def _orient(knob: str, x: Any, y: Any, info: TemplateKnobs | None) -> tuple[Any, Any]:
    """(value, baseline) for a comparison of knob=x against knob=y."""
    if info is not None and knob in info.defaults:
        default = info.defaults[knob]
        if x == default:
            return y, x
        if y == default:
            return x, y
        order = list(info.values.get(knob, ()))
        if x in order and y in order:
            return (y, x) if order.index(x) < order.index(y) else (x, y)
    return (y, x) if json.dumps(x) < json.dumps(y) else (x, y)


def observations(rows: Sequence[Mapping[str, Any]], knobs: KnobInfo, target: str = "cpu") -> list[_Group]:
    """Pure: decision rows (``memory/insights/effects``) -> the groups of controlled comparisons."""
    contexts: dict[tuple[Any, ...], dict[str, list[Mapping[str, Any]]]] = {}
    infos: dict[str, TemplateKnobs | None] = {}
    for row in rows:
        params = json.loads(row["params_json"]) if row["params_json"] else {}
        settings = params.get("settings")
        if not isinstance(settings, dict) or not row["a"] or row["a"] <= 0:
            continue
        template = row["template"]
        if template not in infos:
            infos[template] = knobs(template, target)
        info = infos[template]
        relevant = {k: v for k, v in sorted(settings.items()) if info is None or info.relevant(k, row["operator"])}
        key = (row["family"], row["hw_class"], row["hw_id"], row["operator"], row["shape_sig"], template)
        contexts.setdefault(key, {}).setdefault(json.dumps(relevant, sort_keys=True), []).append(
            {**row, "relevant": relevant}
        )
    groups: dict[tuple[Any, ...], _Group] = {}
    for (family, hw_class, hw_id, operator, _sig, template), by_settings in sorted(contexts.items(), key=repr):
        info = infos[template]
        entries = []
        for _, attempts in sorted(by_settings.items()):
            mean_log = statistics.fmean(math.log(a["a"]) for a in attempts)
            entries.append((attempts[0]["relevant"], mean_log, attempts))
        for i, (s1, log1, at1) in enumerate(entries):
            for s2, log2, at2 in entries[i + 1 :]:
                if set(s1) != set(s2):
                    continue
                differ = [k for k in s1 if s1[k] != s2[k]]
                if len(differ) != 1:
                    continue
                knob = differ[0]
                value, baseline = _orient(knob, s1[knob], s2[knob], info)
                ratio = (log1 - log2) if s1[knob] == value else (log2 - log1)
                shape_class = at1[0]["shape_class"] or "unknown"
                gkey = (family, hw_class, shape_class, template, knob, json.dumps(value), json.dumps(baseline))
                group = groups.get(gkey)
                if group is None:
                    group = groups[gkey] = _Group(family, hw_class, shape_class, template, knob, value, baseline)
                group.logs.append(ratio)
                group.outcomes.update(a["outcome"] for a in at1 + at2)
                group.operators.add(operator)
                group.hardware.add(hw_id)
    return [groups[k] for k in sorted(groups)]


def estimate(logs: Sequence[float]) -> tuple[float, float, float]:
    """(geometric-mean ratio, low, high): the 95% t-interval of the mean log ratio, exponentiated."""
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), math.exp(mean), math.exp(mean)
    from scipy.stats import t as student_t  # here, not at import: scipy.stats takes ~0.5 s to load

    half = float(student_t.ppf(0.975, len(logs) - 1)) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def _text(g: _Group, effect: float, low: float, high: float) -> str:
    if low > 1.0:
        verdict = f"{low:.2f}-{high:.2f}x faster"
    elif high < 1.0:
        verdict = f"{1 / high:.2f}-{1 / low:.2f}x slower ({low:.2f}-{high:.2f}x)"
    else:
        verdict = f"{low:.2f}-{high:.2f}x, no clear effect"
    return (
        f"On {g.hw_class}, {g.family} ({', '.join(sorted(g.operators))}) at {g.shape_class}: "
        f"{g.knob}={g.value} vs {g.knob}={g.baseline} {verdict} (n={len(g.logs)}, 95% interval, "
        f"geometric mean {effect:.2f}x; template {g.template})."
    )


def build_effects(
    ns: str, rows: Sequence[Mapping[str, Any]], knobs: KnobInfo = shipped_template_knobs
) -> list[dict[str, Any]]:
    """Pure: decision rows -> effect insight rows for ``memory/insights/upsert``."""
    out = []
    for g in observations(rows, knobs):
        n = len(g.logs)
        if n < MIN_SUPPORT:
            continue
        effect, low, high = estimate(g.logs)
        same_side = sum(1 for x in g.logs if (x > 0) == (math.log(effect) > 0) and x != 0)
        key = f"{g.shape_class}:{g.template}.{g.knob}={g.value}-vs-{g.baseline}"
        local = insight_id("effect", g.family, g.hw_class, _key(key))
        out.append(
            {
                "props": {
                    "uid": uid(ns, local),
                    "ns": ns,
                    "id": local,
                    "kind": "effect",
                    "family": g.family,
                    "hw_class": g.hw_class,
                    "error_kind": None,
                    "layer": None,
                    "shape_class": g.shape_class,
                    "template": g.template,
                    "knob": g.knob,
                    "value": str(g.value),
                    "baseline": str(g.baseline),
                    "effect": round(effect, 6),
                    "low": round(low, 6),
                    "high": round(high, 6),
                    "text": _text(g, effect, low, high),
                    "support": n,
                    "confidence": round(same_side / n, 6),
                    "active": True,
                    "operators": sorted(g.operators),
                },
                "outcomes": sorted(g.outcomes),
                "operators": [uid(ns, o) for o in sorted(g.operators)],
                "hardware": [uid(ns, h) for h in sorted(g.hardware)],
            }
        )
    return out


def _key(value: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.:@#+=\-]", "_", value)


def effect_ids(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    return [r["props"]["id"] for r in rows]
