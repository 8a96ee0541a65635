"""Warm and cold items: experience and knowledge serialized compactly, each with its id.

Every item has a full and a compact rendering; the assembler uses the compact
one when the full one does not fit. Lineages become decision -> outcome chains
with labels and ratios, a before/after diff rather than whole files, and
sibling branches as one line each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kope.context.hot import trim_lines
from kope.memory.records import InsightRecord
from kope.memory.retrieval import BranchSummary, Lineage, StepSummary
from kope.memory.specs import KnowledgeDoc
from kope.memory.state import AttemptState

MAX_DIFF_LINES = 40
MAX_THOUGHT_CHARS = 400
MAX_HISTORY_CODE_LINES = 400


@dataclass(frozen=True)
class ContextItem:
    """One candidate for the warm or cold tier (or the passive history)."""

    id: str
    kind: str  # lineage | rule | effect | knowledge | digest | history
    tier: str  # warm | cold
    relevance: float  # higher = more relevant; orders the prompt
    text: str
    compact: str | None = None  # shorter rendering, used when ``text`` does not fit
    group: str | None = None  # diversity key (the parent state of a lineage)
    evidence_kind: str | None = None  # decision | insight | knowledge: becomes a USED edge
    dedup_key: str | None = None  # items with the same key are duplicates (e.g. same kernel)


def _num(value: float | None, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "n/a"


def _step_line(step: StepSummary | BranchSummary) -> str:
    ratio = "" if step.status != "correct" else f", r {_num(step.r, '.2f')}"
    return f'"{step.title}" ({step.status}, {step.label}{ratio}, a {_num(step.a, ".2f")}x)'


def _branches(lineage: Lineage, compact: bool) -> str | None:
    if not lineage.sibling_total:
        return None
    counts = ", ".join(f"{label} {n}" for label, n in lineage.sibling_counts.items() if n)
    head = f"other branches from the same state: {lineage.sibling_total} ({counts})"
    if compact:
        return head
    lines = [head]
    for s in lineage.siblings:
        extra = f" [{s.error_kind}]" if s.error_kind else ""
        lines.append(f'  - [{s.id}] "{s.title}" ({s.layer}): {s.status}, {s.label}, r {_num(s.r, ".2f")}{extra}')
    return "\n".join(lines)


def lineage_item(lineage: Lineage, tier: str, relevance: float) -> ContextItem:
    """A retrieved lineage as a prompt item."""
    h, rel = lineage.hit, lineage.relevance
    where = f"{rel.operator_tier} match: {h.operator} ({h.family}); hardware: {rel.hardware_tier} ({h.hw_class})"
    if rel.shape_match != "other":
        where += f"; shapes: {'the same cases' if rel.shape_match == 'signature' else 'same shape class'}"
    if rel.source == "text":
        where += "; found by full-text search of the latest feedback"
    if rel.team_weight != 1.0:
        where += f"; recorded by team {h.team or 'unknown'}, trusted at {rel.team_weight:g}"
    header = f'### Experience [{h.id}] "{h.title}"\n{where}'
    status = (
        f"outcome: {h.status}, {h.label}, r {_num(h.r, '.2f')}, a {_num(h.a, '.2f')}x, "
        f"{h.cases_passed}/{h.cases_total} cases, layer {h.layer}, downstream d {_num(h.d, '.2f')}"
    )
    chain = " -> ".join([_step_line(s) for s in lineage.chain] + ["this"])
    if lineage.chain_omitted:
        chain = f"({lineage.chain_omitted} older steps) -> " + chain
    parts_full = [header, status, f"lineage: {chain}"]
    parts_compact = [header, status, f"lineage: {chain}"]
    if h.thought:
        thought = h.thought if len(h.thought) <= MAX_THOUGHT_CHARS else h.thought[: MAX_THOUGHT_CHARS - 3] + "..."
        parts_full.append(f"thought: {thought}")
    if h.error_kind:
        excerpt = (h.error_excerpt or "").strip()
        first = excerpt.splitlines()[0][:200] if excerpt else ""
        parts_full.append(f"error: {h.error_kind}" + (f": {trim_lines(excerpt, 4)[0]}" if excerpt else ""))
        parts_compact.append(f"error: {h.error_kind}" + (f": {first}" if first else ""))
    if h.diff:
        diff, _ = trim_lines(h.diff.strip("\n"), MAX_DIFF_LINES // 2)
        parts_full.append(f"change vs its parent:\n```diff\n{diff}\n```")
    branches_full, branches_compact = _branches(lineage, False), _branches(lineage, True)
    if branches_full and branches_compact:
        parts_full.append(branches_full)
        parts_compact.append(branches_compact)
    return ContextItem(
        id=h.id,
        kind="lineage",
        tier=tier,
        relevance=relevance,
        text="\n".join(parts_full),
        compact="\n".join(parts_compact),
        group=h.parent_id or h.id,
        evidence_kind="decision",
        dedup_key=h.code_hash,
    )


def rule_item(rule: InsightRecord, relevance: float) -> ContextItem:
    """A validity rule or pattern."""
    kind = "validity rule" if rule.kind == "rule" else "pattern"
    text = (
        f"### {kind.capitalize()} [{rule.id}] (support {rule.support}, confidence {_num(rule.confidence, '.2f')}, "
        f"{rule.family} on {rule.hw_class})\n{rule.text}"
    )
    return ContextItem(
        id=rule.id,
        kind="rule",
        tier="warm",
        relevance=relevance,
        text=text,
        evidence_kind="insight",
        dedup_key=f"rule:{rule.text}",
    )


def effect_item(effect: InsightRecord, relevance: float) -> ContextItem:
    """An effect insight (an ``InsightRecord`` of kind "effect"): a technique's measured speedup."""
    text = (
        f"### Effect [{effect.id}] ({effect.template}.{effect.knob}={effect.value} vs {effect.baseline}, "
        f"n={effect.support}, {effect.family} on {effect.hw_class}, {effect.shape_class})\n{effect.text}"
    )
    return ContextItem(
        id=effect.id,
        kind="effect",
        tier="warm",
        relevance=relevance,
        text=text,
        evidence_kind="insight",
        dedup_key=f"effect:{effect.id}",
    )


