"""The paper's metrics, computed from the per-case results a bench stored.

Everything here reads the ``results.json`` structure only (``operators``: each
with its selected case names; ``pairs``: each finished (configuration,
operator) pair with every attempt and its per-case results), so a report can
be regenerated from that file alone. Each definition sits next to its code.

A pair with a ``final`` block (``kope.bench.final``: its best kernel
re-evaluated in fresh workers on visible and held-out cases) is judged by that
final evaluation: pass counts and speedups come from it, and its held-out
results are counted separately. A pair without one (``--no-final``, or an
older results.json) is judged by its best in-loop attempt. Steps to the best
speedup always follow the in-loop attempts (a trajectory, step by step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeGuard

LEVEL_KEYS = ("1", "2", "3", "4")


def positive(value: object) -> TypeGuard[float]:
    """A "positive field": a finite number above zero (not None, not 0, not negative, not NaN/inf, not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def geomean(values: Iterable[Any]) -> float | None:
    """Geometric mean over the positive fields only; None when there is none.

    Missing, zero and negative entries are skipped rather than counted: a speedup
    that was never measured, or is not a time ratio, has no logarithm."""
    logs = [math.log(v) for v in values if positive(v)]
    return math.exp(sum(logs) / len(logs)) if logs else None


def level_key(level: Any) -> str:
    return str(level) if level in (1, 2, 3, 4) else "unknown"


# -- one (configuration, operator) pair ------------------------------------------------------------


def case_view(attempt: Mapping[str, Any] | None, universe: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per case of ``universe``: passed and speedup in ``attempt``.

    A case the attempt has no result for (no attempt at all, or an outcome that
    lists other cases) is a failure. A case's speedup counts only when the case
    passed and the speedup is a positive field."""
    results = {c["name"]: c for c in (attempt or {}).get("cases") or []}
    view = {}
    for name in universe:
        case = results.get(name) or {}
        passed = bool(case.get("passed"))
        speedup = case.get("speedup") if passed and positive(case.get("speedup")) else None
        view[name] = {"passed": passed, "speedup": speedup}
    return view


def best_attempt(attempts: Sequence[Mapping[str, Any]], universe: Sequence[str]) -> Mapping[str, Any] | None:
    """The attempt a pair is judged by: most passing cases (of the selected cases), then highest
    speedup (the outcome's geometric mean; a missing speedup ranks lowest), then the earliest step."""

    def key(attempt: Mapping[str, Any]) -> tuple[int, float, int]:
        passed = sum(1 for c in case_view(attempt, universe).values() if c["passed"])
        speed = attempt.get("speedup")
        return (-passed, -(speed if positive(speed) else 0.0), attempt.get("step", 0))

    return min(attempts, key=key) if attempts else None


@dataclass
class PairView:
    """A pair as the metrics see it: its best attempt's per-case results (all failures when missing)."""

    config: str
    operator: str
    level: str
    cases: dict[str, dict[str, Any]]
    missing: bool  # no finished pair, or a pair with no attempt at all
    attempts: int
    prompt_tokens: int
    completion_tokens: int
    best_step: int | None
    best_decision: str | None
    final: bool = False  # the cases come from the final evaluation
    heldout_cases: int = 0
    heldout_passed: int = 0
    heldout_speedups: list[float] = field(default_factory=list)
    overfit: bool = False  # correct on every visible case, wrong on some held-out case
    # the final evaluation's visible cases timed as deployed (best.py in plain processes, the user's settings)
    deployed_speedups: list[float] = field(default_factory=list)

    @property
    def passed(self) -> int:
        return sum(1 for c in self.cases.values() if c["passed"])

    @property
    def speedups(self) -> list[float]:
        return [c["speedup"] for c in self.cases.values() if c["speedup"] is not None]


def pair_views(data: Mapping[str, Any], config: str) -> list[PairView]:
    """One view per operator of the bench (in bench order) for ``config`` (from the final evaluation when there is one)."""
    pairs = {(p["config"], p["operator"]): p for p in data["pairs"]}
    views = []
    for op in data["operators"]:
        pair = pairs.get((config, op["operator"]))
        attempts = list((pair or {}).get("attempts") or [])
        best = best_attempt(attempts, op["cases"])
        view = PairView(
            config=config,
            operator=op["operator"],
            level=level_key(op.get("level")),
            cases=case_view(best, op["cases"]),
            missing=not attempts,
            attempts=len(attempts),
            prompt_tokens=sum(int(a.get("prompt_tokens") or 0) for a in attempts),
            completion_tokens=sum(int(a.get("completion_tokens") or 0) for a in attempts),
            best_step=best.get("step") if best else None,
            best_decision=best.get("decision_id") if best else None,
        )
        final = (pair or {}).get("final")
        if final:
            _apply_final(view, final, op)
        views.append(view)
    return views


def _apply_final(view: PairView, final: Mapping[str, Any], op: Mapping[str, Any]) -> None:
    """Judge the pair by its final evaluation: visible cases from its outcome, held-out ones counted apart."""
    outcome_cases = (final.get("outcome") or {}).get("cases") or []
    visible = {c["name"]: c for c in outcome_cases if not c.get("heldout")}
    view.cases = case_view({"cases": list(visible.values())}, op["cases"])
    heldout = [c for c in outcome_cases if c.get("heldout")]
    view.final = True
    view.heldout_cases = int((final.get("heldout") or {}).get("cases") or len(heldout))
    view.heldout_passed = sum(1 for c in heldout if c.get("passed"))
    view.heldout_speedups = [c["speedup"] for c in heldout if c.get("passed") and positive(c.get("speedup"))]
    view.deployed_speedups = [
        c["deployed_speedup"]
        for c in visible.values()
        if c.get("passed") and positive(c.get("speedup")) and positive(c.get("deployed_speedup"))
    ]
    view.overfit = bool(view.cases) and view.passed == len(view.cases) and view.heldout_passed < view.heldout_cases
    view.best_step, view.best_decision = final.get("step"), final.get("decision_id")


# -- one configuration -----------------------------------------------------------------------------


def rate(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass
class LevelMetrics:
    operators: int = 0
    operators_passed: int = 0
    cases: int = 0
    cases_passed: int = 0
    pass_rate: float | None = None


@dataclass
class Paired:
    """Paired speedup of ``config`` against ``baseline`` (see ``paired_speedup``)."""

    baseline: str
    speedup: float | None
    n: int


@dataclass
class ConfigMetrics:
    config: str
    operators: int
    operators_passed: int
    operators_missing: int
    operator_pass_rate: float | None
    cases: int
    cases_passed: int
    pass_rate: float | None
    levels: dict[str, LevelMetrics]
    geomean_speedup: float | None
    speedup_cases: int
    steps: int
    prompt_tokens: int
    completion_tokens: int
    tokens: int
    tokens_per_step: float | None
    paired: Paired | None = None
    per_operator: list[dict[str, Any]] = field(default_factory=list)
    final_evaluated: int = 0  # operators judged by a final evaluation (the rest by their in-loop best attempt)
    heldout_cases: int = 0
    heldout_cases_passed: int = 0
    heldout_pass_rate: float | None = None
    heldout_geomean_speedup: float | None = None
    overfit_operators: list[str] = field(default_factory=list)  # correct on visible cases, wrong on held-out ones
    # the final evaluations' visible cases as deployed (kope.bench.final): what a user of best.py gets
    deployed_geomean_speedup: float | None = None
    deployed_speedup_cases: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def config_metrics(data: Mapping[str, Any], config: str) -> ConfigMetrics:
    """The paper's per-configuration metrics.

    * operators passed: operators whose best attempt passes at least one case;
    * cases passed / cases: passing cases of the best attempts over every selected case of every
      operator of the bench; an operator that is missing (never finished, or no attempt) counts
      all its cases as failures;
    * pass rate: cases passed / cases (``operator_pass_rate``: operators passed / operators);
    * per level (L1-L4): the same counts over the operators of that level;
    * geometric-mean speedup: over the per-case speedups of the best attempts, positive fields
      only (passing cases with a measured T_ref/T_cand > 0); ``speedup_cases`` says how many;
    * tokens: prompt + completion tokens over every recorded attempt; per step: tokens / attempts;
    * held-out (final evaluation only): passing held-out cases over every held-out case of the
      operators that had a final evaluation, their geometric-mean speedup, and the operators whose
      kernel passed every visible case but not every held-out one (``overfit_operators``);
    * as deployed (final evaluation only): the geometric mean of the visible cases' ``deployed_speedup``
      (the best kernel imported as ``best.py`` in plain processes under the user's own settings).
    """
    views = pair_views(data, config)
    levels: dict[str, LevelMetrics] = {}
    for view in views:
        level = levels.setdefault(view.level, LevelMetrics())
        level.operators += 1
        level.operators_passed += view.passed > 0
        level.cases += len(view.cases)
        level.cases_passed += view.passed
    for level in levels.values():
        level.pass_rate = rate(level.cases_passed, level.cases)
    speedups = [s for v in views for s in v.speedups]
    steps = sum(v.attempts for v in views)
    prompt = sum(v.prompt_tokens for v in views)
    completion = sum(v.completion_tokens for v in views)
    ops_passed = sum(1 for v in views if v.passed > 0)
    cases = sum(len(v.cases) for v in views)
    cases_passed = sum(v.passed for v in views)
    heldout_cases = sum(v.heldout_cases for v in views)
    heldout_passed = sum(v.heldout_passed for v in views)
    return ConfigMetrics(
        config=config,
        operators=len(views),
        operators_passed=ops_passed,
        operators_missing=sum(1 for v in views if v.missing),
        operator_pass_rate=rate(ops_passed, len(views)),
        cases=cases,
        cases_passed=cases_passed,
        pass_rate=rate(cases_passed, cases),
        levels={k: levels[k] for k in sorted(levels, key=lambda k: (k == "unknown", k))},
        geomean_speedup=geomean(speedups),
        speedup_cases=len(speedups),
        steps=steps,
        prompt_tokens=prompt,
        completion_tokens=completion,
        tokens=prompt + completion,
        tokens_per_step=(prompt + completion) / steps if steps else None,
        per_operator=[
            {
                "operator": v.operator,
                "level": v.level,
                "cases": len(v.cases),
                "cases_passed": v.passed,
                "missing": v.missing,
                "attempts": v.attempts,
                "best_step": v.best_step,
                "best_decision": v.best_decision,
                "geomean_speedup": geomean(v.speedups),
                "final": v.final,
                "heldout_cases": v.heldout_cases,
                "heldout_cases_passed": v.heldout_passed,
                "heldout_geomean_speedup": geomean(v.heldout_speedups),
                "overfit": v.overfit,
                "deployed_geomean_speedup": geomean(v.deployed_speedups),
            }
            for v in views
        ],
        final_evaluated=sum(1 for v in views if v.final),
        heldout_cases=heldout_cases,
        heldout_cases_passed=heldout_passed,
        heldout_pass_rate=rate(heldout_passed, heldout_cases),
        heldout_geomean_speedup=geomean(s for v in views for s in v.heldout_speedups),
        overfit_operators=[v.operator for v in views if v.overfit],
        deployed_geomean_speedup=geomean(s for v in views for s in v.deployed_speedups),
        deployed_speedup_cases=sum(len(v.deployed_speedups) for v in views),
    )


def paired_speedup(data: Mapping[str, Any], with_config: str, without_config: str) -> Paired:
    """Paired speedup (without/with) on the exact intersection of cases both configurations timed.

    For every (operator, case) where the best attempts of both configurations passed with a
    positive speedup, the ratio T_without / T_with = speedup_with / speedup_without (each time
    normalised by the reference timing interleaved with it); the result is the geometric mean
    of those ratios (> 1: ``with_config`` found faster kernels), and ``n`` the size of the
    intersection. An empty intersection gives ``speedup=None, n=0``."""
    return paired_views(pair_views(data, with_config), pair_views(data, without_config), without_config)


def paired_views(with_views: Sequence[PairView], without_views: Sequence[PairView], label: str) -> Paired:
    """``paired_speedup`` on pair views (which may come from two benches: operators are matched by name)."""
    ratios = paired_ratios(with_views, without_views)
    return Paired(label, geomean(ratios), len(ratios))


def paired_ratios(with_views: Sequence[PairView], without_views: Sequence[PairView]) -> list[float]:
    """speedup_with / speedup_without of every (operator, case) both timed (the terms of a paired speedup)."""
    mine = {v.operator: v.cases for v in with_views}
    ratios = []
    for without in without_views:
        cases = mine.get(without.operator) or {}
        for name, base in without.cases.items():
            other = cases.get(name)
            if other and base["speedup"] is not None and other["speedup"] is not None:
                ratios.append(other["speedup"] / base["speedup"])
    return ratios


def bench_metrics(data: Mapping[str, Any], baseline: str | None = None) -> dict[str, ConfigMetrics]:
    """Every configuration's metrics, each non-baseline one paired against ``baseline``."""
    configs = [c["name"] for c in data["configurations"]]
    result = {}
    for config in configs:
        metrics = config_metrics(data, config)
        if baseline is not None and config != baseline:
            metrics.paired = paired_speedup(data, config, baseline)
        result[config] = metrics
    return result


# -- per-step series (for the plots) ---------------------------------------------------------------


def tokens_by_step(data: Mapping[str, Any], config: str) -> dict[int, float]:
    """Mean tokens (prompt + completion) of the attempts at each step index, over the operators."""
    sums: dict[int, list[int]] = {}
    for pair in data["pairs"]:
        if pair["config"] != config:
            continue
        for attempt in pair.get("attempts") or []:
            tokens = int(attempt.get("prompt_tokens") or 0) + int(attempt.get("completion_tokens") or 0)
            sums.setdefault(int(attempt["step"]), []).append(tokens)
    return {step: sum(v) / len(v) for step, v in sorted(sums.items())}


def memory_series(data: Mapping[str, Any], config: str) -> list[dict[str, Any]]:
    """The configuration's namespace size at the start and after each finished pair (in finishing order)."""
    start = (data.get("memory_start") or {}).get(config)
    series = [{"operator": None, **start}] if start else []
    done = sorted(
        (p for p in data["pairs"] if p["config"] == config and p.get("memory_after")),
        key=lambda p: (p.get("ended_at") or 0, p.get("index", 0)),
    )
    series.extend({"operator": p["operator"], **p["memory_after"]} for p in done)
    return series


# -- how fast a configuration gets there ------------------------------------------------------------


@dataclass
class StepsToBest:
    """Steps each configuration needed to reach ``fraction`` of an operator's best speedup."""

    fraction: float
    budget: int
    per_operator: list[dict[str, Any]]
    summary: dict[str, dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def steps_to_best(data: Mapping[str, Any], fraction: float = 0.9) -> StepsToBest:
    """Steps needed to reach ``fraction`` of the best speedup, per operator and configuration.

    * best: the operator's known optimum when the bench has one (``optima``: a replay bench's
      recorded space, whose best setting is known exactly), else the highest speedup of a correct
      attempt (its outcome's geometric mean over the selected cases) over every configuration of
      the bench for that operator, so all configurations are measured against the same bar;
    * steps: 1 + the step index of a configuration's first correct attempt at or above
      ``fraction * best``; ``None`` when it never got there (or nothing was correct anywhere);
    * curve: per configuration, the fraction of ``best`` its best correct attempt so far reached after each
      step (1 .. budget; 0 before its first correct attempt, at most 1);
    * ``later``: the operator is the second or later of its family in bench order, which is
      where memory from the earlier operators can help;
    * summary per configuration over the ``later`` operators that some configuration got correct
      (an operator nobody solved says nothing about speed): how many reached the bar, and the mean
      steps with a miss counted as budget + 1 (the bench's ``--steps`` plus one).
    """
    configs = [c["name"] for c in data["configurations"]]
    budget = int((data.get("options") or {}).get("steps") or 0)
    pairs = {(p["config"], p["operator"]): p for p in data["pairs"]}
    optima = data.get("optima") or {}
    seen_in_family: dict[str, int] = {}
    rows = []
    for op in data["operators"]:
        family = op.get("family") or "?"
        position = seen_in_family[family] = seen_in_family.get(family, 0) + 1
        series = {}
        for config in configs:
            attempts = sorted(
                (pairs.get((config, op["operator"])) or {}).get("attempts") or [], key=lambda a: a.get("step", 0)
            )
            series[config] = [
                (int(a.get("step", 0)), a.get("speedup"))
                for a in attempts
                if a.get("status") == "correct" and positive(a.get("speedup"))
            ]
        best = max((s for points in series.values() for _, s in points), default=None)
        if positive(optima.get(op["operator"])):
            best = float(optima[op["operator"]])
        steps = {}
        curve = {}
        for config, points in series.items():
            hit = next((step for step, s in points if best is not None and s >= fraction * best), None)
            steps[config] = None if hit is None else hit + 1
            curve[config] = [
                min(1.0, max((s for step, s in points if step < k), default=0.0) / best) if best else 0.0
                for k in range(1, budget + 1)
            ]
        rows.append(
            {
                "operator": op["operator"],
                "family": family,
                "position": position,
                "later": position >= 2,
                "best": best,
                "steps": steps,
                "curve": curve,
            }
        )
    summary = {}
    for config in configs:
        later = [r for r in rows if r["later"] and r["best"] is not None]
        reached = [r["steps"][config] for r in later if r["steps"][config] is not None]
        penalised = [r["steps"][config] if r["steps"][config] is not None else budget + 1 for r in later]
        summary[config] = {
            "operators": len(later),
            "reached": len(reached),
            "mean_steps": sum(penalised) / len(penalised) if penalised else None,
        }
    return StepsToBest(fraction, budget, rows, summary)


# -- severe regressions -----------------------------------------------------------------------------

SEVERE_RATIO = 3.0


def severe_regressions(attempts: Sequence[Mapping[str, Any]], ratio: float = SEVERE_RATIO) -> int:
    """Steps at least ``ratio`` times slower than the state they started from: a correct attempt whose
    speedup is <= its parent's (a correct attempt of the same run) / ``ratio``; a step from the root is
    compared with the reference (speedup 1)."""
    by_id = {a.get("decision_id"): a for a in attempts}
    count = 0
    for a in attempts:
        if a.get("status") != "correct" or not positive(a.get("speedup")):
            continue
        parent = by_id.get(a.get("parent_id"))
        start = parent.get("speedup") if parent is not None and parent.get("status") == "correct" else 1.0
        if positive(start) and a["speedup"] * ratio <= start:
            count += 1
    return count
