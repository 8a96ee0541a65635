"""Independent repeats of a bench: per-repeat metrics, their mean and 95% confidence interval.

A bench run with ``--repeats N`` holds N independent copies of every
(configuration, operator) pair (``pair["repeat"]``, 1-based; fresh namespaces
and proposer seed k - 1 for repeat k). Every metric of ``metrics`` is computed
per repeat exactly as for a one-repeat bench (``for_repeat`` selects one), and
summarised over the **complete** repeats (every pair finished; a partial
repeat would mix finished and missing operators):

* ``mean`` and the **95% confidence interval** of the mean, Student's t with
  n - 1 degrees of freedom (``mean +- t(0.975, n-1) * s / sqrt(n)``), over the
  per-repeat values; the repeat is the unit of replication. With n = 1 there
  is no interval (``low`` = ``high`` = None);
* speedups and ratios (geomean speedup, paired speedup, steps ratio) are
  averaged in log space (a geometric mean with a multiplicative interval);
* ``steps_ratio``: per repeat, a configuration's mean steps to 90% of the best
  divided by the baseline's, so the pairing inside each repeat is kept;
* per family: steps to 90% over the family's second and later operators (the
  ones some configuration solved, a miss counted as budget + 1; of the space's
  recorded optimum on replay), the paired speedup on the family's operators and
  the severe regressions (steps >= 3x slower than their start) on its second
  and later operators.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kope.bench.metrics import bench_metrics, pair_views, paired_views, severe_regressions, steps_to_best


def memory_key(config: str, repeat: int) -> str:
    """Where ``memory_start`` keeps a configuration's namespace size for one repeat."""
    return config if repeat == 1 else f"{config}/r{repeat}"


def repeat_count(data: Mapping[str, Any]) -> int:
    return int(data.get("repeats") or (data.get("options") or {}).get("repeats") or 1)


def for_repeat(data: Mapping[str, Any], repeat: int) -> dict[str, Any]:
    """``data`` as a one-repeat bench: only repeat ``repeat``'s pairs and namespace sizes."""
    configs = [c["name"] for c in data["configurations"]]
    start = data.get("memory_start") or {}
    return {
        **data,
        "pairs": [p for p in data["pairs"] if int(p.get("repeat", 1)) == repeat],
        "memory_start": {c: start[memory_key(c, repeat)] for c in configs if memory_key(c, repeat) in start},
    }


def complete_repeats(data: Mapping[str, Any]) -> list[int]:
    expected = len(data["operators"]) * len(data["configurations"])
    counts: dict[int, int] = {}
    for pair in data["pairs"]:
        counts[int(pair.get("repeat", 1))] = counts.get(int(pair.get("repeat", 1)), 0) + 1
    return [k for k in range(1, repeat_count(data) + 1) if counts.get(k, 0) == expected]


