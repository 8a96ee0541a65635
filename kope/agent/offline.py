"""The offline proposer: explores the suite's expert kernel templates, guided by memory.

It needs no LLM, so KOPE's main job runs on a fresh machine with no API key.
The template is chosen by the *structure* of the task's reference, not its name
(``kope.boundary.task_structure``: the reference is traced on its own inputs and matched against
what each template computes), so a KernelBench file named ``19_ReLU.py``, a user's
own operator or a built-in task all get the template that computes what they
compute, adapted to their constructor, parameter names and output shapes. Each
step is one decision on that template's knobs:

* first step: the best settings that memory holds for the same template on
  the same or similar hardware (the warm lineages that made it into the
  prompt), else the template's defaults;
* later steps: one knob changed from the state the loop starts from (the
  incumbent, or an earlier state after a backtrack), preferring values that
  were part of effective decisions elsewhere, skipping settings that failed
  there or were already tried in this run;
* when every single-knob change from every good state was tried, an untried
  combination; when the whole space was tried, it says it is exhausted.

A task whose structure no template computes ends the run at once with the
explanation (the ops nothing covers), except that a built-in task with a
hand-written example kernel gets that example. The proposer says plainly in
every thought that it is the offline proposer.

What it records with each decision (the extension of its ``DecisionParams``)
is a ``TemplateChoice``: the template, its knob settings, the one-knob change,
or that it used the example kernel; the loop adds the structure match
(``structure``: template, stages and their bindings, or the explanation).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kope.agent.proposal import Proposal, ProposalRequest, ProposerExhausted
from kope.boundary import (
    KernelTemplate,
    TaskError,
    builtin_task_path,
    find_candidate,
    is_match,
    render_for_task,
    structure_summary,
    task_structure,
    templates_for_target,
)
from kope.memory.params import DecisionParams

PREFIX = "[offline proposer]"
GOOD_LABELS = ("effective", "partial")
EXAMPLE = "example"  # TemplateChoice.generic: the suite's hand-written example kernel


def _key(settings: Mapping[str, Any]) -> str:
    return json.dumps(dict(settings), sort_keys=True)


@dataclass(frozen=True)
class TemplateChoice:
    """The offline proposer's facts about one decision (stored as its ``DecisionParams.extension``)."""

    template: str | None = None  # the kernel template rendered
    settings: Mapping[str, Any] = field(default_factory=dict)  # its knob values
    change: Mapping[str, Any] | None = None  # the one knob changed: {"knob", "from", "to"}
    generic: str | None = None  # a decision without a template ("example": the shipped example kernel)

    @classmethod
    def of(cls, params: DecisionParams | Mapping[str, Any] | None) -> TemplateChoice:
        """Read it back from a decision's parameters (typed, or their stored JSON)."""
        if not isinstance(params, DecisionParams):
            params = DecisionParams.from_json(params)
        ext = params.extension
        settings = ext.get("settings")
        return cls(
            template=ext.get("template"),
            settings=dict(settings) if isinstance(settings, Mapping) else {},
            change=ext.get("change"),
            generic=ext.get("generic"),
        )

    def to_extension(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        if self.template is not None:
            data["template"] = self.template
            data["settings"] = dict(self.settings)
        if self.change:
            data["change"] = dict(self.change)
        if self.generic is not None:
            data["generic"] = self.generic
        return data


class OfflineProposer:
    name = "offline"
    model = None

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    # -- memory -------------------------------------------------------------------------------
    @staticmethod
    def _prior(request: ProposalRequest, template: KernelTemplate) -> list[dict[str, Any]]:
        """Lineage hits in the prompt that carry settings usable by ``template`` (best first)."""
        if request.retrieval is None:
            return []
        in_prompt = {item.id for item in request.context.items if item.evidence_kind == "decision"}
        knobs = {k.name: k for k in template.knobs}
        prior = []
        for lineage in request.retrieval.lineages:
            hit = lineage.hit
            if hit.id not in in_prompt:
                continue
            choice = TemplateChoice.of(hit.params)
            settings = {k: v for k, v in choice.settings.items() if k in knobs and v in knobs[k].values}
            if not settings:
                continue
            prior.append(
                {
                    "id": hit.id,
                    "operator": hit.operator,
                    "same_template": choice.template == template.name,
                    "settings": settings,
                    "full": choice.template == template.name and len(settings) == len(knobs),
                    "status": hit.status,
                    "label": hit.label,
                    "a": hit.a or 0.0,
                    "r": hit.r,
                    "hardware": lineage.relevance.hardware_tier,
                    "change": choice.change,
                }
            )
        return sorted(prior, key=lambda p: (p["status"] != "correct", -(p["a"] or 0.0), p["id"]))

    # -- the decision -------------------------------------------------------------------------
    @staticmethod
    def _task_path(request: ProposalRequest) -> str:
        path = getattr(request.task, "path", "") or ""
        if path:
            return path
        builtin = builtin_task_path(request.task.operator)  # a view without its file: the built-in task
        return str(builtin) if builtin is not None else ""

    def _template(self, request: ProposalRequest) -> tuple[KernelTemplate | None, Any]:
        """The template serving the task's traced structure (None when nothing serves it), and the match."""
        match = task_structure(self._task_path(request), request.task.operator, request.target)
        if not is_match(match):
            return None, match
        return templates_for_target(request.target).get(match.template), match

    def propose(self, request: ProposalRequest) -> Proposal:
        template, match = self._template(request)
        self._match = match
        if template is None:
            return self._generic(request, match)
        history = [TemplateChoice.of(h.params) for h in request.history]
        tried = {_key(c.settings) for c in history if c.template == template.name}
        prior = self._prior(request, template)
        failed_elsewhere = {
            _key({**template.default_settings(), **p["settings"]}): p
            for p in prior
            if p["status"] != "correct" and p["same_template"]
        }
        parent = request.parent
        start = TemplateChoice.of(parent.params) if parent is not None else None
        if start is None or start.template != template.name:
            return self._start(request, template, prior, tried)
        base = template.check_settings(dict(start.settings))
        preference = self._preference(template, prior)
        for knob, value in self._neighbours(template, base, preference):
            settings = {**base, knob.name: value}
            key = _key(settings)
            if key in tried:
                continue
            if key in failed_elsewhere:
                continue
            evidence = [p["id"] for p in prior if p["settings"].get(knob.name) == value and p["label"] in GOOD_LABELS][
                :3
            ]
            why = f"{knob.doc}: {base[knob.name]} -> {value}"
            memory_note = (
                f" Memory: {knob.name}={value} was part of effective decisions elsewhere ({', '.join(evidence)})."
                if evidence
                else ""
            )
            skipped = [p for p in failed_elsewhere.values() if p["settings"].get(knob.name) == value]
            if skipped:
                memory_note += f" Avoiding settings that failed on {skipped[0]['operator']} ({skipped[0]['id']})."
            return self._proposal(
                request,
                template,
                settings,
                f"{knob.name}: {base[knob.name]} -> {value}",
                knob.layer,
                f"{PREFIX} {'Backtracked to an earlier state; ' if request.backtracked else ''}"
                f"change one knob of template '{template.name}': {why}.{memory_note}",
                change={"knob": knob.name, "from": base[knob.name], "to": value},
                cited=evidence,
            )
        return self._untried(request, template, tried, failed_elsewhere)

    def _start(
        self, request: ProposalRequest, template: KernelTemplate, prior: list[dict[str, Any]], tried: set[str]
    ) -> Proposal:
        # Whole settings are copied only from the same template: another template's knobs may share names
        # (variance, lanes, ...) but tune other code (measured: instance_norm's channel_norm settings made
        # rms_norm's row_norm kernel 3.0x where its defaults gave 5.1x). Other templates' evidence still
        # steers the later one-knob steps through _preference.
        good = [
            p
            for p in prior
            if p["status"] == "correct" and p["same_template"] and p["label"] in GOOD_LABELS + ("ineffective",)
        ]
        for p in good:
            settings = template.check_settings({**template.default_settings(), **p["settings"]})
            if _key(settings) in tried:
                continue
            where = {
                "hardware": "the same machine",
                "class": "the same hardware class",
                "vendor": "the same vendor",
            }.get(p["hardware"], "other hardware")
            changed = {k: v for k, v in settings.items() if v != template.knob(k).default}
            layer = template.knob(next(iter(changed))).layer if changed else "other"
            return self._proposal(
                request,
                template,
                settings,
                f"start from the best recorded settings ({p['operator']})",
                layer,
                f"{PREFIX} Memory holds {len(prior)} decisions with settings for template '{template.name}'; the best "
                f"correct one ({p['id']}: {p['operator']} on {where}, {p['a']:.2f}x) used {changed or 'the defaults'}. "
                "Start there instead of the defaults.",
                cited=[p["id"]],
            )
        settings = template.default_settings()
        if _key(settings) in tried:
            return self._untried(request, template, tried, {})
        return self._proposal(
            request,
            template,
            settings,
            f"baseline: template {template.name}",
            "other",
            f"{PREFIX} No usable experience for template '{template.name}' in the prompt; start from "
            f"its default settings {settings}.",
        )

    @staticmethod
    def _preference(template: KernelTemplate, prior: list[dict[str, Any]]) -> dict[tuple[str, str], float]:
        score: dict[tuple[str, str], float] = {}
        for rank, p in enumerate(prior):
            if p["status"] != "correct" or p["label"] not in GOOD_LABELS:
                continue
            for name, value in p["settings"].items():
                if value != template.knob(name).default:
                    key = (name, json.dumps(value))
                    score[key] = score.get(key, 0.0) + max(p["a"], 0.1) / (rank + 1)
        return score

    @staticmethod
    def _neighbours(
        template: KernelTemplate, base: Mapping[str, Any], preference: Mapping[tuple[str, str], float]
    ) -> Iterable[tuple[Any, Any]]:
        moves = []
        for order, knob in enumerate(template.knobs):
            index = knob.values.index(base[knob.name])
            for value_index, value in enumerate(knob.values):
                if value_index == index:
                    continue
                pref = preference.get((knob.name, json.dumps(value)), 0.0)
                moves.append((-pref, abs(value_index - index), order, value_index, knob, value))
        moves.sort(key=lambda m: m[:4])
        return [(m[4], m[5]) for m in moves]

    def _untried(
        self, request: ProposalRequest, template: KernelTemplate, tried: set[str], failed: Mapping[str, Any]
    ) -> Proposal:
        rng = random.Random(f"{self.seed}:{request.task.operator}:{request.step}")
        names = [k.name for k in template.knobs]
        space = 1
        for knob in template.knobs:
            space *= len(knob.values)
        for _ in range(min(space * 4, 4000)):
            settings = {k.name: rng.choice(k.values) for k in template.knobs}
            if _key(settings) not in tried and _key(settings) not in failed:
                return self._proposal(
                    request,
                    template,
                    settings,
                    "untried combination",
                    "other",
                    f"{PREFIX} Every single-knob change from the good states was tried; an untried "
                    f"combination of {', '.join(names)}: {settings}.",
                )
        raise ProposerExhausted(
            f"the offline proposer tried every setting of template '{template.name}' "
            f"({space} combinations) for {request.task.operator}"
        )

    def _proposal(
        self,
        request: ProposalRequest,
        template: KernelTemplate,
        settings: dict[str, Any],
        title: str,
        layer: str,
        thought: str,
        *,
        change: dict[str, Any] | None = None,
        cited: Sequence[str] = (),
    ) -> Proposal:
        try:
            code = render_for_task(template, self._match, settings)
        except TaskError as exc:
            raise ProposerExhausted(
                f"the task's structure matches template '{template.name}' ({self._match.structure}), but no "
                f"candidate can be made for it: {exc.message}"
            ) from None
        choice = TemplateChoice(template=template.name, settings=settings, change=change)
        return Proposal(
            title=title,
            layer=layer,
            thought=thought,
            code=code,
            params=choice.to_extension(),
            cited=tuple(cited),
            prompt_tokens=0,
            completion_tokens=0,
            structure=structure_summary(self._match),
        )

    def _generic(self, request: ProposalRequest, match: Any) -> Proposal:
        operator = request.task.operator
        builtin = builtin_task_path(operator)
        example = find_candidate(operator, request.target) if str(builtin) == self._task_path(request) else None
        if example is not None and not any(TemplateChoice.of(h.params).generic == EXAMPLE for h in request.history):
            return Proposal(
                title="use the shipped example kernel",
                layer="other",
                thought=f"{PREFIX} No kernel template computes {operator}'s structure ({match.explanation()}), so "
                "only generic decisions are possible: start from the suite's hand-written example candidate.",
                code=example.read_text(),
                params=TemplateChoice(generic=EXAMPLE).to_extension(),
                structure=structure_summary(match),
            )
        raise ProposerExhausted(
            f"the offline proposer has no kernel template for {operator!r} on {request.target}: "
            f"{match.explanation()}"
            + ("; it already tried the shipped example kernel" if example else "")
            + ". Use --proposer llm with an LLM endpoint"
        )
