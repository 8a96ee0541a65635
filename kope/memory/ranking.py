"""Retrieval ranking: every weight in this one place.

A candidate is a Decision already in the graph. Its **relevance** to the query is

    relevance = operator tier + hardware tier + layer match + error match + shape match

=================  ==========================================  ======
component          when                                        weight
=================  ==========================================  ======
operator tier      same operator                               24
                   same family (other operator)                12
                   other family                                 0
hardware tier      same hardware (fingerprint id)               9
                   same hardware class (e.g. x86_64-avx2)       6
                   same vendor                                  3
                   other                                        0
layer match        the candidate's optimization layer equals
                   the incumbent's                              1
error match        the candidate's error kind equals the
                   latest error kind                            1
shape match        same case-set signature (the same problem
                   sizes and dtypes, kope.memory.shapes)        0.5
                   same shape class (dtype, size within 4x)     0.25
=================  ==========================================  ======

**Source team.** Each attempt carries the team that recorded it (``Decision.team``, the run's
team; on the memory server the key's). A query may weight teams (``team_weights``: team ->
weight in [0, 1], ``*`` for every team not named, default 1): the weight scales the attempt's
confidence in the downstream score (``d(v) * confidence * weight``), so inside a relevance
tier and label bucket a trusted team's evidence comes first, and weight 0 leaves a team's
attempts out of retrieval altogether. The querying team's own attempts weigh 1 unless it
names itself. An attempt without a team (recorded before attempts carried one) weighs as
``*``. Relevance tiers are not changed by trust: the same operator on the same hardware
still comes before anything else, whoever recorded it.

The shape match is a within-tier bonus: inside one operator and hardware
tier, attempts on the nearest shapes come first (nearer shapes first within a
tier), while it can never lift a candidate across a tier.

The weights are spaced so that each tier strictly dominates everything below
it (``RankingWeights`` checks this): same operator always beats same family,
and inside one operator tier same hardware beats same class beats same vendor,
whatever the bonuses. Candidates are ordered by

    relevance (high first), label bucket (effective, partial, ineffective,
    negative), d(v) * confidence * team weight (high first), decision id (ascending)

so inside each label bucket the downstream score decides, and equal inputs
always give the same order (the id breaks every tie). Diversity: at most
``max_hits_per_parent`` hits that share a parent (the rest of a branch family is
summarised as siblings of the hits). The same rules run in Cypher
(``cypher/memory/retrieve/pool_*.cypher``, which receive these weights as
parameters) and in ``rank_naively`` below (the reference the tests and the
benchmark compare against).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from kope.memory.scoring import LABELS
from kope.teamweights import OTHER_TEAMS

Row = TypeVar("Row", bound=Mapping[str, Any])


@dataclass(frozen=True)
class RankingWeights:
    same_operator: float = 24.0
    same_family: float = 12.0
    same_hardware: float = 9.0
    same_class: float = 6.0
    same_vendor: float = 3.0
    layer_match: float = 1.0
    error_match: float = 1.0
    same_shape: float = 0.5
    similar_shape: float = 0.25
    # how much the retrieval fetches and returns
    pool_size: int = 32  # candidates fetched per operator tier before the diversity rule
    max_hits_per_parent: int = 2
    max_chain: int = 8  # ancestors kept per lineage (the nearest ones)
    max_siblings: int = 5  # sibling branches listed per lineage (all are counted)
    max_rules: int = 6  # validity rules / patterns returned
    max_effects: int = 6  # effect insights returned
    max_text: int = 3  # full-text matches returned (LLM path)

    def __post_init__(self) -> None:
        bonus = self.layer_match + self.error_match + max(self.same_shape, self.similar_shape)
        checks = [
            (self.same_hardware > self.same_class + bonus, "same_hardware must exceed same_class + bonuses"),
            (self.same_class > self.same_vendor + bonus, "same_class must exceed same_vendor + bonuses"),
            (self.same_vendor > bonus, "same_vendor must exceed the bonuses"),
            (self.same_family > self.same_hardware + bonus, "same_family must exceed same_hardware + bonuses"),
            (
                self.same_operator > self.same_family + self.same_hardware + bonus,
                "same_operator must exceed same_family + same_hardware + bonuses",
            ),
            (min(self.pool_size, self.max_hits_per_parent, self.max_chain) >= 1, "sizes must be >= 1"),
        ]
        for ok, why in checks:
            if not ok:
                raise ValueError(f"RankingWeights: {why}")

    def cypher_params(self) -> dict[str, Any]:
        """The weights as the ``$w`` map the pool statements read."""
        return {k: v for k, v in asdict(self).items()}


DEFAULT_WEIGHTS = RankingWeights()
LABEL_RANK = {label: i for i, label in enumerate(LABELS)}


@dataclass(frozen=True)
class RankQuery:
    """The part of a retrieval query the ranking reads."""

    operator: str
    family: str | None
    hardware_id: str | None
    hardware_class: str | None
    vendor: str | None
    layer: str | None
    error_kind: str | None
    exclude: tuple[str, ...] = ()
    shape_sig: str | None = None
    shape_class: str | None = None
    team_weights: tuple[tuple[str, float], ...] = ()  # (team, weight); "*": every team not named


def with_own_team(weights: Iterable[tuple[str, float]], team: str) -> tuple[tuple[str, float], ...]:
    """``weights`` with the querying team at 1 unless it names itself (no weights: no weighting at all)."""
    pairs = tuple(weights)
    if not pairs or any(t == team for t, _ in pairs):
        return pairs
    return tuple(sorted((*pairs, (team, 1.0))))


def team_params(weights: Iterable[tuple[str, float]]) -> tuple[dict[str, float], float]:
    """The Cypher parameters ``$teams`` (named teams) and ``$team_other`` (the rest) of a weighting."""
    named = {team: float(w) for team, w in weights}
    other = named.pop(OTHER_TEAMS, 1.0)
    return named, other


def team_weight(row: Mapping[str, Any], q: RankQuery) -> float:
    """The weight of the team that recorded ``row`` (``*`` for an unnamed team or none)."""
    named, other = team_params(q.team_weights)
    team = row.get("team")
    return named.get(team, other) if team is not None else other


def operator_tier(row: Mapping[str, Any], q: RankQuery) -> str:
    if row["operator"] == q.operator:
        return "operator"
    if q.family is not None and row["family"] == q.family:
        return "family"
    return "other"


def hardware_tier(row: Mapping[str, Any], q: RankQuery) -> str:
    if q.hardware_id is not None and row["hw_id"] == q.hardware_id:
        return "hardware"
    if q.hardware_class is not None and row["hw_class"] == q.hardware_class:
        return "class"
    if q.vendor is not None and row["vendor"] == q.vendor:
        return "vendor"
    return "other"


def relevance(row: Mapping[str, Any], q: RankQuery, w: RankingWeights = DEFAULT_WEIGHTS) -> float:
    op = {"operator": w.same_operator, "family": w.same_family, "other": 0.0}[operator_tier(row, q)]
    hw = {"hardware": w.same_hardware, "class": w.same_class, "vendor": w.same_vendor, "other": 0.0}[
        hardware_tier(row, q)
    ]
    layer = w.layer_match if q.layer is not None and row["layer"] == q.layer else 0.0
    error = w.error_match if q.error_kind is not None and row["error_kind"] == q.error_kind else 0.0
    shape = shape_match(row, q, w)
    return op + (((hw + layer) + error) + shape)  # the order the Cypher pool statements add in


def shape_tier(row: Mapping[str, Any], q: RankQuery) -> str:
    """signature (the same case-set signature), class (the same shape class) or other."""
    if q.shape_sig is not None and row.get("shape_sig") == q.shape_sig:
        return "signature"
    if q.shape_class is not None and row.get("shape_class") == q.shape_class:
        return "class"
    return "other"


def shape_match(row: Mapping[str, Any], q: RankQuery, w: RankingWeights = DEFAULT_WEIGHTS) -> float:
    """Nearer shapes first within a tier: the same case-set signature, else the same shape class."""
    return {"signature": w.same_shape, "class": w.similar_shape, "other": 0.0}[shape_tier(row, q)]


def sort_key(row: Mapping[str, Any], q: RankQuery, w: RankingWeights = DEFAULT_WEIGHTS) -> tuple[Any, ...]:
    return (-relevance(row, q, w), LABEL_RANK[row["label"]], -(row["d"] * row["conf"] * team_weight(row, q)), row["id"])


def diversify(rows: Iterable[Row], k: int, w: RankingWeights = DEFAULT_WEIGHTS) -> list[Row]:
    """Take rows in order, at most ``max_hits_per_parent`` per parent, until ``k``."""
    per_parent: dict[str, int] = {}
    chosen: list[Row] = []
    for row in rows:
        parent = row["parent_id"]
        if parent is not None:
            if per_parent.get(parent, 0) >= w.max_hits_per_parent:
                continue
            per_parent[parent] = per_parent.get(parent, 0) + 1
        chosen.append(row)
        if len(chosen) >= k:
            break
    return chosen


def rank_naively(
    rows: Sequence[Mapping[str, Any]], q: RankQuery, k: int, w: RankingWeights = DEFAULT_WEIGHTS
) -> list[Mapping[str, Any]]:
    """The whole ranking in Python over every candidate (reference and benchmark baseline)."""
    excluded = set(q.exclude)
    kept = (r for r in rows if r["id"] not in excluded and team_weight(r, q) > 0)
    ordered = sorted(kept, key=lambda r: sort_key(r, q, w))
    return diversify(ordered, k, w)
