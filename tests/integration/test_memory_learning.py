"""Shape- and hardware-aware retrieval, full-text matches and effect insights on a real Neo4j."""

import math
import random

import pytest
from scipy.stats import t as student_t

from kope.context.budget import Budget
from kope.context.state import TaskView, build_context
from kope.memory import ExperienceGraph, RetrievalQuery, synthetic
from kope.memory.ranking import rank_naively
from kope.memory.shapes import CaseShape, ShapeSummary

HW_A = synthetic.hardware("cpu-aaaa", "x86_64-avx512", "intel")
HW_B = synthetic.hardware("cpu-bbbb", "x86_64-avx512", "intel")
HW_C = synthetic.hardware("cpu-cccc", "x86_64-avx512", "intel")
HW_ARM = synthetic.hardware("arm-dddd", "aarch64-neon", "arm")


@pytest.fixture
def memory(graph_client):
    return ExperienceGraph(graph_client, namespace="learn")


def shapes(cases):
    """The shape summary of synthetic.outcome's cases (``n`` = 1024 * (i + 1))."""
    return ShapeSummary.of(CaseShape("default", (1024 * (i + 1),)) for i in range(cases))


def query(operator="softmax", family="normalization", hw=HW_A, cases=None, **kw):
    summary = shapes(cases) if cases else None
    return RetrievalQuery(
        operator=operator,
        family=family,
        target="cpu",
        hardware_id=hw["id"],
        hardware_class=hw["class"],
        vendor=hw["vendor"],
        shape_sig=summary.signature if summary else None,
        shape_class=summary.shape_class if summary else None,
        **kw,
    )


def one_run(memory, run_id, operator, speeds, *, hw=HW_A, family="normalization", cases=4, **kw):
    memory.start_run(synthetic.run_spec(operator, run_id=run_id, family=family, hw=hw, cases=cases))
    memory.record_attempts(
        [
            synthetic.attempt(
                run_id,
                step,
                operator,
                parent=f"{run_id}:s{step - 1}" if step else None,
                speedup=s,
                family=family,
                hw=hw,
                cases=cases,
                **kw,
            )
            for step, s in enumerate(speeds)
        ]
    )


def test_the_graph_ranking_equals_the_naive_ranking_with_shapes_in_the_query(memory):
    rng = random.Random(11)
    ops = [("softmax", "normalization"), ("layernorm", "normalization"), ("relu", "elementwise")]
    for run in range(10):
        op, family = ops[run % 3]
        rid = f"run{run}"
        cases = rng.choice([1, 2, 4, 16])
        hw = rng.choice([HW_A, HW_ARM])
        memory.start_run(synthetic.run_spec(op, run_id=rid, family=family, hw=hw, cases=cases))
        memory.record_attempts(
            [
                synthetic.attempt(
                    rid,
                    step,
                    op,
                    parent=None if step == 0 else f"{rid}:s{rng.randrange(step)}",
                    family=family,
                    hw=hw,
                    cases=cases,
                    speedup=round(rng.uniform(0.5, 2.5), 2),
                    layer=rng.choice(["tiling", "vectorization"]),
                )
                for step in range(rng.randrange(3, 8))
            ]
        )
    everything = memory.candidates()
    for cases in (1, 4, 16):
        for op, family in ops:
            q = query(operator=op, family=family, cases=cases, layer="tiling")
            for k in (1, 6, 20):
                found = memory.retrieve(q, k=k)
                assert found.ids == [r["id"] for r in rank_naively(everything, q.rank_query(), k)], (op, cases, k)


def test_within_a_tier_attempts_on_the_same_cases_come_first_then_the_same_shape_class(memory):
    one_run(memory, "far", "softmax", [2.0], cases=1)  # 1 case of n=1024: another shape class
    one_run(memory, "near", "softmax", [1.5], cases=3)  # n up to 3072: the same shape class as 4 cases
    one_run(memory, "same", "softmax", [1.1], cases=4)
    found = memory.retrieve(query(cases=4), k=3)
    assert found.ids == ["same:s0", "near:s0", "far:s0"]
    assert [lin.relevance.shape_match for lin in found.lineages] == ["signature", "class", "other"]
    assert shapes(3).shape_class == shapes(4).shape_class != shapes(1).shape_class


