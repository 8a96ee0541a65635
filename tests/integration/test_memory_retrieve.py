"""Retrieval against a real Neo4j: lineages, branches, family and hardware ranking, rules."""

import random

import pytest

from kope.memory import ExperienceGraph, RetrievalQuery, synthetic
from kope.memory.ranking import rank_naively

HW_A = synthetic.hardware("cpu-aaaa", "x86_64-avx512", "intel")
HW_B = synthetic.hardware("cpu-bbbb", "x86_64-avx512", "intel")
HW_C = synthetic.hardware("cpu-cccc", "x86_64-avx2", "intel")
HW_D = synthetic.hardware("arm-dddd", "aarch64-neon", "arm")


@pytest.fixture
def memory(graph_client):
    return ExperienceGraph(graph_client, namespace="t")


def query(operator="softmax", family="normalization", hw=HW_A, **kw):
    return RetrievalQuery(
        operator=operator,
        family=family,
        target="cpu",
        hardware_id=hw["id"],
        hardware_class=hw["class"],
        vendor=hw["vendor"],
        **kw,
    )


def one_run(memory, run_id, operator, speedups, family="normalization", hw=HW_A, parents=None, **kw):
    memory.start_run(synthetic.run_spec(operator, run_id=run_id, family=family, hw=hw))
    attempts = []
    for step, speed in enumerate(speedups):
        parent = None if step == 0 else f"{run_id}:s{(parents or {}).get(step, 0)}"
        attempts.append(
            synthetic.attempt(run_id, step, operator, parent=parent, speedup=speed, family=family, hw=hw, **kw)
        )
    memory.record_attempts(attempts)


def test_record_then_retrieve_round_trip(memory):
    memory.start_run(synthetic.run_spec("softmax", run_id="r1", hw=HW_A))
    memory.record_attempts(
        [
            synthetic.attempt("r1", 0, "softmax", speedup=1.0, hw=HW_A, code="v0\n"),
            synthetic.attempt(
                "r1", 1, "softmax", parent="r1:s0", speedup=1.6, hw=HW_A, title="8-wide AVX loads", code="v1\n"
            ),
        ]
    )
    found = memory.retrieve(query(), k=5)
    assert found.ids == ["r1:s1", "r1:s0"]
    hit = found.lineages[0]
    assert hit.hit.title == "8-wide AVX loads" and hit.hit.label == "effective" and hit.hit.a == 1.6
    assert hit.hit.thought == "try vectorization at step 1" and "+v1" in hit.hit.diff
    assert [s.id for s in hit.chain] == ["r1:s0"] and hit.chain_omitted == 0
    assert hit.relevance.operator_tier == "operator" and hit.relevance.hardware_tier == "hardware"
    assert hit.used("warm", tokens=80).id == "r1:s1"


def test_three_children_of_one_parent_come_back_as_alternatives(memory):
    memory.start_run(synthetic.run_spec("softmax", run_id="r1", hw=HW_A))
    memory.record_attempts(
        [
            synthetic.attempt("r1", 0, "softmax", speedup=1.0, hw=HW_A),
            synthetic.attempt("r1", 1, "softmax", parent="r1:s0", speedup=1.5, hw=HW_A, layer="vectorization"),
            synthetic.attempt("r1", 2, "softmax", parent="r1:s0", speedup=0.7, hw=HW_A, layer="tiling"),
            synthetic.attempt("r1", 3, "softmax", parent="r1:s0", status="compile_error", hw=HW_A, layer="instruction"),
        ]
    )
    found = memory.retrieve(query(), k=1)
    best = found.lineages[0]
    assert best.hit.id == "r1:s1"
    assert best.sibling_total == 2
    assert [(s.id, s.layer, s.label) for s in best.siblings] == [
        ("r1:s2", "tiling", "negative"),
        ("r1:s3", "instruction", "negative"),
    ]
    assert best.siblings[1].status == "compile_error" and best.siblings[1].error_kind == "compile_error"
    assert best.sibling_counts == {"effective": 0, "partial": 0, "ineffective": 0, "negative": 2}


def test_long_chains_keep_the_nearest_ancestors(memory):
    one_run(memory, "r1", "softmax", [1.0 + i / 100 for i in range(12)], parents={i: i - 1 for i in range(1, 12)})
    others = tuple(f"r1:s{i}" for i in range(11))
    lineage = memory.retrieve(query(exclude=others), k=1).lineages[0]
    assert lineage.hit.id == "r1:s11"
    assert len(lineage.chain) == memory.weights.max_chain and lineage.chain_omitted == 11 - memory.weights.max_chain
    assert [s.id for s in lineage.chain] == [f"r1:s{i}" for i in range(3, 11)]


def test_same_family_task_retrieves_the_first_tasks_experience_ahead_of_unrelated(memory):
    one_run(memory, "soft", "softmax", [1.0, 1.2, 1.1])
    one_run(memory, "relu", "relu", [1.0, 3.0, 2.5, 2.8], family="elementwise")  # better scores, other family
    found = memory.retrieve(query(operator="layernorm"), k=3)
    assert all(lin.hit.operator == "softmax" for lin in found.lineages)
    assert found.lineages[0].relevance.operator_tier == "family"
    wider = memory.retrieve(query(operator="layernorm"), k=6)
    tiers = [lin.relevance.operator_tier for lin in wider.lineages]
    assert tiers == sorted(tiers, key=["operator", "family", "other"].index) and tiers[-1] == "other"


