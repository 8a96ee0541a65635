"""The offline proposer: tunes the suite's expert kernel templates with a cost model trained on memory.

It needs no LLM, so KOPE's main job runs on a fresh machine with no API key.
The template is chosen by the *structure* of the task's reference, not its name
(``kope.boundary.task_structure``: the reference is traced on its own inputs and matched against
what each template computes), so a KernelBench file named ``19_ReLU.py``, a user's
own operator or a built-in task all get the template that computes what they
compute, adapted to their constructor, parameter names and output shapes. Each
step chooses that template's settings (``kope.agent.tuner``):

* the loop hands it the tuning records memory holds for the template
  (``tuning_query``: this run's attempts, and with memory on a ranked sample of
  the template's other operators, machines and shapes; with ``--no-memory``
  only this run's);
* a random-forest cost model trained on them predicts every untried setting of
  the knobs that matter for the operator the template renders (knobs that do
  not matter stay at their defaults, so no step is spent on them), and the
  setting with the best expected improvement over the incumbent is proposed;
  settings memory shows at least 3x slower on the same shape class are never
  proposed; before the model has data on three settings, an initial design
  (defaults, then one-knob changes of the best state) is used;
* a rendered kernel already evaluated in this run (same source hash) is never
  proposed again; when every setting was tried, it says it is exhausted; once the
  incumbent stands out, a setting predicted at least 3x slower than it is not
  proposed, and when only such settings are left the run ends as converged.

Every thought says it is the offline proposer, what the model predicted and
which recorded attempts it rests on. A task whose structure no template
computes ends the run at once with the explanation (the ops nothing covers),
except that a built-in task with a hand-written example kernel gets that
example.

What it records with each decision (the extension of its ``DecisionParams``)
is a ``TemplateChoice``: the template, its knob settings, the knob change(s)
from the state it started from, the cost model's prediction (``tuner``), or
that it used the example kernel; the loop adds the structure match
(``structure``: template, stages and their bindings, or the explanation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kope.agent.proposal import Proposal, ProposalRequest, ProposerExhausted
from kope.agent.tuner import CONVERGED_RATIO, Choice, Plan, Tuner, settings_key
from kope.agent.tuner import tuner as tuner_constants
from kope.boundary import (
    UNKNOWN_FAMILY,
    Hardware,
    KernelTemplate,
    TaskError,
    TaskView,
    builtin_task_path,
    find_candidate,
    is_match,
    render_for_task,
    structure_summary,
    task_structure,
    templates_for_target,
)
from kope.memory.ids import kernel_id
from kope.memory.params import DecisionParams
from kope.memory.shapes import ShapeSummary, case_shape
from kope.memory.tuning import HardwareFacts, TuningQuery

PREFIX = "[offline proposer]"
EXAMPLE = "example"  # TemplateChoice.generic: the suite's hand-written example kernel
TemplateLookup = Callable[[str, str], KernelTemplate | None]


def _portfolio(plan: Plan, choice: Choice) -> int:
    """How many earlier operators measured ``choice`` near their best, when the portfolio put it first (else 0)."""
    if plan.portfolio is None or plan.portfolio[0] != settings_key(choice.settings):
        return 0
    return plan.portfolio[1]


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


@dataclass(frozen=True)
class TemplateChoice:
    """The offline proposer's facts about one decision (stored as its ``DecisionParams.extension``)."""

    template: str | None = None  # the kernel template rendered
    settings: Mapping[str, Any] = field(default_factory=dict)  # its knob values
    change: Mapping[str, Any] | None = None  # the one knob changed: {"knob", "from", "to"}
    generic: str | None = None  # a decision without a template ("example": the shipped example kernel)
    changes: tuple[Mapping[str, Any], ...] = ()  # several knobs changed at once (each {"knob", "from", "to"})
    tuner: Mapping[str, Any] | None = None  # the cost model's prediction and what it trained on

    @classmethod
    def of(cls, params: DecisionParams | Mapping[str, Any] | None) -> TemplateChoice:
        """Read it back from a decision's parameters (typed, or their stored JSON)."""
        if not isinstance(params, DecisionParams):
            params = DecisionParams.from_json(params)
        ext = params.extension
        settings = ext.get("settings")
        changes = ext.get("changes")
        tuner = ext.get("tuner")
        return cls(
            template=ext.get("template"),
            settings=dict(settings) if isinstance(settings, Mapping) else {},
            change=ext.get("change"),
            generic=ext.get("generic"),
            changes=tuple(dict(c) for c in changes) if isinstance(changes, list) else (),
            tuner=dict(tuner) if isinstance(tuner, Mapping) else None,
        )

    def to_extension(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.template is not None:
            data["template"] = self.template
            data["settings"] = dict(self.settings)
        if self.change:
            data["change"] = dict(self.change)
        if self.changes:
            data["changes"] = [dict(c) for c in self.changes]
        if self.tuner is not None:
            data["tuner"] = dict(self.tuner)
        if self.generic is not None:
            data["generic"] = self.generic
        return data


class OfflineProposer:
    name = "offline"
    model = None

    def __init__(self, seed: int = 0, templates: TemplateLookup | None = None) -> None:
        """``templates``: look the template up by operator name instead of by the task's traced structure
        (a synthetic template that serves made-up operators, as the tuner's unit tests use; the candidate is
        then the template's own ``render(operator, ...)``)."""
        self.seed = seed
        self.templates = templates
        self._match: Any = None

    # -- the template ---------------------------------------------------------------------------
    @staticmethod
    def _task_path(task: TaskView) -> str:
        path = getattr(task, "path", "") or ""
        if path:
            return str(path)
        builtin = builtin_task_path(task.operator)  # a view without its file: the built-in task
        return str(builtin) if builtin is not None else ""

    def _template(self, task: TaskView, target: str) -> tuple[KernelTemplate | None, Any]:
        """The template serving the task's traced structure (None when nothing serves it), and the match."""
        if self.templates is not None:
            return self.templates(task.operator, target), None
        match = task_structure(self._task_path(task), task.operator, target)
        if not is_match(match):
            return None, match
        return templates_for_target(target).get(match.template), match

    @staticmethod
    def _served(match: Any, operator: str) -> str:
        """The template operator the task is rendered as (a knob's relevance is declared for those)."""
        served = getattr(match, "operator", None) if match is not None else None
        return str(served) if served else operator

    # -- what the loop fetches for it ---------------------------------------------------------
    def tuning_query(
        self,
        task: TaskView,
        target: str,
        cases: Sequence[Mapping[str, Any]],
        hardware: Hardware,
        run_id: str,
        memory: bool,
    ) -> TuningQuery | None:
        template, _ = self._template(task, target)
        if template is None:
            return None
        hw = HardwareFacts.from_fingerprint(hardware)
        summary = ShapeSummary.of(case_shape(c) for c in (cases or task.cases))
        return TuningQuery(
            template=template.name,
            run_id=run_id,
            operator=task.operator,
            hardware_id=hw.id,
            hardware_class=hw.hw_class,
            vendor=hw.vendor,
            shape_sig=summary.signature if summary else None,
            shape_class=summary.shape_class if summary else None,
            run_only=not memory,
            # the family's other templates stand in for an empty sample (kope.memory.tuning: related templates)
            family=task.family if task.family and task.family != UNKNOWN_FAMILY else None,
        )

    # -- the decision -------------------------------------------------------------------------
    def propose(self, request: ProposalRequest) -> Proposal:
        template, match = self._template(request.task, request.target)
        self._match = match
        if template is None:
            return self._generic(request, match)
        operator = self._served(match, request.task.operator)
        tuner = Tuner(template, self.seed)
        mine = [c for c in (TemplateChoice.of(h.params) for h in request.history) if c.template == template.name]
        tried = {settings_key(tuner.space.pin(operator, c.settings)) for c in mine}
        hashes = {h.decision.code_hash for h in request.history if h.decision.code_hash}
        data = request.tuning
        parent = request.parent
        start = TemplateChoice.of(parent.params) if parent is not None else None
        base = (
            tuner.space.pin(operator, start.settings) if start is not None and start.template == template.name else None
        )
        records = data.records if data is not None else ()
        # a replay evaluator's recorded space: only its settings (none of this template's: nothing to propose)
        allowed = request.allowed.get(template.name, frozenset()) if request.allowed is not None else None
        plan = tuner.plan(
            operator,
            [case_shape(c) for c in (request.cases or request.task.cases)],
            HardwareFacts.from_fingerprint(request.hardware),
            records,
            data.hardware if data is not None else {},
            tried,
            base,
            allowed,
        )
        for choice in plan.choices:
            code = self._render(template, operator, choice.settings)
            if kernel_id(code) in hashes:
                continue  # the same kernel text was evaluated in this run already
            evidence = tuner.evidence(operator, choice.settings, records) if choice.basis == "model" else ()
            return self._proposal(
                request, template, operator, choice, plan, code, base, evidence, memory=data is not None
            )
        if plan.converged:
            raise ProposerExhausted(
                f"converged: each of the {plan.hopeless} setting(s) of template '{template.name}' not tried yet "
                f"for {operator} is predicted at least {CONVERGED_RATIO:g}x slower than the incumbent "
                f"({_x(plan.incumbent)}); trying them would be a severe regression if the prediction holds"
            )
        raise ProposerExhausted(
            f"the offline proposer tried every setting of template '{template.name}' that matters for {operator} "
            f"({len(tuner.candidates(operator))} combinations"
            + (f", {len(plan.vetoes)} ruled out by memory" if plan.vetoes else "")
            + (f"; the recorded space holds {len(allowed)} of them" if allowed is not None else "")
            + ")"
        )

    def _render(self, template: KernelTemplate, operator: str, settings: Mapping[str, Any]) -> str:
        if self._match is None:  # a template looked up by name (``templates``): its own operator's kernel
            return template.render(operator, dict(settings))
        try:
            return render_for_task(template, self._match, settings)
        except TaskError as exc:
            raise ProposerExhausted(
                f"the task's structure matches template '{template.name}' ({self._match.structure}), but no "
                f"candidate can be made for it: {exc.message}"
            ) from None

    def _proposal(
        self,
        request: ProposalRequest,
        template: KernelTemplate,
        operator: str,
        choice: Choice,
        plan: Plan,
        code: str,
        base: Mapping[str, Any] | None,
        evidence: tuple[str, ...],
        *,
        memory: bool,
    ) -> Proposal:
        settings = choice.settings
        reference = base or template.default_settings()
        changes = [
            {"knob": k.name, "from": reference[k.name], "to": settings[k.name]}
            for k in template.knobs
            if settings[k.name] != reference[k.name]
        ]
        if settings == template.default_settings():
            title = f"baseline: template {template.name}"
        elif changes:
            title = f"tune {template.name}: " + ", ".join(f"{c['knob']}={c['to']}" for c in changes)
        else:
            title = f"tune {template.name}"
        layer = template.knob(changes[0]["knob"]).layer if changes else "other"
        tuned = TemplateChoice(
            template=template.name,
            settings=settings,
            change=changes[0] if len(changes) == 1 else None,
            changes=tuple(changes) if len(changes) > 1 else (),
            tuner={
                **choice.to_dict(),
                "records": plan.records,
                "memory_records": plan.memory,
                "speed_rows": plan.speed_rows,
                "vetoed": len(plan.vetoes),
                "failures": plan.failures,
                "failures_elsewhere": plan.failures_elsewhere,
                "memory_set_aside": plan.fallback,
                "related_records": dict(plan.related),
                "portfolio": _portfolio(plan, choice),
            },
        )
        return Proposal(
            title=title,
            layer=layer,
            thought=self._thought(request, template, operator, choice, plan, changes, evidence, memory),
            code=code,
            params=tuned.to_extension(),
            cited=evidence,
            prompt_tokens=0,
            completion_tokens=0,
            structure=structure_summary(self._match) if self._match is not None else None,
        )

    @staticmethod
    def _thought(
        request: ProposalRequest,
        template: KernelTemplate,
        operator: str,
        choice: Choice,
        plan: Plan,
        changes: list[dict[str, Any]],
        evidence: tuple[str, ...],
        memory: bool,
    ) -> str:
        what = ", ".join(f"{c['knob']} {c['from']} -> {c['to']}" for c in changes) or "the template's defaults"
        relevant = [k.name for k in template.relevant_knobs(operator)]
        pinned = [k.name for k in template.knobs if k.name not in relevant]
        parts = [
            f"{PREFIX} {'Backtracked to an earlier state; ' if request.backtracked else ''}template "
            f"'{template.name}', {what}."
        ]
        source = (
            f"{plan.records} recorded attempts ({plan.own} from this run, {plan.memory} from memory)"
            if memory
            else f"{plan.own} attempts of this run (memory off)"
        )
        if choice.basis == "model":
            parts.append(
                f"Cost model (random forest) trained on {source}, {plan.speed_rows} timed cases: predicts "
                f"{_x(choice.predicted)} (95% {_x(choice.low)}-{_x(choice.high)}), expected improvement "
                f"{choice.ei:.3f} over "
                + (f"the incumbent {_x(plan.incumbent)}" if plan.incumbent else "the reference (no incumbent yet)")
                + f", P(correct) {choice.p_correct:.2f}."
            )
        else:
            parts.append(
                f"Initial design (the model needs timed attempts of at least three settings; it has {source})."
            )
        if plan.related and memory:
            others = ", ".join(f"{name} {n}" for name, n in sorted(plan.related.items()))
            parts.append(
                f"Memory holds no attempt of template '{template.name}' from another run: {sum(plan.related.values())} "
                f"of its records are the family's other templates ({others}), read through the knobs they share."
            )
        backing = _portfolio(plan, choice)
        if backing:
            near, steps = 1 - tuner_constants.PORTFOLIO_NEAR, tuner_constants.PORTFOLIO_STEPS
            parts.append(
                f"Portfolio: {backing} earlier operator(s) of template '{template.name}' measured this setting "
                f"within {near:.0%} of their own best; it is tried before the model's ranking in this operator's "
                f"first {steps} steps."
            )
        if plan.fallback:
            lowest = ", ".join(f"{op} {t:.2f}" for op, t in sorted(plan.trust.items(), key=lambda kv: kv[1])[:3])
            parts.append(
                f"Memory set aside: every other operator's knob effects were off by more than 2x on this "
                f"operator's own measurements (trust {lowest}), so this step is planned on this run's attempts alone."
            )
        if evidence:
            parts.append(f"Nearest recorded evidence: {', '.join(evidence)}.")
        if plan.vetoes:
            worst = max(plan.vetoes, key=lambda v: v.ratio)
            parts.append(
                f"Not proposing {len(plan.vetoes)} setting(s) memory measured >= 3x slower on {plan.shape_class} "
                f"(e.g. {worst.ratio:.1f}x slower in {worst.evidence})."
            )
        if pinned:
            parts.append(f"Knobs that do not matter for {operator} stay at their defaults: {', '.join(pinned)}.")
        return " ".join(parts)

    def _generic(self, request: ProposalRequest, match: Any) -> Proposal:
        operator = request.task.operator
        builtin = builtin_task_path(operator)
        example = find_candidate(operator, request.target) if str(builtin) == self._task_path(request.task) else None
        why = match.explanation() if match is not None else "no template serves it"
        if example is not None and not any(TemplateChoice.of(h.params).generic == EXAMPLE for h in request.history):
            return Proposal(
                title="use the shipped example kernel",
                layer="other",
                thought=f"{PREFIX} No kernel template computes {operator}'s structure ({why}), so "
                "only generic decisions are possible: start from the suite's hand-written example candidate.",
                code=example.read_text(),
                params=TemplateChoice(generic=EXAMPLE).to_extension(),
                structure=structure_summary(match) if match is not None else None,
            )
        raise ProposerExhausted(
            f"the offline proposer has no kernel template for {operator!r} on {request.target}: {why}"
            + ("; it already tried the shipped example kernel" if example else "")
            + ("" if getattr(match, "off_target", False) else ". Use --proposer llm with an LLM endpoint")
        )
