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


def two_teams(graph_client, ns="shared"):
    """One namespace holding the same kind of evidence from two teams (as after importing each other's
    exports): team a and team b each ran softmax on HW_A with the same speedups. Team b's run id sorts
    first, so without weights b's attempts win every tie."""
    graphs = {t: ExperienceGraph(graph_client, namespace=ns, team=t) for t in ("team-a", "team-b")}
    for team, graph in graphs.items():
        one_run(graph, RUN_OF[team], "softmax", [1.0, 1.5, 1.2])
    return graphs


RUN_OF = {"team-a": "z-run", "team-b": "b-run"}


def test_every_attempt_carries_the_team_that_recorded_it(graph_client):
    graphs = two_teams(graph_client)
    rows = {r["id"]: r["team"] for r in graphs["team-a"].candidates()}
    assert rows == {f"{RUN_OF[t]}:s{s}": t for t in ("team-a", "team-b") for s in range(3)}
    hit = graphs["team-a"].retrieve(query(), k=1).lineages[0].hit
    assert hit.team in ("team-a", "team-b")


def test_team_weights_order_equal_evidence_and_weight_zero_leaves_a_team_out(graph_client):
    graphs = two_teams(graph_client)
    reader = ExperienceGraph(graph_client, namespace="shared", team="team-c")
    unweighted = reader.retrieve(query(), k=6)
    assert all(lineage.relevance.team_weight == 1.0 for lineage in unweighted.lineages)
    scored = [s for s in range(3) if next(x.hit for x in unweighted.lineages if x.hit.id == f"b-run:s{s}").d > 0]
    assert scored  # attempts whose downstream score the weight can scale
    ranks = {i: n for n, i in enumerate(unweighted.ids)}
    assert all(ranks[f"b-run:s{s}"] < ranks[f"z-run:s{s}"] for s in scored), unweighted.ids  # ties: b first
    # b trusted less: within each label bucket, a's attempt now comes before b's equal one
    weighted = reader.retrieve(query(team_weights=(("team-b", 0.5),)), k=6)
    assert sorted(weighted.ids) == sorted(unweighted.ids)
    ranks = {i: n for n, i in enumerate(weighted.ids)}
    assert all(ranks[f"z-run:s{s}"] < ranks[f"b-run:s{s}"] for s in scored), weighted.ids
    by_id = {lineage.hit.id: lineage for lineage in weighted.lineages}
    assert by_id["b-run:s1"].relevance.team_weight == 0.5 and by_id["b-run:s1"].hit.team == "team-b"
    assert by_id["z-run:s1"].relevance.team_weight == 1.0
    # weight 0: b's attempts are never retrieved, whatever k; "*" weighs every team not named
    assert reader.retrieve(query(team_weights=(("team-b", 0.0),)), k=6).ids == [
        i for i in unweighted.ids if i.startswith("z-run")
    ]
    assert reader.retrieve(query(team_weights=(("*", 0.0),)), k=6).ids == []
    # the querying team's own attempts weigh 1 unless it names itself
    own = graphs["team-a"].retrieve(query(team_weights=(("*", 0.0),)), k=6)
    assert own.ids and all(i.startswith("z-run") for i in own.ids)
    assert graphs["team-a"].retrieve(query(team_weights=(("team-a", 0.0), ("*", 0.0))), k=6).ids == []


@pytest.mark.parametrize(
    "weights", [(("team-b", 0.5),), (("team-a", 0.25), ("*", 0.75)), (("team-b", 0.0), ("*", 0.9))]
)
def test_team_weighted_retrieval_equals_the_naive_python_ranking(graph_client, weights):
    rng = random.Random(7)
    graphs = [ExperienceGraph(graph_client, namespace="w", team=t) for t in ("team-a", "team-b", "team-c")]
    for run in range(9):
        graph = graphs[run % 3]
        op, family = [("softmax", "normalization"), ("layernorm", "normalization"), ("relu", "elementwise")][run % 3]
        hw = [HW_A, HW_C][rng.randrange(2)]
        one_run(graph, f"run{run}", op, [round(rng.uniform(0.5, 2.5), 2) for _ in range(4)], family=family, hw=hw)
    reader = ExperienceGraph(graph_client, namespace="w", team="team-z")
    everything = reader.candidates()
    for op, family in (("softmax", "normalization"), ("relu", "elementwise")):
        q = query(operator=op, family=family, team_weights=weights)
        for k in (1, 4, 20):
            found = reader.retrieve(q, k=k)
            assert found.ids == [r["id"] for r in rank_naively(everything, found.query.rank_query(), k)], (op, k)