def test_validity_rules_apply_from_other_hardware_but_patterns_only_from_the_same_class(memory):
    one_run(memory, "arm-fail", "softmax", [None, None], hw=HW_ARM, status="compile_error")
    one_run(memory, "arm-good", "layernorm", [1.0, 1.3, 1.7], hw=HW_ARM)
    memory.distill("normalization")
    found = memory.retrieve(query(hw=HW_A), k=4)
    kinds = {(r.kind, r.hw_class) for r in found.rules}
    assert ("rule", "aarch64-neon") in kinds
    assert not any(r.kind == "pattern" for r in found.rules)
    on_arm = memory.retrieve(query(hw=HW_ARM), k=4)
    assert {r.kind for r in on_arm.rules} == {"rule", "pattern"}


def test_full_text_matches_of_the_latest_feedback_supplement_the_ranked_lineages(memory, graph_client):
    one_run(
        memory,
        "conv",
        "conv2d",
        [None],
        family="convolution",
        status="compile_error",
        excerpt="error: '_mm512_fmadd_ps' was not declared in this scope",
    )
    one_run(memory, "soft", "softmax", [1.2])
    graph_client.execute("db/await_fulltext")
    found = memory.retrieve(query(text="compile error _mm512_fmadd_ps was not declared"), k=1)
    assert found.ids == ["soft:s0"]
    assert [lin.hit.id for lin in found.text_lineages] == ["conv:s0"]
    assert found.text_lineages[0].relevance.source == "text"
    assert memory.retrieve(query(), k=1).text_lineages == ()


def pointwise(run_id, operator, hw, speeds):
    """Two attempts of the pointwise template: defaults, then math=poly (the knob matters for elu and gelu)."""
    settings = [{"math": "libm", "unroll": 1}, {"math": "poly", "unroll": 1}]
    return run_id, operator, hw, list(zip(settings, speeds))


def test_effect_insights_are_distilled_with_counts_and_intervals_and_are_warm_evidence_with_ids(memory):
    for run_id, operator, hw, attempts in [
        pointwise("elu-a", "elu", HW_A, [1.0, 4.0]),
        pointwise("elu-b", "elu", HW_B, [1.2, 6.0]),
        pointwise("gelu-c", "gelu", HW_C, [1.0, 8.0]),
        pointwise("relu-a", "relu", HW_A, [1.0, 1.1]),  # math does not matter for relu: no comparison
    ]:
        memory.start_run(synthetic.run_spec(operator, run_id=run_id, family="elementwise", hw=hw))
        memory.record_attempts(
            [
                synthetic.attempt(
                    run_id,
                    step,
                    operator,
                    speedup=a,
                    family="elementwise",
                    hw=hw,
                    params={"template": "pointwise", "settings": settings},
                )
                for step, (settings, a) in enumerate(attempts)
            ]
        )
    report = memory.distill("elementwise")
    assert report.effects == 1
    found = memory.retrieve(query("silu", "elementwise", cases=4), k=4)
    (effect,) = found.effects
    logs = [math.log(4.0), math.log(5.0), math.log(8.0)]
    mean = sum(logs) / 3
    half = student_t.ppf(0.975, 2) * (sum((x - mean) ** 2 for x in logs) / 2) ** 0.5 / math.sqrt(3)
    assert effect.support == 3 and effect.knob == "math" and effect.value == "poly" and effect.baseline == "libm"
    assert effect.effect == pytest.approx(math.exp(mean), rel=1e-5)
    assert (effect.low, effect.high) == (
        pytest.approx(math.exp(mean - half), rel=1e-5),
        pytest.approx(math.exp(mean + half), rel=1e-5),
    )
    assert "math=poly vs math=libm" in effect.text and "(n=3, 95% interval" in effect.text
    derived, _, _ = memory.client._driver.execute_query(
        "MATCH (i:Insight {uid: $uid})-[:DERIVED_FROM]->(o:Outcome) RETURN o.id AS id ORDER BY id",
        {"uid": memory.uid(effect.id)},
        database_=memory.client.database,
    )
    assert [r["id"] for r in derived] == ["elu-a:s0", "elu-a:s1", "elu-b:s0", "elu-b:s1", "gelu-c:s0", "gelu-c:s1"]

    view = TaskView(
        "silu",
        "elementwise",
        1,
        "silu",
        "import torch\n",
        tuple({"name": f"case{i}", "n": 1024 * (i + 1)} for i in range(4)),
    )
    budget = Budget(window=60_000, system=2_000, generation=2_000, recency=500, warm_cap=8_000, cold_cap=3_000)
    context, _ = build_context(view, target="cpu", hardware=HW_A, budget=budget, graph=memory)
    warm = {item.id: item for item in context.items if item.tier == "warm"}
    assert effect.id in warm and warm[effect.id].kind == "effect" and warm[effect.id].evidence_kind == "insight"
    assert f"### Effect [{effect.id}]" in context.human_text
