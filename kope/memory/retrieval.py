"""Retrieval: z = R(s, M), experience for the current state, as lineages.

A pipeline with named stages:

1. ``fetch_pool``      raw rows: the relevance pool, tier by tier (same operator,
                       then same family, then other families, each first on the
                       same hardware), each ranked in Cypher and fetched only
                       while fewer than k hits are selectable (exact: see there);
2. ``select_hits``     the ranking's diversity rule picks the k hits;
3. ``fetch_lineages``  raw rows: each hit with its ancestor chain and siblings;
   ``fetch_rules``     raw rows: the validity rules and patterns that apply;
   ``fetch_effects``   raw rows: effect insights (per-technique speedups with intervals);
   ``fetch_text``      raw rows: full-text matches of the query's text (the LLM path only);
4. ``format_result``   typed ``RetrievalResult`` (``Lineage`` records).

Feasibility and performance evidence are split (the paper's cross-hardware
finding: another machine's memory raised pass coverage while its speed
choices hurt): validity rules (what failed, and how) apply from every
hardware class at full weight, while patterns, effect insights and lineages
(speed evidence) are ranked by hardware similarity, same machine first.

Deterministic: equal graphs and queries give equal results (every order ends
on the decision id).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kope.boundary import Outcome
from kope.db.client import GraphClient, Tx
from kope.memory.ids import uid
from kope.memory.params import DecisionParams
from kope.memory.ranking import (
    DEFAULT_WEIGHTS,
    RankingWeights,
    RankQuery,
    diversify,
    hardware_tier,
    operator_tier,
    shape_tier,
    team_params,
    team_weight,
)
from kope.memory.records import InsightRecord
from kope.memory.scoring import LABELS
from kope.memory.shapes import ShapeSummary, summary_of_cases
from kope.memory.specs import Tier, UsedItem


@dataclass(frozen=True)
class RetrievalQuery:
    """The current state s, as far as retrieval reads it."""

    operator: str
    family: str | None = None
    target: str | None = None
    hardware_id: str | None = None
    hardware_class: str | None = None
    vendor: str | None = None
    layer: str | None = None  # the incumbent's optimization layer
    error_kind: str | None = None  # the latest error kind
    exclude: tuple[str, ...] = ()  # decision ids not to return (e.g. the incumbent, already in the hot tier)
    shape_sig: str | None = None  # the cases' signature and shape class (kope.memory.shapes)
    shape_class: str | None = None
    text: str | None = None  # objective, feedback and error text for the full-text stage (None: no such stage)
    # (team, weight in [0, 1]) of the teams whose evidence counts less ("*": every team not named);
    # weight 0 leaves a team's attempts out (kope.memory.ranking: source team)
    team_weights: tuple[tuple[str, float], ...] = ()

    @classmethod
    def from_outcome(cls, outcome: Outcome, *, layer: str | None = None, exclude: Sequence[str] = ()) -> RetrievalQuery:
        """The query for the state after ``outcome`` (the latest attempt's record)."""
        from kope.memory.shapes import CaseShape

        hw = outcome.hardware
        shapes = ShapeSummary.of(CaseShape.from_params(c.params) for c in outcome.cases)
        return cls(
            outcome.task,
            outcome.family,
            outcome.target,
            hw.id,
            hw.class_,
            hw.vendor,
            layer,
            outcome.error_kind,
            tuple(exclude),
            shapes.signature if shapes else None,
            shapes.shape_class if shapes else None,
        )

    def with_cases(self, cases: Sequence[Mapping[str, Any]]) -> RetrievalQuery:
        """This query with the shape signature of ``cases`` (case dicts: name + parameters)."""
        from dataclasses import replace

        summary = summary_of_cases(cases)
        return replace(
            self,
            shape_sig=summary.signature if summary else None,
            shape_class=summary.shape_class if summary else None,
        )

    def rank_query(self) -> RankQuery:
        return RankQuery(
            self.operator,
            self.family,
            self.hardware_id,
            self.hardware_class,
            self.vendor,
            self.layer,
            self.error_kind,
            tuple(self.exclude),
            self.shape_sig,
            self.shape_class,
            tuple(self.team_weights),
        )


@dataclass(frozen=True)
class StepSummary:
    """One ancestor on a lineage's chain."""

    id: str
    step: int
    title: str
    layer: str
    status: str
    label: str
    a: float | None
    r: float
    d: float


@dataclass(frozen=True)
class BranchSummary:
    """A sibling branch: another attempt started from the same state."""

    id: str
    step: int
    title: str
    layer: str
    status: str
    label: str
    a: float | None
    r: float
    d: float
    error_kind: str | None


@dataclass(frozen=True)
class Hit:
    id: str
    run_id: str
    step: int
    title: str
    thought: str
    layer: str
    parent_id: str | None
    status: str
    label: str
    a: float | None
    r: float
    d: float
    conf: float
    error_kind: str | None
    error_excerpt: str | None
    operator: str
    family: str
    target: str
    hw_id: str
    hw_class: str
    vendor: str
    cases_total: int
    cases_passed: int
    diff: str | None  # unified diff against the parent's kernel (None for a root)
    code_hash: str | None
    params_json: str | None = None
    team: str | None = None  # the team that recorded it (None: recorded before attempts carried one)

    @property
    def params(self) -> DecisionParams:
        return DecisionParams.from_json(self.params_json)


@dataclass(frozen=True)
class Relevance:
    score: float
    operator_tier: str  # operator | family | other
    hardware_tier: str  # hardware | class | vendor | other
    layer_match: bool
    error_match: bool
    shape_match: str = "other"  # signature | class | other
    source: str = "graph"  # graph: the ranked pool; text: a full-text match of the query's text
    team_weight: float = 1.0  # the query's weight of the recording team (kope.memory.ranking.team_weight)


@dataclass(frozen=True)
class Lineage:
    rank: int
    hit: Hit
    relevance: Relevance
    chain: tuple[StepSummary, ...]  # root first ... the hit's parent last
    chain_omitted: int  # older ancestors not listed (the chain keeps the nearest ones)
    siblings: tuple[BranchSummary, ...]
    sibling_total: int
    sibling_counts: dict[str, int]  # label -> how many siblings had it

    def used(self, tier: Tier, tokens: int, rank: int | None = None) -> UsedItem:
        """The USED edge for this lineage once it is in a prompt."""
        return UsedItem(
            kind="decision", id=self.hit.id, tier=tier, rank=self.rank if rank is None else rank, tokens=tokens
        )


@dataclass(frozen=True)
class RetrievalResult:
    query: RetrievalQuery
    k: int
    lineages: tuple[Lineage, ...]
    rules: tuple[InsightRecord, ...]
    pool_considered: int  # candidates fetched from the pool before selection
    elapsed_ms: float
    effects: tuple[InsightRecord, ...] = ()  # effect insights: per-technique speedups with 95% intervals
    text_lineages: tuple[Lineage, ...] = ()  # full-text matches not among the ranked lineages

    @property
    def ids(self) -> list[str]:
        return [lineage.hit.id for lineage in self.lineages]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- stage 1: the pool ---------------------------------------------------------------------


def _params(ns: str, q: RetrievalQuery, w: RankingWeights, limit: int) -> dict[str, Any]:
    teams, team_other = team_params(q.team_weights)
    return {
        "ns": ns,
        "operator": q.operator,
        "family": q.family,
        "hardware_id": q.hardware_id,
        "hardware_class": q.hardware_class,
        "vendor": q.vendor,
        "layer": q.layer,
        "error_kind": q.error_kind,
        "exclude": list(q.exclude),
        "shape_sig": q.shape_sig,
        "shape_class": q.shape_class,
        "w": w.cypher_params(),
        "teams": teams,
        "team_other": team_other,
        "limit": limit,
    }


def fetch_pool(tx: Tx, ns: str, q: RetrievalQuery, k: int, w: RankingWeights) -> list[dict[str, Any]]:
    """Ranked candidates, tier after tier, until the diversity rule can pick k of them.

    Tiers, in order: same operator on the same hardware, same operator elsewhere,
    same family on the same hardware, same family elsewhere, other families.
    Each outranks every later one (``RankingWeights`` enforces the spacing: the
    operator tier beats anything of the family tier, same hardware beats any
    other hardware with any bonus), so a later tier is only needed while fewer
    than k hits are selectable, and the result equals ranking everything.
    A tier that filled its limit may hold more candidates that the diversity
    rule would accept, so the limit grows until the selection is complete.
    """
    tiers = []
    if q.hardware_id is not None:
        tiers.append("memory/retrieve/pool_operator_hw")
    tiers.append("memory/retrieve/pool_operator_rest")
    if q.family is not None:
        if q.hardware_id is not None:
            tiers.append("memory/retrieve/pool_family_hw")
        tiers.append("memory/retrieve/pool_family_rest")
    tiers.append("memory/retrieve/pool_other")
    pool: list[dict[str, Any]] = []
    for name in tiers:
        limit = max(w.pool_size, k)
        while True:
            rows = tx.run(name, **_params(ns, q, w, limit))
            if len(diversify(pool + rows, k, w)) >= k or len(rows) < limit:
                break
            limit *= 4
        pool.extend(rows)
        if len(diversify(pool, k, w)) >= k:
            break
    return pool


# -- stage 2: selection --------------------------------------------------------------------


def select_hits(pool: list[dict[str, Any]], k: int, w: RankingWeights) -> list[dict[str, Any]]:
    return diversify(pool, k, w)


# -- stage 3: lineages and rules --------------------------------------------------------------


def fetch_lineages(tx: Tx, ns: str, hits: list[dict[str, Any]], w: RankingWeights) -> dict[str, dict[str, Any]]:
    if not hits:
        return {}
    rows = tx.run(
        "memory/retrieve/lineages",
        uids=[uid(ns, h["id"]) for h in hits],
        max_chain=w.max_chain,
        max_siblings=w.max_siblings,
    )
    return {row["hit"]["id"]: row for row in rows}


def fetch_rules(tx: Tx, ns: str, q: RetrievalQuery, w: RankingWeights) -> list[dict[str, Any]]:
    """Validity rules of the family from every hardware class (feasibility transfers at full weight) and
    patterns of the family on the query's hardware class (speed evidence)."""
    if q.family is None:
        return []
    return tx.run(
        "memory/retrieve/rules",
        ns=ns,
        family=q.family,
        hw_class=q.hardware_class,
        error_kind=q.error_kind,
        limit=w.max_rules,
    )


def fetch_effects(tx: Tx, ns: str, q: RetrievalQuery, w: RankingWeights) -> list[dict[str, Any]]:
    """Effect insights of the family: same hardware class first, then same shape class, then the largest
    effects (speed evidence is weighted by hardware similarity: other classes come after)."""
    if q.family is None:
        return []
    return tx.run(
        "memory/retrieve/effects",
        ns=ns,
        family=q.family,
        hw_class=q.hardware_class,
        shape_class=q.shape_class,
        limit=w.max_effects,
    )


TEXT_TERMS = 24
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_STOP = frozenset(
    "the and for with from that this was were are not but has have had its into out of on at to in by "
    "an a is it be as or if than then".split()
)


def text_terms(text: str) -> str | None:
    """A Lucene query of plain words of ``text`` (OR-ed, at most TEXT_TERMS): no operator of the query
    syntax can come through, so any feedback text is a valid query."""
    words = []
    for word in _WORD.findall(text):
        lower = word.lower()
        if lower not in _STOP and lower not in words:
            words.append(lower)
        if len(words) >= TEXT_TERMS:
            break
    return " OR ".join(words) if words else None


def fetch_text(tx: Tx, ns: str, q: RetrievalQuery, w: RankingWeights, taken: Sequence[str]) -> list[dict[str, Any]]:
    """Decisions whose title, thought or outcome's error excerpt match the query's text (index ``kope_text``),
    best score first, without those already retrieved."""
    terms = text_terms(q.text or "")
    if terms is None:
        return []
    teams, team_other = team_params(q.team_weights)
    return tx.run(
        "memory/retrieve/text",
        ns=ns,
        teams=teams,
        team_other=team_other,
        text=terms,
        exclude=list(q.exclude) + list(taken),
        fetch=w.max_text * 8,
        limit=w.max_text,
    )


# -- stage 4: formatting ---------------------------------------------------------------------


def _lineage(
    rank: int, scored: Mapping[str, Any], raw: Mapping[str, Any], rq: RankQuery, source: str = "graph"
) -> Lineage:
    h, o = raw["hit"], raw["outcome"]
    hit = Hit(
        id=h["id"],
        run_id=h["run_id"],
        step=h["step"],
        title=h["title"],
        thought=h["thought"] or "",
        layer=h["layer"],
        parent_id=h["parent_id"],
        status=h["status"],
        label=h["label"],
        a=h["a"],
        r=h["r"],
        d=h["d"],
        conf=h["conf"],
        error_kind=h["error_kind"],
        error_excerpt=o["error_excerpt"],
        operator=h["operator"],
        family=h["family"],
        target=h["target"],
        hw_id=h["hw_id"],
        hw_class=h["hw_class"],
        vendor=h["vendor"],
        cases_total=o["cases_total"],
        cases_passed=o["cases_passed"],
        diff=h["diff"],
        code_hash=h["code_hash"],
        params_json=h.get("params_json"),
        team=h.get("team"),
    )
    relevance = Relevance(
        score=scored["relevance"],
        operator_tier=operator_tier(scored, rq),
        hardware_tier=hardware_tier(scored, rq),
        layer_match=rq.layer is not None and scored["layer"] == rq.layer,
        error_match=rq.error_kind is not None and scored["error_kind"] == rq.error_kind,
        shape_match=shape_tier(scored, rq),
        source=source,
        team_weight=team_weight(h, rq),
    )
    chain = tuple(StepSummary(**step) for step in reversed(raw["chain"]))
    siblings = tuple(BranchSummary(**s) for s in raw["siblings"])
    return Lineage(
        rank=rank,
        hit=hit,
        relevance=relevance,
        chain=chain,
        chain_omitted=raw["depth"] - len(chain),
        siblings=siblings,
        sibling_total=raw["sibling_total"],
        sibling_counts=dict(zip(LABELS, raw["sibling_counts"])),
    )


def format_result(
    q: RetrievalQuery,
    k: int,
    pool: list[dict[str, Any]],
    hits: list[dict[str, Any]],
    lineages: dict[str, dict[str, Any]],
    rules: list[dict[str, Any]],
    elapsed_ms: float,
    effects: Sequence[Mapping[str, Any]] = (),
    text_hits: Sequence[Mapping[str, Any]] = (),
    text_lineages: Mapping[str, Mapping[str, Any]] | None = None,
) -> RetrievalResult:
    rq = q.rank_query()
    by_text = text_lineages or {}
    return RetrievalResult(
        query=q,
        k=k,
        lineages=tuple(_lineage(i, hit, lineages[hit["id"]], rq) for i, hit in enumerate(hits)),
        rules=tuple(InsightRecord.from_record(row) for row in rules),
        pool_considered=len(pool),
        elapsed_ms=elapsed_ms,
        effects=tuple(InsightRecord.from_record(row) for row in effects),
        text_lineages=tuple(
            _lineage(i, {**by_text[t["id"]]["hit"], "relevance": t["score"]}, by_text[t["id"]], rq, "text")
            for i, t in enumerate(t for t in text_hits if t["id"] in by_text)
        ),
    )


def retrieve(
    client: GraphClient, ns: str, q: RetrievalQuery, k: int = 8, w: RankingWeights = DEFAULT_WEIGHTS
) -> RetrievalResult:
    """The whole pipeline in one read transaction."""
    if k < 1:
        raise ValueError("k must be >= 1")
    began = time.perf_counter()

    Rows = list[dict[str, Any]]
    ByHit = dict[str, dict[str, Any]]

    def work(tx: Tx) -> tuple[Rows, Rows, ByHit, Rows, Rows, Rows, ByHit]:
        pool = fetch_pool(tx, ns, q, k, w)
        hits = select_hits(pool, k, w)
        text = fetch_text(tx, ns, q, w, [h["id"] for h in hits]) if q.text else []
        return (
            pool,
            hits,
            fetch_lineages(tx, ns, hits, w),
            fetch_rules(tx, ns, q, w),
            fetch_effects(tx, ns, q, w),
            text,
            fetch_lineages(tx, ns, text, w),
        )

    pool, hits, lineages, rules, effects, text, text_lineages = client.read(work)
    return format_result(
        q, k, pool, hits, lineages, rules, (time.perf_counter() - began) * 1000, effects, text, text_lineages
    )