def knowledge_item(doc: KnowledgeDoc, score: float, relevance: float) -> ContextItem:
    """A shipped knowledge document."""
    body = doc.text.strip()
    text = f"### Knowledge [{doc.id}] {doc.title}\n{body}"
    paragraphs = [p for p in body.split("\n\n") if p.strip()]
    compact = f"### Knowledge [{doc.id}] {doc.title}\n" + "\n\n".join(paragraphs[:3])
    if len(paragraphs) > 3:
        compact += "\n[... rest of the document omitted]"
    return ContextItem(
        id=doc.id,
        kind="knowledge",
        tier="cold",
        relevance=relevance,
        text=text,
        compact=compact,
        evidence_kind="knowledge",
        dedup_key=f"knowledge:{doc.id}",
    )


def digest_item(entries: Sequence[AttemptState], relevance: float) -> ContextItem | None:
    """Older attempts of this run, one line each (newest first)."""
    if not entries:
        return None
    lines = ["### This run so far (older attempts, newest first)"]
    for d in sorted((e.decision for e in entries), key=lambda d: -d.step):
        lines.append(
            f'- step {d.step} [{d.id}] "{d.title}" ({d.layer}): {d.status}'
            + (f", {d.label}" if d.label else "")
            + (f", {_num(d.a, '.2f')}x" if d.a else "")
        )
    compact = "\n".join(lines[:9]) + ("\n- ..." if len(lines) > 9 else "")
    return ContextItem(
        id="digest:run", kind="digest", tier="cold", relevance=relevance, text="\n".join(lines), compact=compact
    )


def history_item(entry: AttemptState) -> ContextItem:
    """A full earlier attempt, code and feedback included (the passive baseline)."""
    d = entry.decision
    lines = [f'### Attempt step {d.step} [{d.id}] "{d.title}" ({d.layer})']
    if d.thought:
        lines.append(f"thought: {d.thought}")
    o = entry.outcome
    counts = f"{o.cases_passed}/{o.cases_total}" if o is not None else "?/?"
    lines.append(
        f"result: {d.status}"
        + (f" [{o.error_kind}]" if o is not None and o.error_kind else "")
        + f", {counts} cases, speedup {_num(d.a, '.2f')}x"
    )
    if o is not None and o.error_excerpt:
        lines.append("error output:\n```\n" + o.error_excerpt.strip() + "\n```")
    if entry.code:
        code, _ = trim_lines(entry.code.strip(), MAX_HISTORY_CODE_LINES // 2)
        lines.append("code:\n```python\n" + code + "\n```")
    return ContextItem(
        id=d.id,
        kind="history",
        tier="warm",
        relevance=float(d.step),
        text="\n".join(lines),
        evidence_kind="decision",
    )
