"""The offline proposer: tunes the suite's expert kernel templates with a cost model trained on memory.

It needs no LLM, so KOPE's main job runs on a fresh machine with no API key.
For a built-in operator with a template (``harness/suite/templates/<target>``)
each step chooses the template's settings (``kope.agent.tuner``):

* the loop hands it the tuning records memory holds for the template
  (``tuning_query``: this run's attempts, and with memory on a ranked sample of
  the template's other operators, machines and shapes; with ``--no-memory``
  only this run's);
* a random-forest cost model trained on them predicts every untried setting of
  the knobs that matter for the operator (knobs that do not matter stay at
  their defaults, so no step is spent on them), and the setting with the best
  expected improvement over the incumbent is proposed; settings memory shows
  at least 3x slower on the same shape class are never proposed; before the
  model has data on three settings, an initial design (defaults, then
  one-knob changes of the best state) is used;
* a rendered kernel already evaluated in this run (same source hash) is never
  proposed again; when every setting was tried, it says it is exhausted.

Every thought says it is the offline proposer, what the model predicted and
which recorded attempts it rests on. A task without a template gets only
generic decisions: the suite's hand-written example kernel when one ships.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.suite import find_candidate
from harness.suite.kernel_templates import KernelTemplate, template_for
from kope.agent.proposal import Proposal, ProposalRequest, ProposerExhausted
from kope.agent.tuner import Choice, Plan, Tuner, settings_key
from kope.context.state import TaskView
from kope.memory.ids import kernel_id
from kope.memory.shapes import ShapeSummary, case_shape
from kope.memory.tuning import HardwareFacts, TuningQuery

PREFIX = "[offline proposer]"
TemplateLookup = Callable[[str, str], KernelTemplate | None]


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


class OfflineProposer:
    name = "offline"
    model = None

    def __init__(self, seed: int = 0, templates: TemplateLookup = template_for) -> None:
        self.seed = seed
        self.templates = templates

    # -- what the loop fetches for it ---------------------------------------------------------
    def tuning_query(
        self,
        task: TaskView,
        target: str,
        cases: Sequence[Mapping[str, Any]],
        hardware: Mapping[str, Any],
        run_id: str,
        memory: bool,
    ) -> TuningQuery | None:
        template = self.templates(task.operator, target)
        if template is None:
            return None
        summary = ShapeSummary.of(case_shape(c) for c in (cases or task.cases))
        return TuningQuery(
            template=template.name,
            run_id=run_id,
            operator=task.operator,
            hardware_id=hardware.get("id"),
            hardware_class=hardware.get("class"),
            vendor=hardware.get("vendor"),
            shape_sig=summary.signature if summary else None,
            shape_class=summary.shape_class if summary else None,
            run_only=not memory,
        )

    # -- the decision -------------------------------------------------------------------------
    def propose(self, request: ProposalRequest) -> Proposal:
        operator = request.task.operator
        template = self.templates(operator, request.target)
        if template is None:
            return self._generic(request)
        tuner = Tuner(template, self.seed)
        mine = [h for h in request.history if h.params.get("template") == template.name]
        tried = {settings_key(tuner.space.pin(operator, h.params.get("settings") or {})) for h in mine}
        hashes = {h.code_hash for h in request.history if h.code_hash}
        data = request.tuning
        parent = request.parent
        base = None
        if parent is not None and parent.params.get("template") == template.name:
            base = tuner.space.pin(operator, parent.params.get("settings") or {})
        plan = tuner.plan(
            operator,
            [case_shape(c) for c in (request.cases or request.task.cases)],
            HardwareFacts.from_fingerprint(request.hardware),
            data.records if data is not None else (),
            data.hardware if data is not None else {},
            tried,
            base,
        )
        for choice in plan.choices:
            code = template.render(operator, choice.settings)
            if kernel_id(code) in hashes:
                continue  # the same kernel text was evaluated in this run already
            records = data.records if data is not None else ()
            evidence = tuner.evidence(operator, choice.settings, records) if choice.basis == "model" else ()
            return self._proposal(request, template, choice, plan, code, base, evidence, memory=data is not None)
        raise ProposerExhausted(
            f"the offline proposer tried every setting of template '{template.name}' that matters for {operator} "
            f"({len(tuner.candidates(operator))} combinations"
            + (f", {len(plan.vetoes)} ruled out by memory" if plan.vetoes else "")
            + ")"
        )

    def _proposal(
        self,
        request: ProposalRequest,
        template: KernelTemplate,
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
        params: dict[str, Any] = {
            "template": template.name,
            "settings": settings,
            "tuner": {
                **choice.to_dict(),
                "records": plan.records,
                "memory_records": plan.memory,
                "speed_rows": plan.speed_rows,
                "vetoed": len(plan.vetoes),
                "failures": plan.failures,
                "failures_elsewhere": plan.failures_elsewhere,
            },
        }
        if len(changes) == 1:
            params["change"] = changes[0]
        elif changes:
            params["changes"] = changes
        return Proposal(
            title=title,
            layer=layer,
            thought=self._thought(request, template, choice, plan, changes, evidence, memory),
            code=code,
            params=params,
            cited=evidence,
            prompt_tokens=0,
            completion_tokens=0,
        )

    @staticmethod
    def _thought(
        request: ProposalRequest,
        template: KernelTemplate,
        choice: Choice,
        plan: Plan,
        changes: list[dict[str, Any]],
        evidence: tuple[str, ...],
        memory: bool,
    ) -> str:
        what = ", ".join(f"{c['knob']} {c['from']} -> {c['to']}" for c in changes) or "the template's defaults"
        relevant = [k.name for k in template.relevant_knobs(request.task.operator)]
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
        if evidence:
            parts.append(f"Nearest recorded evidence: {', '.join(evidence)}.")
        if plan.vetoes:
            worst = max(plan.vetoes, key=lambda v: v.ratio)
            parts.append(
                f"Not proposing {len(plan.vetoes)} setting(s) memory measured >= 3x slower on {plan.shape_class} "
                f"(e.g. {worst.ratio:.1f}x slower in {worst.evidence})."
            )
        if pinned:
            parts.append(
                f"Knobs that do not matter for {request.task.operator} stay at their defaults: {', '.join(pinned)}."
            )
        return " ".join(parts)

    def _generic(self, request: ProposalRequest) -> Proposal:
        operator = request.task.operator
        example = find_candidate(operator, request.target)
        if example is not None and not any(h.params.get("generic") == "example" for h in request.history):
            return Proposal(
                title="use the shipped example kernel",
                layer="other",
                thought=f"{PREFIX} No kernel template covers {operator}, so only generic decisions are possible: "
                "start from the suite's hand-written example candidate.",
                code=example.read_text(),
                params={"generic": "example"},
            )
        raise ProposerExhausted(
            f"the offline proposer has no kernel template for {operator!r} on {request.target} "
            f"{'and already tried the example kernel' if example else 'and no example kernel ships for it'}; "
            "for such tasks its only generic decision is the suite's example kernel. Use --proposer llm with an "
            "LLM endpoint"
        )
