"""Assemble one prompt: hot (required) + warm (<= Q_w) + cold (<= Q_c), within B_k.

Policies (for ablations):

- ``active``: hot, then graph-ranked experience (validity rules, effect
  insights, lineages of the same operator or family, and on the LLM path
  full-text matches of the latest feedback) in the warm tier, then knowledge
  documents, cross-family experience and this run's digest in the cold tier;
- ``passive``: hot plus the full chronological history of the task (every
  attempt with its code and feedback), the paper's baseline, limited only by
  the budget (the oldest attempts are dropped first, and said so);
- ``none``: hot only.

Ordering: the hot task sections open the prompt and the incumbent, latest
feedback and instruction close it; warm and cold items sit between, ordered so
the most relevant are nearest the two ends ("U" order). Duplicates (same id or
same kernel) are dropped, and at most ``max_per_group`` items share a parent
state, so one branch family cannot fill the tier. The result is deterministic
for equal inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from kope.context import POLICIES
from kope.context.budget import Budget
from kope.context.hot import ContextBudgetError, HotSections, HotState, fit_hot, join_sections
from kope.context.items import (
    ContextItem,
    digest_item,
    effect_item,
    history_item,
    knowledge_item,
    lineage_item,
    rule_item,
)
from kope.context.templates import render_messages, render_system
from kope.context.tokens import TokenCounter
from kope.errors import UsageError
from kope.memory.retrieval import RetrievalResult
from kope.memory.specs import KnowledgeDoc
from kope.memory.state import AttemptState

# Relevance bases: warm experience above cold material; inside a tier, rank order.
RELEVANCE_RULE = 3.0
RELEVANCE_EFFECT = 2.5
RELEVANCE_LINEAGE = 2.0
RELEVANCE_TEXT = 1.5
RELEVANCE_CROSS_FAMILY = 1.2
RELEVANCE_KNOWLEDGE = 1.0
RELEVANCE_DIGEST = 0.9


@dataclass(frozen=True)
class IncludedItem:
    id: str
    kind: str
    tier: str
    rank: int  # position by relevance inside its tier (0 = most relevant)
    tokens: int
    evidence_kind: str | None
    compact: bool = False


@dataclass
class AssembledContext:
    policy: str
    target: str
    system_text: str
    human_text: str
    budget: Budget
    tokens: dict[str, int]  # hot, warm, cold, system, prompt (= the human message)
    items: list[IncludedItem]
    dropped: list[tuple[str, str]] = field(default_factory=list)  # (id, why)
    notes: list[str] = field(default_factory=list)
    encoding: str = ""
    encoding_exact: bool = False
    hot_level: int = 0

    @property
    def messages(self) -> list[BaseMessage]:
        return render_messages(self.target, self.human_text)

    def evidence(self) -> list[IncludedItem]:
        """Items that become USED edges (decisions, insights, knowledge)."""
        return [item for item in self.items if item.evidence_kind]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["budget"] = self.budget.to_dict()
        return data


def _u_order(items: Sequence[tuple[ContextItem, str]]) -> list[tuple[ContextItem, str]]:
    """Most relevant first and last, least relevant in the middle."""
    ranked = sorted(items, key=lambda pair: (-pair[0].relevance, pair[0].id))
    front: list[tuple[ContextItem, str]] = []
    back: list[tuple[ContextItem, str]] = []
    for i, pair in enumerate(ranked):
        (front if i % 2 == 0 else back).append(pair)
    return front + back[::-1]


class ContextAssembler:
    """Builds prompts for one target/model under one budget."""

    def __init__(
        self,
        budget: Budget,
        *,
        model: str | None = None,
        encoding_fallback: str = "cl100k_base",
        max_per_group: int = 2,
    ) -> None:
        self.budget = budget
        self.counter = TokenCounter(model, encoding_fallback)
        self.max_per_group = max_per_group

    def count(self, text: str) -> int:
        return self.counter.count(text)

    # -- candidates -------------------------------------------------------------------------
    def candidates(
        self,
        state: HotState,
        retrieval: RetrievalResult | None,
        knowledge: Sequence[tuple[KnowledgeDoc, float]],
        history: Sequence[AttemptState],
    ) -> list[ContextItem]:
        items: list[ContextItem] = []
        if retrieval is not None:
            for i, rule in enumerate(retrieval.rules):
                items.append(rule_item(rule, RELEVANCE_RULE + 1.0 / (i + 2)))
            for i, effect in enumerate(retrieval.effects):
                items.append(effect_item(effect, RELEVANCE_EFFECT + 0.5 / (i + 2)))
            for lineage in retrieval.lineages:
                cross = lineage.relevance.operator_tier == "other"
                base = RELEVANCE_CROSS_FAMILY if cross else RELEVANCE_LINEAGE
                items.append(lineage_item(lineage, "cold" if cross else "warm", base + 1.0 / (lineage.rank + 2)))
            for lineage in retrieval.text_lineages:
                # full-text matches supplement the ranked lineages: warm, after them, never replacing them
                items.append(lineage_item(lineage, "warm", RELEVANCE_TEXT + 0.4 / (lineage.rank + 2)))
        for i, (doc, score) in enumerate(knowledge):
            items.append(knowledge_item(doc, score, RELEVANCE_KNOWLEDGE + min(score, 4.0) / 20 + 1.0 / (i + 50)))
        incumbent_id = state.incumbent.id if state.incumbent is not None else None
        older = [e for e in history if e.id not in (incumbent_id,)]
        digest = digest_item(older, RELEVANCE_DIGEST)
        if digest is not None:
            items.append(digest)
        return items

    # -- assembly ---------------------------------------------------------------------------
    def assemble(
        self,
        state: HotState,
        *,
        policy: str = "active",
        retrieval: RetrievalResult | None = None,
        knowledge: Sequence[tuple[KnowledgeDoc, float]] = (),
        history: Sequence[AttemptState] = (),
    ) -> AssembledContext:
        if policy not in POLICIES:
            raise UsageError(f"unknown context policy {policy!r} (choose from {', '.join(POLICIES)})")
        system_text = render_system(state.target)
        system_tokens = self.count(system_text)
        if system_tokens > self.budget.system:
            raise ContextBudgetError(
                f"the system prompt needs {system_tokens} tokens but the allowance S is {self.budget.system}",
                hint="raise context.system (KOPE_CONTEXT_SYSTEM)",
            )
        limit = self.budget.total
        hot, hot_tokens = fit_hot(state, self.count, limit)
        notes = [f"hot compressed: {n}" for n in hot.notes]
        dropped: list[tuple[str, str]] = []

        chosen: list[tuple[ContextItem, str]] = []  # (item, the text used)
        if policy == "active":
            pool = self.candidates(state, retrieval, knowledge, history)
            remaining = limit - hot_tokens
            warm_cap = min(self.budget.warm_cap, remaining)
            warm = self._select([i for i in pool if i.tier == "warm"], warm_cap, dropped, seen=set())
            used_warm = sum(self.count(text) for _, text in warm)
            cold_cap = min(self.budget.cold_cap, remaining - used_warm)
            cold = self._select(
                [i for i in pool if i.tier == "cold"],
                cold_cap,
                dropped,
                seen={i.dedup_key for i, _ in warm if i.dedup_key} | {i.id for i, _ in warm},
            )
            chosen = _u_order(warm + cold)
        elif policy == "passive":
            entries = sorted(history, key=lambda e: (e.step, e.id))
            items = [history_item(e) for e in entries]
            remaining = limit - hot_tokens
            kept: list[ContextItem] = []
            total = 0
            for item in reversed(items):  # newest first: the oldest are dropped when the window is full
                size = self.count(item.text)
                if total + size > remaining:
                    dropped.append((item.id, "passive history beyond the window (oldest dropped)"))
                    continue
                kept.append(item)
                total += size
            chosen = [(item, item.text) for item in reversed(kept)]  # chronological
            if dropped:
                notes.append(f"passive history: {len(dropped)} oldest attempts did not fit")

        human_text, chosen = self._compose(hot, chosen, limit, dropped)
        tokens = {"hot": hot_tokens, "warm": 0, "cold": 0}
        included: list[IncludedItem] = []
        per_tier_rank: dict[str, int] = {}
        for item, text in sorted(chosen, key=lambda pair: (pair[0].tier, -pair[0].relevance, pair[0].id)):
            n = self.count(text)
            tokens[item.tier] = tokens.get(item.tier, 0) + n
            rank = per_tier_rank.get(item.tier, 0)
            per_tier_rank[item.tier] = rank + 1
            included.append(
                IncludedItem(
                    item.id,
                    item.kind,
                    item.tier,
                    rank,
                    n,
                    item.evidence_kind,
                    compact=item.compact is not None and text == item.compact,
                )
            )
        tokens["system"] = system_tokens
        tokens["prompt"] = self.count(human_text)
        return AssembledContext(
            policy=policy,
            target=state.target,
            system_text=system_text,
            human_text=human_text,
            budget=self.budget,
            tokens=tokens,
            items=included,
            dropped=dropped,
            notes=notes,
            encoding=self.counter.note,
            encoding_exact=self.counter.exact,
            hot_level=hot.level,
        )

    def _select(
        self, items: list[ContextItem], cap: int, dropped: list[tuple[str, str]], seen: set[str]
    ) -> list[tuple[ContextItem, str]]:
        """Greedy by relevance within ``cap`` tokens: dedup, diversity, full text else compact."""
        out: list[tuple[ContextItem, str]] = []
        used = 0
        groups: dict[str, int] = {}
        for item in sorted(items, key=lambda i: (-i.relevance, i.id)):
            if item.id in seen or (item.dedup_key and item.dedup_key in seen):
                dropped.append((item.id, "duplicate"))
                continue
            if item.group and groups.get(item.group, 0) >= self.max_per_group:
                dropped.append((item.id, f"diversity: {self.max_per_group} items from the same state already in"))
                continue
            text = None
            for candidate in (item.text, item.compact):
                if candidate and used + self.count(candidate) <= cap:
                    text = candidate
                    break
            if text is None:
                dropped.append((item.id, f"{item.tier} cap ({cap} tokens) reached"))
                continue
            used += self.count(text)
            out.append((item, text))
            seen.add(item.id)
            if item.dedup_key:
                seen.add(item.dedup_key)
            if item.group:
                groups[item.group] = groups.get(item.group, 0) + 1
        return out

    def _compose(
        self, hot: HotSections, chosen: list[tuple[ContextItem, str]], limit: int, dropped: list[tuple[str, str]]
    ) -> tuple[str, list[tuple[ContextItem, str]]]:
        """Join head + items + tail; drop the least relevant items while the whole exceeds B_k."""
        chosen = list(chosen)
        while True:
            text = join_sections([t for _, t in hot.head] + [t for _, t in chosen] + [t for _, t in hot.tail])
            if self.count(text) <= limit or not chosen:
                return text, chosen
            victim = min(chosen, key=lambda pair: (pair[0].relevance, pair[0].id))
            chosen.remove(victim)
            dropped.append((victim[0].id, "joined prompt over B_k"))


def assemble(
    state: HotState,
    budget: Budget,
    *,
    policy: str = "active",
    model: str | None = None,
    retrieval: RetrievalResult | None = None,
    knowledge: Sequence[tuple[KnowledgeDoc, float]] = (),
    history: Sequence[AttemptState] = (),
    encoding_fallback: str = "cl100k_base",
) -> AssembledContext:
    """One-call convenience around :class:`ContextAssembler`."""
    return ContextAssembler(budget, model=model, encoding_fallback=encoding_fallback).assemble(
        state, policy=policy, retrieval=retrieval, knowledge=knowledge, history=history
    )


TokenCount = Callable[[str], int]
