"""Retrieval: z = R(s, M), experience for the current state, as lineages.

A pipeline with named stages:

1. ``fetch_pool``      raw rows: the relevance pool, tier by tier (same operator,
                       then same family, then other families, each first on the
                       same hardware), each ranked in Cypher and fetched only
                       while fewer than k hits are selectable (exact: see there);
2. ``select_hits``     the ranking's diversity rule picks the k hits;
3. ``fetch_lineages``  raw rows: each hit with its ancestor chain and siblings;
   ``fetch_rules``     raw rows: the validity rules and patterns that apply;
4. ``format_result``   typed ``RetrievalResult`` (``Lineage`` records).

Deterministic: equal graphs and queries give equal results (every order ends
on the decision id).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from kope.boundary import Outcome
from kope.db.client import GraphClient, Tx
from kope.memory.ids import uid
from kope.memory.params import DecisionParams
from kope.memory.ranking import DEFAULT_WEIGHTS, RankingWeights, RankQuery, diversify, hardware_tier, operator_tier
from kope.memory.records import InsightRecord
from kope.memory.scoring import LABELS
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

    @classmethod
    def from_outcome(cls, outcome: Outcome, *, layer: str | None = None, exclude: Sequence[str] = ()) -> RetrievalQuery:
        """The query for the state after ``outcome`` (the latest attempt's record)."""
        hw = outcome.hardware
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

    @property
    def ids(self) -> list[str]:
        return [lineage.hit.id for lineage in self.lineages]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- stage 1: the pool ---------------------------------------------------------------------


def _params(ns: str, q: RetrievalQuery, w: RankingWeights, limit: int) -> dict[str, Any]:
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
        "w": w.cypher_params(),
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


# -- stage 4: formatting ---------------------------------------------------------------------


def _lineage(rank: int, scored: Mapping[str, Any], raw: Mapping[str, Any], rq: RankQuery) -> Lineage:
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
    )
    relevance = Relevance(
        score=scored["relevance"],
        operator_tier=operator_tier(scored, rq),
        hardware_tier=hardware_tier(scored, rq),
        layer_match=rq.layer is not None and scored["layer"] == rq.layer,
        error_match=rq.error_kind is not None and scored["error_kind"] == rq.error_kind,
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
) -> RetrievalResult:
    rq = q.rank_query()
    return RetrievalResult(
        query=q,
        k=k,
        lineages=tuple(_lineage(i, hit, lineages[hit["id"]], rq) for i, hit in enumerate(hits)),
        rules=tuple(InsightRecord.from_record(row) for row in rules),
        pool_considered=len(pool),
        elapsed_ms=elapsed_ms,
    )


def retrieve(
    client: GraphClient, ns: str, q: RetrievalQuery, k: int = 8, w: RankingWeights = DEFAULT_WEIGHTS
) -> RetrievalResult:
    """The whole pipeline in one read transaction."""
    if k < 1:
        raise ValueError("k must be >= 1")
    began = time.perf_counter()

    def work(
        tx: Tx,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
        pool = fetch_pool(tx, ns, q, k, w)
        hits = select_hits(pool, k, w)
        return pool, hits, fetch_lineages(tx, ns, hits, w), fetch_rules(tx, ns, q, w)

    pool, hits, lineages, rules = client.read(work)
    return format_result(q, k, pool, hits, lineages, rules, (time.perf_counter() - began) * 1000)
