"""Ranking weights and the Python reference ranking (kope/memory/ranking.py)."""

import random

import pytest

from kope.memory.ranking import RankingWeights, RankQuery, diversify, rank_naively, relevance


def row(
    id,
    operator="softmax",
    family="normalization",
    hw_id="hw-a",
    hw_class="x86_64-avx2",
    vendor="intel",
    layer="tiling",
    error_kind=None,
    label="effective",
    d=1.0,
    conf=1.0,
    parent_id=None,
):
    return dict(
        id=id,
        operator=operator,
        family=family,
        hw_id=hw_id,
        hw_class=hw_class,
        vendor=vendor,
        layer=layer,
        error_kind=error_kind,
        label=label,
        d=d,
        conf=conf,
        parent_id=parent_id,
    )


Q = RankQuery("softmax", "normalization", "hw-a", "x86_64-avx2", "intel", "tiling", "compile_error")


def test_weights_that_break_tier_dominance_are_rejected():
    with pytest.raises(ValueError, match="same_class must exceed"):
        RankingWeights(same_class=3.5)
    with pytest.raises(ValueError, match="same_operator must exceed"):
        RankingWeights(same_operator=20)


def test_operator_tier_dominates_hardware_and_bonuses():
    same_op_other_hw = row("a", hw_id="z", hw_class="z", vendor="z", layer="other")
    family_best_everything = row("b", operator="layernorm", error_kind="compile_error")
    assert relevance(same_op_other_hw, Q) > relevance(family_best_everything, Q)


def test_hardware_tiers_order_same_machine_class_vendor_other():
    rows = [
        row("d", hw_id="x", hw_class="arm", vendor="arm"),
        row("c", hw_id="x", hw_class="avx512"),
        row("b", hw_id="x"),
        row("a"),
    ]
    assert [r["id"] for r in rank_naively(rows, Q, 4)] == ["a", "b", "c", "d"]


def test_inside_a_tier_labels_come_before_downstream_score():
    rows = [
        row("neg", label="negative", d=9.0),
        row("eff", label="effective", d=0.1),
        row("part", label="partial", d=5.0),
    ]
    assert [r["id"] for r in rank_naively(rows, Q, 3)] == ["eff", "part", "neg"]


def test_ranking_is_deterministic_whatever_the_input_order():
    rows = [row(f"r{i}", d=round(random.Random(i).random(), 1), parent_id=f"p{i % 3}") for i in range(40)]
    first = [r["id"] for r in rank_naively(rows, Q, 10)]
    shuffled = rows[:]
    random.Random(7).shuffle(shuffled)
    assert [r["id"] for r in rank_naively(shuffled, Q, 10)] == first


def test_diversity_caps_hits_per_parent():
    rows = [row(f"c{i}", parent_id="p") for i in range(5)] + [row("other", parent_id="q")]
    picked = [r["id"] for r in diversify(rows, 4)]
    assert picked == ["c0", "c1", "other"]


def test_team_weight_scales_the_downstream_score_and_zero_leaves_a_team_out():
    from kope.memory.ranking import RankQuery, rank_naively, team_weight

    def row(i, team, d):
        return {
            "id": i, "parent_id": None, "operator": "relu", "family": "elementwise", "hw_id": "h", "hw_class": "c",
            "vendor": "v", "layer": "tiling", "error_kind": None, "label": "effective", "d": d, "conf": 1.0,
            "team": team,
        }  # fmt: skip

    rows = [row("a", "team-a", 1.0), row("b", "team-b", 1.5), row("c", None, 1.2)]
    base = RankQuery("relu", "elementwise", "h", "c", "v", "tiling", None)
    assert [r["id"] for r in rank_naively(rows, base, 3)] == ["b", "c", "a"]
    weighted = RankQuery("relu", "elementwise", "h", "c", "v", "tiling", None, team_weights=(("team-b", 0.5),))
    assert [r["id"] for r in rank_naively(rows, weighted, 3)] == ["c", "a", "b"]  # 1.2 > 1.0 > 0.75
    others = RankQuery("relu", "elementwise", "h", "c", "v", "tiling", None, team_weights=(("*", 0.0), ("team-a", 1)))
    assert [r["id"] for r in rank_naively(rows, others, 3)] == ["a"]  # no team counts as "*"
    assert team_weight(rows[2], others) == 0.0 and team_weight(rows[0], others) == 1.0


def test_team_weights_are_validated_with_one_clear_message():
    from kope.memory.ranking import with_own_team
    from kope.teamweights import check_team_weights, parse_team_weights

    assert parse_team_weights("b=0.5, *=0 ,a=1") == (("*", 0.0), ("a", 1.0), ("b", 0.5))
    assert parse_team_weights("") == ()
    for bad, fragment in [
        ("a=1.5", "from 0 to 1"),
        ("a=-0.1", "from 0 to 1"),
        ("a=x", "from 0 to 1"),
        ("a", "TEAM=WEIGHT"),
        ("a b=1", "team name"),
        ("a=1,a=0", "twice"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            parse_team_weights(bad)
    with pytest.raises(ValueError, match="from 0 to 1"):
        check_team_weights({"a": True})
    assert with_own_team((("*", 0.2),), "me") == (("*", 0.2), ("me", 1.0))
    assert with_own_team((("me", 0.5),), "me") == (("me", 0.5),)
    assert with_own_team((), "me") == ()