def test_hardware_ranking_same_hardware_then_class_then_vendor_then_other(memory):
    # The farther the hardware, the better the result: ranking must still follow the hardware.
    for run_id, hw, speed in [("rd", HW_D, 3.0), ("rc", HW_C, 2.5), ("rb", HW_B, 2.0), ("ra", HW_A, 1.5)]:
        memory.start_run(synthetic.run_spec("softmax", run_id=run_id, hw=hw))
        memory.record_attempt(synthetic.attempt(run_id, 0, "softmax", speedup=speed, hw=hw))
    found = memory.retrieve(query(hw=HW_A), k=4)
    assert found.ids == ["ra:s0", "rb:s0", "rc:s0", "rd:s0"]
    assert [lin.relevance.hardware_tier for lin in found.lineages] == ["hardware", "class", "vendor", "other"]


def test_matching_error_kind_and_layer_raise_a_candidate(memory):
    memory.start_run(synthetic.run_spec("softmax", run_id="r1", hw=HW_A))
    memory.record_attempts(
        [
            synthetic.attempt("r1", 0, "softmax", hw=HW_A, layer="tiling", speedup=1.0),
            synthetic.attempt("r1", 1, "softmax", parent="r1:s0", hw=HW_A, status="runtime_error", layer="tiling"),
            synthetic.attempt("r1", 2, "softmax", parent="r1:s0", hw=HW_A, status="compile_error", layer="tiling"),
        ]
    )
    found = memory.retrieve(query(error_kind="compile_error", layer="tiling"), k=3)
    assert found.ids[0] == "r1:s2" and found.lineages[0].relevance.error_match


def test_retrieval_is_deterministic_and_equals_the_naive_python_ranking(memory):
    rng = random.Random(42)
    hws = [HW_A, HW_B, HW_C, HW_D]
    ops = [("softmax", "normalization"), ("layernorm", "normalization"), ("relu", "elementwise"), ("gemm", "matmul")]
    statuses = ["correct"] * 5 + ["compile_error", "incorrect", "runtime_error"]
    for run in range(12):
        op, family = ops[run % 4]
        hw = hws[rng.randrange(4)]
        rid = f"run{run}"
        memory.start_run(synthetic.run_spec(op, run_id=rid, family=family, hw=hw))
        attempts = []
        for step in range(rng.randrange(3, 9)):
            parent = None if step == 0 else f"{rid}:s{rng.randrange(step)}"
            attempts.append(
                synthetic.attempt(
                    rid,
                    step,
                    op,
                    parent=parent,
                    family=family,
                    hw=hw,
                    status=rng.choice(statuses),
                    speedup=round(rng.uniform(0.5, 2.5), 2),
                    layer=rng.choice(["tiling", "vectorization", "fusion"]),
                )
            )
        memory.record_attempts(attempts)
    everything = memory.candidates()
    for op, family in ops + [("conv2d", "convolution"), ("layernorm", None)]:
        for hw in (HW_A, HW_D):
            q = query(
                operator=op, family=family, hw=hw, layer="tiling", error_kind="compile_error", exclude=("run0:s0",)
            )
            for k in (1, 5, 12):
                found = memory.retrieve(q, k=k)
                assert found.ids == [r["id"] for r in rank_naively(everything, q.rank_query(), k)], (op, hw["id"], k)
                assert memory.retrieve(q, k=k).ids == found.ids


def test_rules_that_apply_come_with_the_lineages(memory):
    memory.start_run(synthetic.run_spec("softmax", run_id="r1", hw=HW_C))
    memory.record_attempts(
        [synthetic.attempt("r1", 0, "softmax", hw=HW_C)]
        + [
            synthetic.attempt(
                "r1",
                s,
                "softmax",
                parent="r1:s0",
                hw=HW_C,
                status="compile_error",
                excerpt="error: '__m512' undeclared",
            )
            for s in (1, 2, 3)
        ]
    )
    memory.finish_run("r1")  # distils the family
    found = memory.retrieve(query(operator="layernorm", hw=HW_C, error_kind="compile_error"), k=2)
    assert [r.id for r in found.rules] == ["rule:normalization:x86_64-avx2:compile_error"]
    assert found.rules[0].support == 3 and "'__m512' undeclared" in found.rules[0].text
    # validity rules transfer across hardware at full weight (issue 16): the avx2 rule reaches an avx512
    # query too, and says which hardware class it was learned on
    elsewhere = memory.retrieve(query(operator="layernorm", hw=HW_A), k=2).rules
    assert [(r.id, r.hw_class) for r in elsewhere] == [("rule:normalization:x86_64-avx2:compile_error", "x86_64-avx2")]


def test_namespaces_do_not_see_each_other(graph_client):
    a = ExperienceGraph(graph_client, namespace="team-a")
    b = ExperienceGraph(graph_client, namespace="team-b")
    for graph in (a, b):
        graph.start_run(synthetic.run_spec("softmax", run_id="same-run-id", hw=HW_A))
    a.record_attempt(synthetic.attempt("same-run-id", 0, "softmax", speedup=2.0, hw=HW_A))
    assert a.retrieve(query(), k=5).ids == ["same-run-id:s0"]
    assert b.retrieve(query(), k=5).ids == []
    assert b.stats().nodes["Decision"] == 0 and a.stats().nodes["Decision"] == 1
