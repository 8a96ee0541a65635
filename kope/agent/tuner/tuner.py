"""Choosing the next settings of a kernel template: cost model + expected improvement.

``Tuner.plan(...)`` ranks every untried setting of the knobs that matter for
the operator (the others stay at their defaults):

1. **training data**: the tuning records the memory returned (this run's
   attempts, and with memory on the ranked sample of the template's other
   attempts: other operators, other machines, other shapes); each passing
   case is a speed row, each attempt a feasibility row (``model``);
2. **vetoes**: a setting that memory shows at least ``VETO_RATIO`` (3x) slower
   than the best measured for an operator with the same relevant knobs, on the
   same shape class and hardware class, is never proposed again;
   Once the run has a correct attempt, each memory operator's rows are shifted
   by its level offset here and weighted by its **trust** (``_memory_trust``: how
   well its records predicted the *effects* of this run's own measurements, the
   differences between settings, not the level); one trusted less than
   ``MIN_TRUST`` is left out; when every memory operator is trusted less than
   ``TRUSTED`` the step is planned on this run's attempts alone (memory set aside; its vetoes still hold, and
   so does its verdict that the defaults are 3x off: ``DEFAULTS_FAR_FALLBACK``; the initial design then walks
   one-knob moves from the defaults, not from the incumbent memory chose, unless memory or this run found the
   defaults 3x off: ``FALLBACK_FROM_DEFAULTS``);
   effects are judged against the spread of this run's own measurements when that is below log 2;
3. **ranking**: with speed data on at least ``MIN_DISTINCT`` distinct settings,
   by expected improvement over the incumbent times the probability of being
   correct (``acquisition``), where a setting with a knob value no memory record
   measured gets an optimistic prior (its spread widened by ``UNSEEN_SD``: the
   model cannot know that value; only settings one knob from the defaults or the incumbent get it (from the
   defaults only while this run has not measured them 3x below its incumbent: ``PRIOR_FAR_DEFAULTS``), and only
   on a knob memory varied or this run has not yet measured at a value memory could not know:
   ``PRIOR_OPENS_KNOB``; a value no training row has that the prior does not widen is ranked on a pessimistic
   reading, not on the mean the forest borrowed from the knob's other values: ``UNSEEN_PESSIMISTIC``), and the
   untried defaults go first unless memory's first choice beats their prediction by its 95% interval (a prior
   point memory must beat) or every memory operator measured its own defaults at least 3x below its best (no
   prior point worth a step); before that, an initial design: the defaults,
   then one-knob changes of the best state so far (each isolates one knob's
   effect; with memory of the template, the knobs no earlier operator uses first: ``DESIGN_UNKNOWN_FIRST``),
   then the rest in a seeded order;
4. **portfolio** (``_portfolio_first``): with memory of the template, an operator's first ``PORTFOLIO_STEPS``
   steps go first to the untried setting most earlier operators measured within 10% of their own best, proposed
   whole (``PORTFOLIO_WHOLE``), with a knob the earlier operator does not use at this run's incumbent's value
   (``PORTFOLIO_OVERLAY``), also while memory's effects are set aside (an optimum can carry over where effects
   do not), not while a knob no earlier operator uses is unexplored here (``PORTFOLIO_YIELDS``: the prior's step
   goes first), never one the model's 95% interval puts below the incumbent, and no more once one of them
   measured below this run's incumbent (``PORTFOLIO_STOP``).

Each candidate carries the model's prediction (mean and 95% interval of the
speedup), its expected improvement and P(correct); ``evidence`` names the
recorded attempts nearest to a setting, so a thought and a summary can say
what memory contributed.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from kope.agent.tuner.acquisition import expected_improvement
from kope.agent.tuner.features import FeatureSpace
from kope.agent.tuner.model import HARDWARE_WEIGHT, CostModel
from kope.boundary import KernelTemplate
from kope.memory.shapes import CaseShape, ShapeSummary
from kope.memory.tuning import HardwareFacts, TuningRecord

VETO_RATIO = 3.0
MIN_DISTINCT = 3  # distinct settings with speed data before the model ranks (else: initial design)
MAX_SPEED_ROWS = 1500  # cases read from the (already bounded) sample, best-ranked records first
Z95 = 1.96
OWN_WEIGHT = 1.0  # an attempt of this run weighs this many memory records of the same hardware tier
TRUST_SCALE = math.log(2.0)  # a memory operator off by this (rms, log space) on this run keeps half its weight
MIN_TRUST = 0.05  # below this a memory operator's records are left out of the model
UNSEEN_SD = math.log(4.0)  # the prior spread of a knob value no trusted record measured
TRUSTED = 0.5  # a memory operator trusted less (off by more than 2x here) no longer makes a knob value "known"
MIN_EFFECTS = 2  # own attempts a memory operator must have predicted before its effects (not its level) are judged
NOISE = math.log(1.05)  # the smallest own spread effects are judged against (measurement noise, ~5%)
VALUE_VETO = True  # rule out knob values memory measured >= VETO_RATIO slower wherever it measured them
DEFAULTS_FAR_FALLBACK = True  # memory set aside: the defaults still skipped where every earlier operator's were 3x off
FALLBACK_FROM_DEFAULTS = True  # memory set aside: the one-knob design restarts from the defaults (unless 3x off)
PRIOR_OPENS_KNOB = True  # the optimistic prior opens a knob memory never varied; it does not sweep its values
PRIOR_OPENS_VARIED = False  # ... also on a knob memory varied (two values or more): costs gemm steps, not adopted
PRIOR_FAR_DEFAULTS = False  # ... and from the defaults when this run measured them 3x below its incumbent (off: the
# prior's one-knob moves start from the incumbent alone there)
RELATED_MIN_KNOBS = 2  # a related template's record is read here only through at least this many shared knobs
UNSEEN_PESSIMISTIC = True  # a value the model never saw and the prior does not open is ranked on a pessimistic
# reading: below the worst of that knob's trained values by their spread (thirteenth round)
UNSEEN_PESSIMISTIC_ALONE = False  # ... also without memory records (the run's own data alone)
UNSEEN_PESSIMISTIC_ONLY_OPENED = False  # ... only on a knob the prior opened (its other values withheld)
UNSEEN_PESSIMISTIC_SET_ASIDE = True  # ... also while memory is set aside (planned on the run's own data; with related
# templates, thirteenth round: layer_norm's welford steps came while memory was set aside)
BACKED_OPERATORS = 2  # memory's first choice goes before the untried defaults when this many earlier operators ...
BACKED_NEAR = 0.95  # ... measured it within this fraction of their own best (_backed; BACKED_OPERATORS=0: never)
PORTFOLIO_STEPS = 3  # a later operator's first this many steps try first what earlier operators found best (_portfolio)
PORTFOLIO_NEAR = 0.90  # ... a setting an earlier operator of the template measured within this fraction of its best
PORTFOLIO_SET_ASIDE = True  # ... also while memory is set aside (its optima, judged without the trust)
PORTFOLIO_YIELDS = True  # ... not while a knob no earlier operator uses is unmeasured here off memory's value
PORTFOLIO_BELOW_INTERVAL = True  # ... skipping a setting whose 95% interval here is all below the incumbent
PORTFOLIO_OVERLAY = True  # ... a knob the earlier operator does not use keeps this run's incumbent's value
PORTFOLIO_WHOLE = True  # ... proposed whole, before this run has evidence near it (_near_evidence)
PORTFOLIO_STOP = 1.0  # ... stop once a portfolio setting measured here below this fraction of the incumbent (0: never)
DESIGN_UNKNOWN_FIRST = True  # with memory of the template, the design walks first the knobs no earlier operator uses
CONVERGED_RATIO = 3.0  # a setting predicted this much slower than the incumbent is not proposed (converged)


def settings_key(settings: Mapping[str, Any]) -> str:
    return json.dumps(dict(settings), sort_keys=True)


@dataclass(frozen=True)
class Choice:
    settings: dict[str, Any]
    basis: str  # "model" | "initial design"
    predicted: float | None = None  # speedup (exp of the mean log speedup)
    low: float | None = None  # 95% interval of the prediction
    high: float | None = None
    ei: float | None = None
    p_correct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "predicted": _round(self.predicted),
            "low": _round(self.low),
            "high": _round(self.high),
            "ei": _round(self.ei),
            "p_correct": _round(self.p_correct),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(float(value), 4)


@dataclass(frozen=True)
class Veto:
    settings_key: str
    evidence: str  # the decision that measured it
    ratio: float  # best / its speedup


@dataclass
class Plan:
    choices: list[Choice]  # best first
    records: int  # tuning records read
    own: int  # of which from this run
    speed_rows: int
    vetoes: list[Veto] = field(default_factory=list)
    incumbent: float | None = None
    shape_class: str | None = None
    failures: int = 0  # failed attempts among the records (the feasibility model's evidence)
    failures_elsewhere: int = 0  # of which recorded on another hardware class (counted at full weight)
    trust: dict[str, float] = field(default_factory=dict)  # memory operator -> weight from its residuals here
    hopeless: int = 0  # untried settings left out as predicted >= CONVERGED_RATIO slower than the incumbent
    fallback: bool = False
    distant: int = 0  # settings held back as more than one knob from this run's own evidence (see _near_evidence)
    related: dict[str, int] = field(default_factory=dict)  # another template of the family -> its records read here
    portfolio: tuple[str, int] | None = None  # (setting, earlier operators that back it) put first by the portfolio

    @property
    def converged(self) -> bool:
        """Every untried setting is predicted far slower than the incumbent: the search is over."""
        return not self.choices and self.hopeless > 0

    @property
    def memory(self) -> int:
        return self.records - self.own


class Tuner:
    def __init__(self, template: KernelTemplate, seed: int = 0) -> None:
        self.template = template
        self.seed = seed
        self.space = FeatureSpace.for_template(template)

    # -- the search space ---------------------------------------------------------------------
    def candidates(self, operator: str) -> list[dict[str, Any]]:
        """Every setting of the knobs that matter for ``operator`` (the others at their defaults)."""
        relevant = self.template.relevant_knobs(operator)
        defaults = self.template.default_settings()
        out = []
        for values in itertools.product(*(k.values for k in relevant)):
            out.append({**defaults, **{k.name: v for k, v in zip(relevant, values)}})
        return out

    def relevant_names(self, operator: str) -> tuple[str, ...]:
        return tuple(k.name for k in self.template.relevant_knobs(operator))

    # -- planning ---------------------------------------------------------------------------------
    def plan(
        self,
        operator: str,
        shapes: Sequence[CaseShape],
        hardware: HardwareFacts,
        records: Sequence[TuningRecord],
        hardware_facts: Mapping[str, HardwareFacts],
        tried: set[str],
        base: Mapping[str, Any] | None = None,
        allowed: frozenset[str] | None = None,
        set_aside: bool = False,
        design_first: frozenset[str] = frozenset(),
    ) -> Plan:
        """``allowed``: only these settings (``settings_key`` texts) may be proposed (a recorded space); None: any.
        ``design_first``: knobs the initial design walks first (set by the plan itself from memory)."""
        shapes = list(shapes) or [CaseShape("default", ())]
        records = self._readable(records)
        if DESIGN_UNKNOWN_FIRST and not set_aside:
            # memory's optima and effects say nothing about a knob no earlier operator of the template uses: the
            # design measures it first (the portfolio waits for it, PORTFOLIO_YIELDS)
            design_first = self._unknown_knobs(operator, records)
        related = dict(Counter(str(r.template) for r in records if self._related(r)))
        summary = ShapeSummary.of(shapes)
        shape_class = summary.shape_class if summary else None
        own = [r for r in records if r.own and r.correct and r.a]
        incumbent = max((r.a for r in own if r.a), default=None)
        pool = [
            c
            for c in self.candidates(operator)
            if settings_key(c) not in tried and (allowed is None or settings_key(c) in allowed)
        ]
        # a related template's settings collapse onto the shared knobs (several of its settings are one setting
        # here): a setting is ruled out by its best one only (_collapsed)
        collapsed = self._collapsed(records)
        vetoes = self._vetoes(operator, collapsed, shape_class, hardware.hw_class)
        vetoed = {v.settings_key for v in vetoes}
        pool = [c for c in pool if settings_key(c) not in vetoed]
        if VALUE_VETO:
            # knob values memory measured >= 3x slower wherever it measured them (_ruled_out_values); kept when
            # nothing else is left
            ruled_out = self._ruled_out_values(operator, collapsed, shape_class, hardware.hw_class)
            allowed_values = [c for c in pool if not any((k, v) in ruled_out for k, v in c.items())]
            if allowed_values:
                vetoed |= {settings_key(c) for c in pool} - {settings_key(c) for c in allowed_values}
                pool = allowed_values
        trust, offsets = self._memory_trust(operator, records, hardware_facts)
        if trust and all(t < TRUSTED for t in trust.values()):
            # every memory operator's effects were contradicted by this run's own measurements: plan on this
            # run's attempts alone, as without memory (the memory records are counted, not used); what memory
            # measured >= 3x slower on an operator with the same knobs stays ruled out
            skip = set(vetoed)
            far = self._defaults_far(collapsed, {})
            if DEFAULTS_FAR_FALLBACK and far:
                # the defaults are no prior point here either: every earlier operator that measured its own
                # defaults measured a setting 3x faster (judged without the trust that set memory aside, which is
                # about effects, not about how far the defaults are from the optimum)
                skip.add(settings_key(self.space.pin(operator, {})))
            if FALLBACK_FROM_DEFAULTS and not far and not self._own_defaults_far(operator, own, incumbent):
                # the incumbent memory chose is no anchor its evidence still backs: the one-knob design walks from
                # the template's defaults, as without memory, unless memory or this run found them 3x off (then
                # the incumbent stays the anchor: conv2d's im2col, 4.5x its measured defaults)
                base = None
            plan = self.plan(
                operator,
                shapes,
                hardware,
                [r for r in records if r.own],
                hardware_facts,
                tried | skip,
                base,
                allowed,
                set_aside=True,
                design_first=design_first,
            )
            plan.records, plan.trust, plan.fallback, plan.vetoes = len(records), trust, True, vetoes
            plan.related = related
            if PORTFOLIO_SET_ASIDE and plan.choices:
                # memory's effects failed here, not necessarily its optima (judged without the trust)
                plan.choices, plan.portfolio = self._portfolio_first(operator, plan.choices, records, {}, incumbent)
            return plan
        speed_x, speed_y, speed_w, distinct = self._speed_data(records, hardware_facts, trust, offsets)
        failed = [r for r in records if not r.correct]
        plan = Plan(
            [],
            len(records),
            sum(1 for r in records if r.own),
            len(speed_y),
            vetoes,
            incumbent,
            shape_class,
            len(failed),
            sum(1 for r in failed if r.hardware_tier in ("vendor", "other")),
            trust,
            related=related,
        )
        if not pool:
            return plan
        if distinct >= MIN_DISTINCT:
            feas_x, feas_y = self._feasibility_data(records, hardware_facts)
            model = CostModel(self.seed).fit(speed_x, speed_y, speed_w, feas_x, feas_y)
            # the optimistic prior is for what memory cannot know: without memory records the initial design
            # and the run's own attempts already explore each knob
            measured = self._measured_values(records, trust) if any(not r.own for r in records) else None
            if measured is not None and not any(t >= TRUSTED for t in trust.values()):
                near = self._near_evidence(operator, pool, records)
                if PORTFOLIO_WHOLE and self._portfolio_open(records):
                    # the portfolio's settings are proposed whole: an earlier operator measured them at its best
                    chosen = {settings_key(c) for c in near}
                    whole = {
                        key
                        for key, _, _ in self._portfolio(operator, records, trust, self._own_best(operator, records))
                    }
                    near += [c for c in pool if settings_key(c) in whole and settings_key(c) not in chosen]
                plan.distant = len(pool) - len(near)
                pool = near or pool
            opened = (
                self._opened_knobs(operator, records, trust) if measured is not None and PRIOR_OPENS_KNOB else set()
            )
            trained = (
                self._trained_values(records, trust)
                if measured is not None or UNSEEN_PESSIMISTIC_ALONE or (set_aside and UNSEEN_PESSIMISTIC_SET_ASIDE)
                else None
            )
            choices = self._by_model(
                model,
                operator,
                pool,
                shapes,
                hardware,
                incumbent,
                measured,
                self._anchors(operator, own),
                opened,
                trained,
            )
            measured_here = {settings_key(self.space.pin(operator, r.settings)) for r in records if r.own}
            if (
                measured is not None
                and settings_key(self.space.pin(operator, {})) not in measured_here
                and not self._defaults_far(collapsed, trust)
                and not (choices and self._backed(operator, choices[0].settings, records, trust))
            ):
                choices = self._defaults_first(operator, choices)
            if incumbent and self._settled(own, incumbent, choices):
                # after the optimum is likely found, a setting predicted >= 3x slower than the incumbent is not
                # worth a step (if the prediction holds it is a severe regression); when nothing else is left
                # the run ends as converged
                floor = incumbent / CONVERGED_RATIO
                kept = [c for c in choices if c.predicted is None or c.predicted > floor]
                plan.hopeless = len(choices) - len(kept)
                choices = kept
            plan.choices = choices
        else:
            plan.choices = self._initial_design(operator, pool, base, design_first)
        if not set_aside and plan.choices:
            plan.choices, plan.portfolio = self._portfolio_first(operator, plan.choices, records, trust, incumbent)
        return plan

    def _related(self, record: TuningRecord) -> bool:
        """A record of another template of the family (``kope.memory.tuning``, related templates)."""
        return record.template is not None and record.template != self.template.name

    def _readable(self, records: Sequence[TuningRecord]) -> list[TuningRecord]:
        """The records as this template reads them: a related template's record keeps only the knobs the two
        templates share (same name, a value this template has), the others at this template's defaults, and is
        left out when fewer than ``RELATED_MIN_KNOBS`` are shared (nothing to learn from its effects). Its
        operator is judged by the trust rule like any memory operator: its effects here are evidence only as
        far as they predicted this run's own measurements."""
        out = []
        knobs = {k.name: k.values for k in self.template.knobs}
        for r in records:
            if not self._related(r):
                out.append(r)
                continue
            shared = {k: v for k, v in r.settings.items() if k in knobs and v in knobs[k]}
            if len(shared) >= RELATED_MIN_KNOBS:
                out.append(replace(r, settings=shared))
        return out

    def _collapsed(self, records: Sequence[TuningRecord]) -> list[TuningRecord]:
        """The records with each related operator's correct attempts reduced to the fastest per setting as read
        here: several of its settings (differing in knobs this template lacks) read as one, and what rules a
        setting out, a value out, or the defaults as a prior point (``_vetoes``, ``_ruled_out_values``,
        ``_defaults_far``: each compares a setting's measurement with the operator's best) must not take a slow
        variant for the setting when a fast one read the same here."""
        out: list[TuningRecord] = []
        best: dict[tuple[str, str], TuningRecord] = {}
        for r in records:
            if not (self._related(r) and r.correct and r.a):
                out.append(r)
                continue
            key = (r.operator, settings_key(r.settings))
            if key not in best or (best[key].a or 0.0) < r.a:
                best[key] = r
        return out + list(best.values())

    def _anchors(self, operator: str, own: Sequence[TuningRecord]) -> list[dict[str, Any]]:
        """This operator's own reference points for the optimistic prior: the template's defaults and its best
        measurement so far. The defaults are no reference point once this run measured them at least
        ``VETO_RATIO`` (3x) below its incumbent (``PRIOR_FAR_DEFAULTS`` off): a one-knob move of them keeps
        every other knob at a level this run measured 3x short, so the prior's question (what does this
        unseen value do?) would be asked where only a 3x effect could pay for the step, and the model's own
        mean already says the step is that far down (conv2d: defaults `direct` 0.14x, incumbent
        `implicit_gemm`/`im2col` 0.44-0.64x; the prior sent `direct` with an unseen micro-kernel or tile size,
        0.12-0.15x, a severe regression, in 7 of 12 simulated repeats)."""
        best = max(own, key=lambda r: r.a or 0.0, default=None)
        anchors = []
        if PRIOR_FAR_DEFAULTS or not self._own_defaults_far(operator, own, best.a if best else None):
            anchors.append(self.space.pin(operator, {}))
        if best is not None:
            anchors.append(self.space.pin(operator, best.settings))
        return anchors

    def _own_defaults_far(self, operator: str, own: Sequence[TuningRecord], incumbent: float | None) -> bool:
        """This run measured the template's defaults and its incumbent at least ``VETO_RATIO`` (3x) above them."""
        key = settings_key(self.space.pin(operator, {}))
        measured = [r.a for r in own if r.a and settings_key(self.space.pin(operator, r.settings)) == key]
        return bool(measured and incumbent and incumbent >= VETO_RATIO * max(measured))

    def _defaults_far(self, records: Sequence[TuningRecord], trust: Mapping[str, float]) -> bool:
        """Memory showed the defaults far from the optimum: every memory operator (trusted at least ``TRUSTED``
        here, or not yet judged) that measured its defaults also measured a setting at least ``VETO_RATIO`` (3x)
        faster (on that operator they are a setting memory rules out), and at least one did. The defaults are
        then no prior point worth a step: memory's ranking goes first (group_norm after batch_norm, whose
        defaults were 7.4x below its best; pointwise's add_scaled, at most 1.04x over its defaults, and gemm's
        batched_matmul, 2.8x, keep them first)."""
        judged = False
        for other, attempts in self._trusted_memory(records, trust).items():
            key = settings_key(self.space.pin(other, {}))
            defaults = [r.a for r in attempts if r.a and settings_key(self.space.pin(other, r.settings)) == key]
            if not defaults:
                continue
            judged = True
            if max(r.a for r in attempts if r.a) < VETO_RATIO * max(defaults):
                return False
        return judged

    def _backed(
        self, operator: str, settings: Mapping[str, Any], records: Sequence[TuningRecord], trust: Mapping[str, float]
    ) -> bool:
        """Memory measured this setting at its best: at least ``BACKED_OPERATORS`` earlier operators of this template
        (trusted at least ``TRUSTED`` here, or not yet judged) measured it within ``BACKED_NEAR`` (5%) of the best
        they measured. It then goes before the untried defaults (``_defaults_first`` is not applied): its
        interval is wide on a new operator, but two operators that found it their optimum are the evidence the
        defaults' prior point stands for (matvec and tall_skinny_matmul after batched_matmul, linear and matmul,
        whose shared optimum the defaults' step delayed: simulated steps 3.17 -> 2.17 and 3.08 -> 1.33). One
        operator is not enough: hardswish and relu, whose defaults are within 10% of their optimum, lost 0.6-0.8
        steps when a single earlier optimum went first."""
        if BACKED_OPERATORS <= 0:
            return False
        key = settings_key(self.space.pin(operator, settings))
        backing = 0
        for attempts in self._trusted_memory(records, trust, related=False).values():
            best = max(r.a for r in attempts if r.a)
            here = [r.a for r in attempts if r.a and settings_key(self.space.pin(operator, r.settings)) == key]
            backing += bool(here and max(here) >= BACKED_NEAR * best)
        return backing >= BACKED_OPERATORS

    def _portfolio(
        self,
        operator: str,
        records: Sequence[TuningRecord],
        trust: Mapping[str, float],
        base: Mapping[str, Any] | None = None,
    ) -> list[tuple[str, int, float]]:
        """What earlier operators of this template found best, as (setting here, operators, mean fraction): each
        setting an earlier operator measured within ``PORTFOLIO_NEAR`` of its own best, most operators first, then
        the highest mean fraction of their best. A knob that matters here and not for the earlier operator (it
        said nothing about it) keeps its value in ``base`` (this run's incumbent; None: the defaults)."""
        base = dict(base or self.space.pin(operator, {}))
        memory = self._trusted_memory(records, trust, related=False)
        score: dict[str, list[float]] = {}
        for attempts in memory.values():
            best = max(r.a for r in attempts if r.a)
            near: dict[str, float] = {}
            for r in attempts:
                if r.a and r.a >= PORTFOLIO_NEAR * best:
                    said = set(self.relevant_names(r.operator)) if PORTFOLIO_OVERLAY else set(r.settings)
                    setting = {**base, **{k: v for k, v in r.settings.items() if k in said}}
                    key = settings_key(self.space.pin(operator, setting))
                    near[key] = max(near.get(key, 0.0), r.a / best)
            for key, fraction in near.items():
                score.setdefault(key, []).append(fraction)
        ranked = [(key, len(f), statistics.fmean(f)) for key, f in score.items()]
        return sorted(ranked, key=lambda t: (-t[1], -t[2], t[0]))

    def _portfolio_first(
        self,
        operator: str,
        choices: list[Choice],
        records: Sequence[TuningRecord],
        trust: Mapping[str, float],
        incumbent: float | None,
    ) -> tuple[list[Choice], tuple[str, int] | None]:
        """A later operator's first ``PORTFOLIO_STEPS`` steps try first the untried setting most earlier operators
        of the template found best (``_portfolio``), where the plan holds it. The model ranks a new operator's
        settings on the level and effects memory measured elsewhere; an earlier operator's optimum is often this
        one's too, or near it, yet an average of effects ranks it below a setting that was good everywhere
        (simulated, 12 repeats, every family: overall 0.74 -> 0.61 on spaces-r3, 0.69 -> 0.65 on spaces-r2;
        docs/learning.md, sixteenth round). The portfolio stops once one of its settings measured here below
        ``PORTFOLIO_STOP`` times the incumbent. Returns the choices and (the setting put first, the earlier
        operators that measured it near their best) or None."""
        own = [r for r in records if r.own]
        if not self._portfolio_open(records):
            return choices, None
        portfolio = self._portfolio(operator, records, trust, self._own_best(operator, records))
        if not portfolio:
            return choices, None
        if PORTFOLIO_YIELDS and self._unknown_unexplored(operator, records):
            return choices, None
        if PORTFOLIO_STOP > 0 and incumbent:
            keys = {key for key, _, _ in portfolio}
            for r in own:
                if (
                    settings_key(self.space.pin(operator, r.settings)) in keys
                    and (r.a or 0.0) < PORTFOLIO_STOP * incumbent
                ):
                    return choices, None
        index = {settings_key(c.settings): i for i, c in enumerate(choices)}
        for key, backing, _ in portfolio:
            if key in index:
                i = index[key]
                high = choices[i].high
                if PORTFOLIO_BELOW_INTERVAL and incumbent and high is not None and high < incumbent:
                    continue  # the model is sure it does not beat the incumbent: no reason to overrule it
                return [choices[i], *choices[:i], *choices[i + 1 :]], (key, backing)
        return choices, None

    @staticmethod
    def _portfolio_open(records: Sequence[TuningRecord]) -> bool:
        """Memory holds records and this run has taken fewer than ``PORTFOLIO_STEPS`` steps."""
        own = sum(1 for r in records if r.own)
        return own < PORTFOLIO_STEPS and own < len(records)

    def _own_best(self, operator: str, records: Sequence[TuningRecord]) -> dict[str, Any] | None:
        """This run's incumbent setting as this operator pins it (None: nothing correct yet)."""
        best = max((r for r in records if r.own and r.correct and r.a), key=lambda r: r.a or 0.0, default=None)
        return self.space.pin(operator, best.settings) if best else None

    def _unknown_unexplored(self, operator: str, records: Sequence[TuningRecord]) -> bool:
        """A knob that matters here and for no earlier operator of the template has not yet been measured here off
        the value memory ran it at: the earlier optima say nothing about it (elu's ``math``, a knob only the
        transcendental operators use, after add_scaled and clamp), and the model's optimistic prior for it goes
        first. (Waiting also on a knob the earlier operators use but never varied was simulated: too wide, it
        blocked the portfolio where a first operator's few steps happened not to vary a knob; docs/learning.md.)"""
        unknown = self._unknown_knobs(operator, records)
        if not unknown:
            return False
        remembered = self._measured_values(
            [r for attempts in self._trusted_memory(records, {}, related=False).values() for r in attempts]
        )
        explored = {k for k, v in self._measured_values([r for r in records if r.own]) if (k, v) not in remembered}
        return any(k not in explored for k in unknown)

    def _unknown_knobs(self, operator: str, records: Sequence[TuningRecord]) -> frozenset[str]:
        """The knobs that matter here and for no earlier operator of the template with a correct attempt in memory
        (empty without such memory: then every knob is unknown alike)."""
        earlier = self._trusted_memory(records, {}, related=False)
        if not earlier:
            return frozenset()
        used = {k for other in earlier for k in self.relevant_names(other)}
        return frozenset(k for k in self.relevant_names(operator) if k not in used)

    def _trusted_memory(
        self, records: Sequence[TuningRecord], trust: Mapping[str, float], related: bool = True
    ) -> dict[str, list[TuningRecord]]:
        """Memory's correct attempts per operator, of the operators trusted at least ``TRUSTED`` here or not yet
        judged (``related=False``: this template's own operators only)."""
        by_operator: dict[str, list[TuningRecord]] = {}
        for r in records:
            if r.own or not (r.correct and r.a) or trust.get(r.operator, 1.0) < TRUSTED:
                continue
            if related or not self._related(r):
                by_operator.setdefault(r.operator, []).append(r)
        return by_operator

    def _defaults_first(self, operator: str, choices: list[Choice]) -> list[Choice]:
        """The template's defaults are a prior point memory must beat before they are skipped: while they are
        untried, memory's first choice goes first only when the low end of its 95% interval is above the
        defaults' predicted speedup; otherwise the defaults are measured first (the one-knob neighbourhood
        around them is where this operator's own evidence starts, and where these spaces' optima mostly are)."""
        key = settings_key(self.space.pin(operator, {}))
        index = next((i for i, c in enumerate(choices) if settings_key(c.settings) == key), None)
        if not index:  # untried defaults are first already, or tried (or not allowed)
            return choices
        top, default = choices[0], choices[index]
        if top.low is not None and default.predicted is not None and top.low > default.predicted:
            return choices
        return [default, *choices[:index], *choices[index + 1 :]]

    @staticmethod
    def _settled(own: Sequence[TuningRecord], incumbent: float, choices: Sequence[Choice]) -> bool:
        """The incumbent stands out: it is at least CONVERGED_RATIO times the median of the run's other correct
        attempts, or of the predictions for the settings still to try. Before that, one setting predicted far
        below a modest incumbent is not ruled out (a transfer that fails on this operator could rule its
        optimum out: instance_norm's affine=folded, 6.2x there, is batch_norm's slowest setting)."""
        others = [r.a for r in own if r.a and r.a < incumbent]
        predicted = [c.predicted for c in choices if c.predicted]
        return any(
            values and incumbent >= CONVERGED_RATIO * statistics.median(values) for values in (others, predicted)
        )

    # -- training data ----------------------------------------------------------------------------
    def _speed_data(
        self,
        records: Sequence[TuningRecord],
        hardware_facts: Mapping[str, HardwareFacts],
        trust: Mapping[str, float] | None = None,
        offsets: Mapping[str, float] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Speed rows; a memory record's weight is multiplied by its operator's ``trust`` (a record of an
        operator trusted less than ``MIN_TRUST`` is left out, and its setting does not count as distinct)."""
        rows, targets, weights = [], [], []
        distinct: set[str] = set()
        shapes: dict[str, CaseShape] = {}
        trust = trust or {}
        offsets = offsets or {}
        for record in records:
            if not record.correct:
                continue
            factor = 1.0 if record.own else trust.get(record.operator, 1.0)
            shift = 0.0 if record.own else offsets.get(record.operator, 0.0)
            if factor < MIN_TRUST:
                continue
            settings_part = None
            for case in record.cases:
                if not (case.passed and case.speedup and case.speedup > 0 and case.shape):
                    continue
                if settings_part is None:
                    settings_part = self.space.settings_part(record.operator, record.settings)
                    hardware_part = self.space.hardware_part(hardware_facts.get(record.hw_id))
                    distinct.add(settings_key(self.space.pin(record.operator, record.settings)))
                shape = shapes.get(case.shape)
                if shape is None:
                    shape = shapes[case.shape] = CaseShape.from_key(case.shape)
                rows.append(settings_part + self.space.shape_part(shape) + hardware_part)
                targets.append(math.log(case.speedup) + shift)
                weights.append(HARDWARE_WEIGHT[record.hardware_tier] * factor * (OWN_WEIGHT if record.own else 1.0))
            if len(targets) >= MAX_SPEED_ROWS:
                break
        if not targets:
            return np.zeros((0, len(self.space.names))), np.zeros(0), np.zeros(0), 0
        return np.asarray(rows), np.asarray(targets), np.asarray(weights), len(distinct)

    def _memory_trust(
        self, operator: str, records: Sequence[TuningRecord], hardware_facts: Mapping[str, HardwareFacts]
    ) -> tuple[dict[str, float], dict[str, float]]:
        """Per memory operator: how far to trust its records for this operator, and its level offset here, from
        how well they predicted this run's own measurements (empty: no own measurement yet, nothing to judge by).

        The residual of an own correct attempt is log(measured) - log(predicted); the prediction is the
        operator's own record of the same setting (pinned to this operator's relevant knobs) when it has one,
        else the prediction of a cost model trained on memory alone. The operator's **offset** is the mean of its
        residuals (another operator may be uniformly faster or slower: its rows are shifted by it, so the model
        learns the effects of knobs at this operator's level). Its **trust** judges the effects, not the level:
        ``1 / (1 + (s / TRUST_SCALE)^2)`` where ``s`` is the spread of the residuals around the offset (with
        ``n - 1`` degrees of freedom), once ``MIN_EFFECTS`` own attempts were predicted; with one, ``s`` is that
        residual itself (a level off by 3x is all the evidence there is). An operator whose knob effects
        held here within ~20% keeps most of its weight, one whose effects were off by a factor of 3 or more
        keeps almost none: an earlier operator's optimum that is this operator's slow setting (or the
        reverse) shows as a spread, whatever the two operators' levels."""
        own = [r for r in records if r.own and r.correct and r.a and r.a > 0]
        others = [r for r in records if not r.own and r.correct and r.a and r.a > 0]
        if not own or not others:
            return {}, {}
        model_residuals: list[float] | None = None
        by_operator: dict[str, dict[str, list[float]]] = {}
        for r in others:
            key = settings_key(self.space.pin(operator, r.settings))
            by_operator.setdefault(r.operator, {}).setdefault(key, []).append(math.log(r.a))  # type: ignore[arg-type]
        trust: dict[str, float] = {}
        offsets: dict[str, float] = {}
        # effects are judged against the spread of this operator's own measurements: on a flat space (settings
        # within 20-40% of each other) an operator whose effects are all wrong is still within 2x everywhere
        own_logs = [math.log(r.a) for r in own]  # type: ignore[arg-type]
        scale = TRUST_SCALE
        if len(own_logs) >= MIN_EFFECTS:
            scale = min(scale, max(statistics.stdev(own_logs), NOISE))
        for other, measured in by_operator.items():
            residuals = []
            for i, r in enumerate(own):
                logs = measured.get(settings_key(self.space.pin(operator, r.settings)))
                if logs:
                    residuals.append(math.log(r.a) - statistics.fmean(logs))  # type: ignore[arg-type]
                    continue
                if model_residuals is None:
                    model_residuals = self._model_residuals(own, others, hardware_facts)
                if model_residuals:
                    residuals.append(model_residuals[i])
            if not residuals:
                continue
            offset = statistics.fmean(residuals)
            if len(residuals) < MIN_EFFECTS:
                spread = abs(residuals[0])
            else:
                spread = math.sqrt(sum((e - offset) ** 2 for e in residuals) / (len(residuals) - 1))
            trust[other] = 1.0 / (1.0 + (spread / scale) ** 2)
            offsets[other] = offset
        return trust, offsets

    def _model_residuals(
        self, own: Sequence[TuningRecord], others: Sequence[TuningRecord], hardware_facts: Mapping[str, HardwareFacts]
    ) -> list[float]:
        """log(measured) - log(predicted) of each own attempt, by a model trained on memory alone."""
        x, y, w, distinct = self._speed_data(others, hardware_facts)
        if not len(y):
            return []
        model = CostModel(self.seed).fit(x, y, w, np.zeros((0, 1)), np.zeros(0))
        out = []
        for r in own:
            shapes = [CaseShape.from_key(c.shape) for c in r.cases if c.passed and c.shape] or [
                CaseShape("default", ())
            ]
            rows = self.space.speed_rows(r.operator, [r.settings], shapes, hardware_facts.get(r.hw_id))
            pred = model.predict(rows, len(shapes), np.zeros((1, 1)))
            out.append(math.log(r.a) - float(pred.mean[0]))  # type: ignore[arg-type]
        return out

    def _near_evidence(
        self, operator: str, pool: list[dict[str, Any]], records: Sequence[TuningRecord]
    ) -> list[dict[str, Any]]:
        """The settings memory may propose while no memory operator has earned trust here (nothing measured
        yet; once every operator's effects failed, memory is set aside): never a whole setting copied from
        another operator without this operator's evidence. A setting qualifies when it is at most one relevant knob away from
        the defaults or from a setting this run measured correct, or when every one of its knob values was
        measured correct in this run (a combination of this operator's own evidence); what memory ranks is
        that neighbourhood, and each step widens it. Once an operator predicted this run's measurements
        within 2x (trust >= TRUSTED), its best settings may be proposed whole."""
        relevant = self.relevant_names(operator)
        anchors = [self.space.pin(operator, {})]
        anchors += [self.space.pin(operator, r.settings) for r in records if r.own and r.correct and r.a]
        own_values = {(k, a[k]) for a in anchors[1:] for k in relevant}
        out = []
        for c in pool:
            near = any(sum(1 for k in relevant if c[k] != a[k]) <= 1 for a in anchors)
            if near or all((k, c[k]) in own_values for k in relevant):
                out.append(c)
        return out

    def _measured_values(
        self, records: Sequence[TuningRecord], trust: Mapping[str, float] | None = None, floor: float = TRUSTED
    ) -> set[tuple[str, Any]]:
        """(knob, value) pairs some correct record of this run or of a memory operator trusted at least
        ``floor`` (``TRUSTED`` unless given) here measured, read as the record's operator pins them (a knob that
        does not matter for it counts at its default, the value its kernel ran with). A value only an operator whose predictions
        failed here measured is as unknown as one nobody measured: it gets the optimistic prior, so a
        transfer that just failed gives way to exploring what this operator has not tried."""
        seen: set[tuple[str, Any]] = set()
        trust = trust or {}
        for r in records:
            if not (r.correct and r.a):
                continue
            if not r.own and trust.get(r.operator, 1.0) < floor:
                continue
            seen.update(self.space.pin(r.operator, r.settings).items())  # a knob that does not matter: its default
        return seen

    def _trained_values(self, records: Sequence[TuningRecord], trust: Mapping[str, float]) -> set[tuple[str, Any]]:
        """(knob, value) pairs of the correct records the cost model is fitted on (this run's, and memory
        operators trusted at least ``MIN_TRUST`` here, as ``_speed_data`` keeps them): the values whose one-hot
        column is not constant in the model's data."""
        return self._measured_values(records, trust, MIN_TRUST)

    def _opened_knobs(self, operator: str, records: Sequence[TuningRecord], trust: Mapping[str, float]) -> set[str]:
        """Relevant knobs that no memory operator trusted at least ``TRUSTED`` here measured at two values or
        more (memory never varied them) and that this run has measured (correct) at a value memory did not
        measure: the optimistic prior's question about that knob, what it does that memory
        cannot know, has had its first answer from this operator, so the knob's other unseen values get no
        prior and are ranked by the model on that answer, as without memory (``PRIOR_OPENS_KNOB``). The prior
        opens a knob; it does not sweep it: layer_norm's and instance_norm's ``variance`` (a knob no earlier
        operator of the template varied, or none trusted here) got ``shifted`` from it, the optimum's value, and then ``welford``,
        0.17-0.7x with the default lanes=1, a severe regression (simulated, 20 repeats: layer_norm 29 severe
        regressions with memory against 12 without, instance_norm 15 against 9; with this rule 20 and 11). A knob
        memory varied keeps the sweep of its unmeasured values (``PRIOR_OPENS_VARIED`` off): there the sweep is
        what later operators' memory is made of (gemm: withholding it cost matvec 2.58 -> 4.50 simulated steps)."""
        remembered = self._measured_values([r for r in records if not r.own], trust)
        varied = {k for k in self.relevant_names(operator) if sum(1 for kk, _ in remembered if kk == k) > 1}
        opened: set[str] = set()
        for r in records:
            if r.own and r.correct and r.a:
                pinned = self.space.pin(operator, r.settings)
                opened.update(
                    k
                    for k in self.relevant_names(operator)
                    if (k, pinned[k]) not in remembered and (PRIOR_OPENS_VARIED or k not in varied)
                )
        return opened

    def _feasibility_data(
        self, records: Sequence[TuningRecord], hardware_facts: Mapping[str, HardwareFacts]
    ) -> tuple[np.ndarray, np.ndarray]:
        rows = [
            self.space.settings_part(r.operator, r.settings) + self.space.hardware_part(hardware_facts.get(r.hw_id))
            for r in records
        ]
        return np.asarray(rows).reshape(len(rows), -1), np.asarray([1.0 if r.correct else 0.0 for r in records])

    # -- vetoes -----------------------------------------------------------------------------------
    def _ruled_out_values(
        self, operator: str, records: Sequence[TuningRecord], shape_class: str | None, hw_class: str
    ) -> set[tuple[str, Any]]:
        """Knob values memory measured at least ``VETO_RATIO`` slower than the other values of the same knob,
        on every operator that measured them (and at least one did; on this shape class and hardware class, as
        for ``_vetoes``): on a memory operator for which the knob
        matters (as it does here), every correct attempt with the value is at least 3x below its best attempt
        with another value of that knob. A value this run measured correct within 3x of its incumbent is
        not ruled out (its own evidence first). elu measured every ``math=libm`` setting 20x below
        ``math=poly``: gelu, sigmoid, silu and tanh no longer spend a step on libm after poly, which
        add_scaled's and clamp's records (math does not matter there: read at its default, libm, ~1x) made
        look only mediocre to the model."""
        relevant = set(self.relevant_names(operator))
        by_operator: dict[str, list[TuningRecord]] = {}
        own_best = 0.0
        own_values: dict[tuple[str, Any], float] = {}
        for r in records:
            if not (r.correct and r.a and r.a > 0):
                continue
            if r.own:
                own_best = max(own_best, r.a)
                for k, v in self.space.pin(operator, r.settings).items():
                    own_values[(k, v)] = max(own_values.get((k, v), 0.0), r.a)
                continue
            if r.hw_class == hw_class and r.shape_class == shape_class:
                by_operator.setdefault(r.operator, []).append(r)
        verdicts: dict[tuple[str, Any], bool] = {}  # value -> ruled out by every operator that measured it
        for other, attempts in by_operator.items():
            knobs = relevant & set(self.relevant_names(other))
            pinned = [(self.space.pin(other, r.settings), r.a or 0.0) for r in attempts]
            for knob in knobs:
                best: dict[Any, float] = {}
                for settings, a in pinned:
                    best[settings[knob]] = max(best.get(settings[knob], 0.0), a)
                if len(best) < 2:
                    continue  # one value measured: nothing to compare it with
                for value, fastest in best.items():
                    others = max(a for v, a in best.items() if v != value)
                    slow = others >= VETO_RATIO * fastest
                    verdicts[(knob, value)] = verdicts.get((knob, value), True) and slow
        return {
            kv
            for kv, slow in verdicts.items()
            if slow and not (own_best and own_values.get(kv, 0.0) * VETO_RATIO > own_best)
        }

    def _vetoes(
        self, operator: str, records: Sequence[TuningRecord], shape_class: str | None, hw_class: str
    ) -> list[Veto]:
        """Settings memory measured >= VETO_RATIO slower than the best of their group (same operator or an
        operator with the same relevant knobs; same shape class; same hardware class)."""
        relevant = self.relevant_names(operator)
        groups: dict[tuple[str, str | None], list[TuningRecord]] = {}
        for r in records:
            if not (r.correct and r.a and r.a > 0) or r.hw_class != hw_class or r.shape_class != shape_class:
                continue
            if self.relevant_names(r.operator) != relevant:
                continue
            groups.setdefault((r.operator, r.shape_class), []).append(r)
        vetoes: dict[str, Veto] = {}
        for group in groups.values():
            best = max(r.a for r in group if r.a)
            for r in sorted(group, key=lambda r: r.id):
                ratio = best / r.a if r.a else math.inf
                if ratio >= VETO_RATIO:
                    key = settings_key(self.space.pin(operator, r.settings))
                    if key not in vetoes or vetoes[key].ratio < ratio:
                        vetoes[key] = Veto(key, r.id, round(ratio, 2))
        return sorted(vetoes.values(), key=lambda v: v.settings_key)

    # -- ranking ----------------------------------------------------------------------------------
    def _by_model(
        self,
        model: CostModel,
        operator: str,
        pool: list[dict[str, Any]],
        shapes: list[CaseShape],
        hardware: HardwareFacts,
        incumbent: float | None,
        measured: set[tuple[str, Any]] | None = None,
        anchors: list[dict[str, Any]] | None = None,
        opened: set[str] | None = None,
        trained: set[tuple[str, Any]] | None = None,
    ) -> list[Choice]:
        speed_x = self.space.speed_rows(operator, pool, shapes, hardware)
        feas_x = self.space.feasibility_rows(operator, pool, hardware)
        pred = model.predict(speed_x, len(shapes), feas_x)
        best = math.log(incumbent) if incumbent else 0.0
        mean, std = pred.mean.copy(), pred.std.copy()
        if measured is not None:
            # an optimistic prior for a knob value no record measured: the model cannot know it (its column is
            # constant in the training data), so its prediction keeps the model's mean (what the other knobs
            # are known to do) and is widened by UNSEEN_SD; its expected improvement then puts it before
            # settings memory showed to be mediocre
            relevant = self.relevant_names(operator)
            for i, c in enumerate(pool):
                if anchors is not None and not any(sum(1 for k in relevant if c[k] != a[k]) <= 1 for a in anchors):
                    continue  # unknown values are explored one knob at a time, from the defaults or the incumbent
                if any((k, c[k]) not in measured and k not in (opened or ()) for k in relevant):
                    std[i] = math.sqrt(std[i] ** 2 + UNSEEN_SD**2)
        if UNSEEN_PESSIMISTIC and trained is not None:
            mean = self._pessimistic_unseen(
                model, operator, pool, shapes, hardware, mean, std, pred.std, trained, opened
            )
        ei = expected_improvement(mean, std, best) * pred.p_correct
        order = sorted(
            range(len(pool)),
            key=lambda i: (-round(float(ei[i]), 12), -float(mean[i] + std[i]), settings_key(pool[i])),
        )
        choices = []
        for i in order:
            mu, sd = float(mean[i]), float(std[i])
            choices.append(
                Choice(
                    settings=pool[i],
                    basis="model",
                    predicted=math.exp(mu),
                    low=math.exp(mu - Z95 * sd),
                    high=math.exp(mu + Z95 * sd),
                    ei=float(ei[i]),
                    p_correct=float(pred.p_correct[i]),
                )
            )
        return choices

    def _pessimistic_unseen(
        self,
        model: CostModel,
        operator: str,
        pool: list[dict[str, Any]],
        shapes: list[CaseShape],
        hardware: HardwareFacts,
        mean: np.ndarray,
        std: np.ndarray,
        model_std: np.ndarray,
        trained: set[tuple[str, Any]],
        opened: set[str] | None = None,
    ) -> np.ndarray:
        """The model's mean for a setting with a knob value no training row has (``trained``: the (knob, value)
        pairs of the records the model was fitted on) is an extrapolation: its one-hot column is constant in the
        data, so the forest reads the value like the values it did see. Where the optimistic prior widened the
        setting, the prior is the reading (exploration, elu's ``math=poly``); elsewhere (a knob whose prior was
        withheld, ``PRIOR_OPENS_KNOB``, or a setting beyond the prior's one-knob reach) the setting is ranked on
        a pessimistic reading: the model's prediction of the same setting with that knob at each value it was
        trained on, the lowest of them, less their spread (the size of the effects this knob was measured to
        have). A step to a value nobody measured is then taken when its expected improvement survives that
        reading, not on the confidence the forest borrowed from the other values (layer_norm's
        ``variance=welford``: predicted 0.97-1.29x [0.64, 1.48] from a 1.24-1.47x incumbent, measured 0.17-0.19x,
        a severe regression in 12 of 12 simulated repeats). With one trained value of the knob there is no effect
        to read and the mean stands."""
        relevant = self.relevant_names(operator)
        values = {k: [v for v in self.template.knob(k).values if (k, v) in trained] for k in relevant}
        out = mean.copy()
        for i, c in enumerate(pool):
            if std[i] > model_std[i]:
                continue  # the optimistic prior's question: left to it
            unseen = [k for k in relevant if (k, c[k]) not in trained and len(values[k]) >= 2]
            if UNSEEN_PESSIMISTIC_ONLY_OPENED:
                unseen = [k for k in unseen if k in (opened or ())]
            if not unseen:
                continue
            reading = float(mean[i])
            for k in unseen:
                variants = [{**c, k: v} for v in values[k]]
                rows = self.space.speed_rows(operator, variants, shapes, hardware)
                feas = self.space.feasibility_rows(operator, variants, hardware)
                known = model.predict(rows, len(shapes), feas).mean
                reading = min(reading, float(known.min())) - float(known.max() - known.min())
            out[i] = reading
        return out

    def evidence(self, operator: str, settings: Mapping[str, Any], records: Sequence[TuningRecord]) -> tuple[str, ...]:
        """Up to three memory records (not this run) nearest to ``settings``: most relevant knob values in
        common (at least half), then the fastest."""
        relevant = self.relevant_names(operator)
        defaults = self.template.default_settings()
        scored = []
        for r in records:
            if r.own or not r.correct or not r.a:
                continue
            same = sum(1 for k in relevant if r.settings.get(k, defaults[k]) == settings.get(k))
            if relevant and same * 2 >= len(relevant):
                scored.append((-same, -r.a, r.id))
        return tuple(item[2] for item in sorted(scored)[:3])

    def _initial_design(
        self,
        operator: str,
        pool: list[dict[str, Any]],
        base: Mapping[str, Any] | None,
        first: frozenset[str] = frozenset(),
    ) -> list[Choice]:
        """Defaults, then one-knob changes of ``base`` (knobs in a seeded order, those in ``first`` before the
        others, nearest values first), then everything else in a seeded order."""
        rng = random.Random(f"{self.seed}:{self.template.name}:{operator}")
        by_key = {settings_key(c): c for c in pool}
        ordered: list[dict[str, Any]] = []
        defaults = settings_key(self.space.pin(operator, {}))
        if defaults in by_key:
            ordered.append(by_key.pop(defaults))
        start = self.space.pin(operator, base or {})
        knobs = list(self.template.relevant_knobs(operator))
        rng.shuffle(knobs)
        knobs.sort(key=lambda knob: knob.name not in first)  # stable: the seeded order within each group
        moves = []
        for order, knob in enumerate(knobs):
            index = knob.values.index(start[knob.name])
            for value_index, value in enumerate(knob.values):
                if value_index != index:
                    moves.append((abs(value_index - index), order, value_index, {**start, knob.name: value}))
        for *_, settings in sorted(moves, key=lambda m: m[:3]):
            key = settings_key(settings)
            if key in by_key:
                ordered.append(by_key.pop(key))
        rest = sorted(by_key)
        rng.shuffle(rest)
        ordered.extend(by_key[k] for k in rest)
        return [Choice(settings=c, basis="initial design") for c in ordered]