@dataclass(frozen=True)
class Interval:
    mean: float | None
    low: float | None
    high: float | None
    n: int
    values: tuple[float | None, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def interval(values: Iterable[float | None], *, log: bool = False) -> Interval:
    """Mean and 95% t-interval of the values that are numbers (in log space when ``log``)."""
    raw = tuple(values)
    xs = [float(v) for v in raw if isinstance(v, (int, float)) and (not log or v > 0)]
    if not xs:
        return Interval(None, None, None, 0, raw)
    ys = [math.log(x) for x in xs] if log else xs
    mean = statistics.fmean(ys)
    low = high = None
    if len(ys) > 1:
        from scipy.stats import t as student_t  # here, not at import: scipy.stats takes ~0.5 s to load

        half = float(student_t.ppf(0.975, len(ys) - 1)) * statistics.stdev(ys) / math.sqrt(len(ys))
        low, high = mean - half, mean + half
    back = math.exp if log else (lambda v: v)
    return Interval(back(mean), None if low is None else back(low), None if high is None else back(high), len(xs), raw)


def _family_of(data: Mapping[str, Any]) -> dict[str, str]:
    return {o["operator"]: o.get("family") or "?" for o in data["operators"]}


def _later_solved(stb: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    """Per family (bench order): its later operators that some configuration solved (``steps_to_best`` rows)."""
    out: dict[str, list[Mapping[str, Any]]] = {r["family"]: [] for r in stb["per_operator"]}
    for r in stb["per_operator"]:
        if r["later"] and r["best"] is not None:
            out[r["family"]].append(r)
    return out


def family_steps(stb: Mapping[str, Any], configs: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Per family: each configuration's mean steps to the bar over the family's later, solved operators."""
    budget = int(stb["budget"])
    return {
        family: {
            c: (
                statistics.fmean(r["steps"][c] if r["steps"][c] is not None else budget + 1 for r in rows)
                if rows
                else None
            )
            for c in configs
        }
        for family, rows in _later_solved(stb).items()
    }


def family_curve(stb: Mapping[str, Any], configs: Sequence[str]) -> dict[str, dict[str, list[float] | None]]:
    """Per family: each configuration's mean fraction of the optimum reached after each step, over the family's
    later, solved operators (``steps_to_best``'s curves)."""
    return {
        family: {
            c: [statistics.fmean(k) for k in zip(*(r["curve"][c] for r in rows))] if rows else None for c in configs
        }
        for family, rows in _later_solved(stb).items()
    }


def _curve_point(r: Mapping[str, Any], family: str, config: str, k: int) -> float | None:
    """Repeat ``r``'s fraction of the optimum after step k + 1 (None when it has no curve that long)."""
    curve = ((r.get("family_curve") or {}).get(family) or {}).get(config) or []
    return curve[k] if k < len(curve) else None


def family_paired(view: Mapping[str, Any], config: str, baseline: str) -> dict[str, Any]:
    families = _family_of(view)
    mine, base = pair_views(view, config), pair_views(view, baseline)
    out = {}
    for family in dict.fromkeys(families.values()):
        ops = {op for op, f in families.items() if f == family}
        out[family] = paired_views(
            [v for v in mine if v.operator in ops], [v for v in base if v.operator in ops], baseline
        )
    return out


def family_severe(view: Mapping[str, Any], configs: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per family and configuration: severe regressions (``metrics.severe_regressions``) over the family's
    second and later operators (bench order), the ones memory from earlier operators can affect."""
    families = _family_of(view)
    seen: dict[str, int] = {}
    later = set()
    for op in view["operators"]:
        family = families[op["operator"]]
        seen[family] = seen.get(family, 0) + 1
        if seen[family] >= 2:
            later.add(op["operator"])
    out: dict[str, dict[str, int]] = {f: {c: 0 for c in configs} for f in dict.fromkeys(families.values())}
    for pair in view["pairs"]:
        if pair["operator"] in later and pair["config"] in configs:
            out[families[pair["operator"]]][pair["config"]] += severe_regressions(pair.get("attempts") or [])
    return out


def per_repeat(data: Mapping[str, Any], baseline: str, repeat: int) -> dict[str, Any]:
    view = for_repeat(data, repeat)
    configs = [c["name"] for c in data["configurations"]]
    metrics = bench_metrics(view, baseline)
    stb = steps_to_best(view).to_dict()
    fam_steps = family_steps(stb, configs)
    fam_paired = {c: family_paired(view, c, baseline) for c in configs if c != baseline}
    return {
        "repeat": repeat,
        "metrics": {c: m.to_dict() for c, m in metrics.items()},
        "steps_to_best": stb,
        "family_steps": fam_steps,
        "family_curve": family_curve(stb, configs),
        "family_paired": {c: {f: asdict(p) for f, p in fams.items()} for c, fams in fam_paired.items()},
        "family_severe": family_severe(view, configs),
    }


def repeat_summary(data: Mapping[str, Any], baseline: str) -> dict[str, Any]:
    """Every repeat's metrics and, over the complete repeats, each metric's mean and 95% interval."""
    configs = [c["name"] for c in data["configurations"]]
    repeats = [per_repeat(data, baseline, k) for k in range(1, repeat_count(data) + 1)]
    complete = complete_repeats(data)
    done = [r for r in repeats if r["repeat"] in complete]

    def over(get: Any, log: bool = False) -> dict[str, Any]:
        return interval((get(r) for r in done), log=log).to_dict()

    summary: dict[str, dict[str, Any]] = {}
    for c in configs:
        entry = {
            "pass_rate": over(lambda r, c=c: r["metrics"][c]["pass_rate"]),
            "operators_passed": over(lambda r, c=c: r["metrics"][c]["operators_passed"]),
            "geomean_speedup": over(lambda r, c=c: r["metrics"][c]["geomean_speedup"], True),
            "tokens_per_step": over(lambda r, c=c: r["metrics"][c]["tokens_per_step"]),
            "steps_to_90": over(lambda r, c=c: r["steps_to_best"]["summary"][c]["mean_steps"]),
            "reached_90": over(lambda r, c=c: r["steps_to_best"]["summary"][c]["reached"]),
        }
        if c != baseline:
            entry["paired_speedup"] = over(lambda r, c=c: (r["metrics"][c]["paired"] or {}).get("speedup"), True)
            entry["steps_ratio"] = over(lambda r, c=c: _ratio(r["steps_to_best"]["summary"], c, baseline), True)
        summary[c] = entry
    families: dict[str, dict[str, Any]] = {}
    for family in dict.fromkeys(_family_of(data).values()):
        families[family] = {}
        for c in configs:
            budget = max(
                (len(v or []) for r in done for v in r.get("family_curve", {}).get(family, {}).values()), default=0
            )
            cell = {
                "steps_to_90": over(lambda r, c=c, f=family: r["family_steps"].get(f, {}).get(c)),
                "optimum_by_step": [
                    over(lambda r, c=c, f=family, k=k: _curve_point(r, f, c, k)) for k in range(budget)
                ],
                "severe": over(lambda r, c=c, f=family: r.get("family_severe", {}).get(f, {}).get(c)),
            }
            if c != baseline:
                cell["paired_speedup"] = over(
                    lambda r, c=c, f=family: r["family_paired"][c].get(f, {}).get("speedup"), True
                )
            families[family][c] = cell
    return {
        "repeats": repeat_count(data),
        "complete": complete,
        "baseline": baseline,
        "per_repeat": repeats,
        "summary": summary,
        "families": families,
    }


def _ratio(summary: Mapping[str, Any], config: str, baseline: str) -> float | None:
    mine, base = summary[config]["mean_steps"], summary[baseline]["mean_steps"]
    return mine / base if mine and base else None
