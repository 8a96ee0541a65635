"""Recording attempts into a real Neo4j: lineage, order, scores, idempotency, incumbents."""

import json

import pytest

from kope.memory import ExperienceGraph, Journal, UsedItem, synthetic
from kope.memory.errors import InvalidRecordError, RecordConflictError, UnknownDecisionError, UnknownRunError
from kope.memory.scoring import recompute_all

OP = "softmax"


@pytest.fixture
def memory(graph_client, tmp_path):
    return ExperienceGraph(graph_client, namespace="t", journal=Journal(tmp_path / "memory", "t"))


def rows(client, query, **params):
    """Ad-hoc assertions read the graph directly (test code, not KOPE's Cypher)."""
    return client._driver.execute_query(query, params).records


def start(memory, run_id="r1", **kw):
    memory.start_run(synthetic.run_spec(OP, run_id=run_id, **kw))


def test_scores_and_labels_match_a_hand_computed_example(memory):
    start(memory)

    def a(step, parent=None, **kw):
        return synthetic.attempt("r1", step, OP, parent=None if parent is None else f"r1:s{parent}", **kw)

    results = memory.record_attempts(
        [
            a(0, speedup=2.0),  # root: r = 1 -> partial
            a(1, 0, speedup=2.2),  # r = 1.1 -> effective
            a(2, 0, speedup=2.05),  # r = 1.025 -> partial
            a(3, 0, speedup=1.8),  # r = 0.9 -> ineffective
            a(4, 1, speedup=1.5),  # r = 1.5 / 2.2 -> negative
            a(5, 1, status="compile_error"),  # failed: a = 0, r = 0 -> negative
            a(6, 5, speedup=3.0),  # parent a = 0 (non-positive): r = 1 -> partial
        ]
    )
    by_id = {r.decision_id: r for r in results}
    expected = {
        "r1:s0": (1.0, "partial", 1.0925738636363637),
        "r1:s1": (1.1, "effective", 0.7305681818181818),
        "r1:s2": (1.025, "partial", 0.5125),
        "r1:s3": (0.9, "ineffective", 0.45),
        "r1:s4": (0.6818181818181818, "negative", 0.3409090909090909),
        "r1:s5": (0.0, "negative", 0.175),
        "r1:s6": (1.0, "partial", 0.5),
    }
    for key, (r, label, d) in expected.items():
        assert by_id[key].r == pytest.approx(r, rel=1e-12), key
        assert by_id[key].label == label, key
        assert by_id[key].d == pytest.approx(d, rel=1e-9), key
    state = memory.run_state("r1")
    assert state.incumbent.id == "r1:s6" and state.run.best_speedup == 3.0
    assert {d.id: d.d for d in state.decisions} == pytest.approx({k: v[2] for k, v in expected.items()}, rel=1e-9)


def test_a_child_updates_every_ancestor_score(memory):
    start(memory)
    memory.record_attempts(
        [synthetic.attempt("r1", 0, OP), synthetic.attempt("r1", 1, OP, parent="r1:s0", speedup=1.2)]
    )
    memory.record_attempt(synthetic.attempt("r1", 2, OP, parent="r1:s1", speedup=1.5))
    state = memory.run_state("r1")
    stored = {d.id: d.d for d in state.decisions}
    assert stored == pytest.approx(recompute_all({d.id: (d.r, d.parent_id) for d in state.decisions}), rel=1e-12)


def test_next_order_differs_from_lineage_after_a_backtrack(memory, graph_client):
    start(memory)
    for step, parent, speed in [(0, None, 1.0), (1, 0, 1.3), (2, 1, 1.1), (3, 0, 1.4)]:
        memory.record_attempt(
            synthetic.attempt("r1", step, OP, parent=None if parent is None else f"r1:s{parent}", speedup=speed)
        )
    order = rows(
        graph_client,
        "MATCH p = (a:Decision {uid: 't/r1:s0'})-[:NEXT*]->(z) WHERE NOT (z)-[:NEXT]->() "
        "RETURN [n IN nodes(p) | n.id] AS ids",
    )[0]["ids"]
    assert order == ["r1:s0", "r1:s1", "r1:s2", "r1:s3"]
    parent = rows(graph_client, "MATCH (:Decision {uid: 't/r1:s3'})-[:FROM]->(p) RETURN p.id AS id")[0]["id"]
    previous = rows(graph_client, "MATCH (p)-[:NEXT]->(:Decision {uid: 't/r1:s3'}) RETURN p.id AS id")[0]["id"]
    assert parent == "r1:s0" and previous == "r1:s2"


def test_out_of_order_recording_still_gives_one_next_chain(memory, graph_client):
    start(memory)
    memory.record_attempt(synthetic.attempt("r1", 0, OP))
    memory.record_attempt(synthetic.attempt("r1", 2, OP, parent="r1:s0"))
    memory.record_attempt(synthetic.attempt("r1", 1, OP, parent="r1:s0"))
    pairs = rows(graph_client, "MATCH (a:Decision {ns: 't'})-[:NEXT]->(b) RETURN a.step AS a, b.step AS b ORDER BY a")
    assert [(p["a"], p["b"]) for p in pairs] == [(0, 1), (1, 2)]


def test_recording_the_same_attempt_twice_changes_nothing(memory, graph_client):
    start(memory)
    first = [synthetic.attempt("r1", 0, OP), synthetic.attempt("r1", 1, OP, parent="r1:s0", speedup=1.3)]
    memory.record_attempts(first)
    before = graph_client.counts()
    scores = {d.id: d.d for d in memory.run_state("r1").decisions}
    again = memory.record_attempts(first)
    assert [r.created for r in again] == [False, False]
    assert graph_client.counts() == before
    assert {d.id: d.d for d in memory.run_state("r1").decisions} == scores
    memory.start_run(synthetic.run_spec(OP, run_id="r1"))
    assert graph_client.counts() == before


def test_the_same_id_with_other_content_is_a_conflict(memory):
    start(memory)
    memory.record_attempt(synthetic.attempt("r1", 0, OP, speedup=1.0))
    with pytest.raises(RecordConflictError, match="recorded before with different content"):
        memory.record_attempt(synthetic.attempt("r1", 0, OP, speedup=2.0))


def test_kernels_are_stored_once_per_source(memory, graph_client):
    start(memory)
    code = "void k() {}\n"
    memory.record_attempts(
        [synthetic.attempt("r1", 0, OP, code=code), synthetic.attempt("r1", 1, OP, parent="r1:s0", code=code)]
    )
    kernels = rows(graph_client, "MATCH (k:Kernel {ns: 't'})<-[:WROTE]-(d) RETURN k.id AS id, count(d) AS writers")
    assert len(kernels) == 1 and kernels[0]["writers"] == 2
    assert memory.kernel_source("r1:s1") == code


def test_child_stores_a_diff_against_its_parent(memory, graph_client):
    start(memory)
    memory.record_attempts(
        [synthetic.attempt("r1", 0, OP, code="a\nb\n"), synthetic.attempt("r1", 1, OP, parent="r1:s0", code="a\nc\n")]
    )
    diff = rows(graph_client, "MATCH (d:Decision {uid: 't/r1:s1'}) RETURN d.diff AS diff")[0]["diff"]
    assert "-b\n" in diff and "+c\n" in diff


def test_incumbent_moves_only_for_a_correct_faster_attempt(memory):
    start(memory)
    steps = [(0, "correct", 1.2), (1, "incorrect", None), (2, "correct", 1.1), (3, "correct", 1.2), (4, "correct", 1.5)]
    moved = []
    for step, status, speed in steps:
        result = memory.record_attempt(
            synthetic.attempt("r1", step, OP, parent=step and "r1:s0" or None, status=status, speedup=speed)
        )
        moved.append((result.incumbent_id, result.incumbent_changed))
    assert moved == [("r1:s0", True), ("r1:s0", False), ("r1:s0", False), ("r1:s0", False), ("r1:s4", True)]


def test_used_edges_carry_tier_rank_tokens_and_missing_evidence_is_reported(memory, graph_client):
    start(memory)
    memory.record_attempt(synthetic.attempt("r1", 0, OP))
    used = (
        UsedItem(kind="decision", id="r1:s0", tier="warm", rank=0, tokens=120),
        UsedItem(kind="knowledge", id="not-there", tier="cold", rank=1, tokens=40),
    )
    result = memory.record_attempt(synthetic.attempt("r1", 1, OP, parent="r1:s0", used=used))
    assert result.missing_evidence == ("knowledge:not-there",)
    edge = rows(
        graph_client,
        "MATCH (:Decision {uid: 't/r1:s1'})-[u:USED]->(e) RETURN e.id AS id, u.tier AS tier, u.rank AS rank, u.tokens AS tokens",
    )
    assert [dict(e) for e in edge] == [{"id": "r1:s0", "tier": "warm", "rank": 0, "tokens": 120}]


def test_unknown_run_or_parent_is_a_clear_error(graph_client):
    memory = ExperienceGraph(graph_client, namespace="t")  # no journal: nothing to sync from
    with pytest.raises(UnknownRunError, match="run nope is not in the graph"):
        memory.record_attempt(synthetic.attempt("nope", 0, OP))
    memory.start_run(synthetic.run_spec(OP, run_id="r1"))
    with pytest.raises(UnknownDecisionError, match="parent decision r1:s9 is not in the graph"):
        memory.record_attempt(synthetic.attempt("r1", 0, OP, parent="r1:s9"))


def test_an_outcome_for_another_task_is_rejected(memory):
    start(memory)
    with pytest.raises(InvalidRecordError, match="outcome is for task 'relu' but run r1 optimises 'softmax'"):
        memory.record_attempt(synthetic.attempt("r1", 0, "relu"))


def test_a_run_resumes_from_the_graph_alone(memory, graph_client, tmp_path):
    start(memory)
    memory.record_attempts(
        [
            synthetic.attempt("r1", 0, OP),
            synthetic.attempt("r1", 1, OP, parent="r1:s0", speedup=1.4),
            synthetic.attempt("r1", 2, OP, parent="r1:s1", status="timeout"),
        ]
    )
    fresh = ExperienceGraph(graph_client, namespace="t")  # another process: nothing in memory
    state = fresh.run_state("r1")
    assert state.next_step == 3 and state.incumbent.id == "r1:s1" and state.last.status == "timeout"
    assert state.best_by_downstream().id == "r1:s0"
    assert state.run.prompt_tokens == 300 and state.run.completion_tokens == 150


def test_the_outcome_of_a_decision_reads_back_with_its_cases(memory):
    start(memory)
    memory.record_attempt(synthetic.attempt("r1", 0, OP, status="incorrect", excerpt="mismatch at [3]: 1.0 vs 2.0"))
    outcome = memory.outcome("r1:s0")
    assert outcome.status == "incorrect" and outcome.error_kind == "incorrect:mismatch" and outcome.label == "negative"
    assert outcome.error_excerpt == "mismatch at [3]: 1.0 vs 2.0" and outcome.cases_passed == 3
    assert [c.name for c in outcome.cases] == ["case0", "case1", "case2", "case3"]


def test_finish_run_records_the_end(memory):
    start(memory)
    memory.record_attempt(synthetic.attempt("r1", 0, OP))
    run = memory.finish_run("r1", "finished")
    assert run.status == "finished" and run.ended_at is not None and run.steps == 1


def test_batched_ingest_equals_one_by_one(graph_client, tmp_path):
    attempts = [synthetic.attempt("r1", 0, OP, speedup=1.0)]
    for step in range(1, 12):
        attempts.append(
            synthetic.attempt(
                "r1",
                step,
                OP,
                parent=f"r1:s{(step - 1) // 2}",
                speedup=1.0 + step / 10,
                status="correct" if step % 4 else "runtime_error",
            )
        )
    batched = ExperienceGraph(graph_client, namespace="batch")
    batched.start_run(synthetic.run_spec(OP, run_id="r1"))
    batched.record_attempts(attempts, batch_size=5)
    single = ExperienceGraph(graph_client, namespace="single")
    single.start_run(synthetic.run_spec(OP, run_id="r1"))
    for at in attempts:
        single.record_attempt(at)

    def view(g):
        return [(d.id, d.label, round(d.d, 12), d.parent_id) for d in g.run_state("r1").decisions]

    assert view(batched) == view(single)
    assert batched.run("r1").incumbent_id == single.run("r1").incumbent_id


def test_decision_params_round_trip_through_run_state_and_retrieval(graph_client):
    from kope.memory import ExperienceGraph, RetrievalQuery, synthetic

    memory = ExperienceGraph(graph_client, namespace="params")
    memory.start_run(synthetic.run_spec("softmax", run_id="pr"))
    params = {"template": "rowwise", "settings": {"block": 64, "isa": "avx512"}}
    memory.record_attempt(synthetic.attempt("pr", 0, "softmax", params=params))
    assert memory.run_state("pr").decisions[0].params.to_json() == params
    hw = synthetic.hardware()
    found = memory.retrieve(RetrievalQuery("softmax", "normalization", "cpu", hw["id"], hw["class"], hw["vendor"]), k=1)
    assert found.lineages[0].hit.params.to_json() == params


RUN_TOTALS = (
    "MATCH (run:Run {ns: 't'}) OPTIONAL MATCH (run)-[:INCUMBENT]->(i) "
    "RETURN run.id AS run, run.steps AS steps, run.last_step AS last_step, run.prompt_tokens AS prompt, "
    "run.completion_tokens AS completion, run.best_speedup AS best, run.incumbent_id AS incumbent_id, "
    "collect(i.id) AS incumbent ORDER BY run"
)


def test_run_totals_kept_from_the_new_decisions_equal_a_recomputation_from_all_of_them(memory, graph_client):
    """The write path updates a run's totals and incumbent from the totals before and the new decisions
    (attempt/advance_runs) and links NEXT from the run's last decision when it only grows at its end; after
    every batch (in order, out of order, ties, unknown speeds, failures) both equal what the full
    recomputation (attempt/refresh_runs, a relink of the whole run) gives."""
    import random

    rng = random.Random(7)
    start(memory, "r1")
    start(memory, "r2")
    steps = {"r1": list(range(40)), "r2": list(range(40))}
    rng.shuffle(steps["r2"])  # r2 arrives out of order, r1 in order
    done: dict[str, list[int]] = {"r1": [], "r2": []}
    while steps["r1"] or steps["r2"]:
        batch = []
        for run in ("r1", "r2"):
            for _ in range(rng.randint(0, 4)):
                if not steps[run]:
                    break
                step = steps[run].pop(0)
                parent = f"{run}:s{rng.choice(done[run])}" if done[run] and rng.random() < 0.8 else None
                status = rng.choice(["correct", "correct", "correct", "incorrect", "compile_error"])
                speed = rng.choice([None, 1.0, 1.5, 2.0, 2.0, rng.uniform(0.5, 3.0)])  # ties and unknown speeds
                batch.append(synthetic.attempt(run, step, OP, parent=parent, status=status, speedup=speed))
                done[run].append(step)
        if not batch:
            continue
        memory.record_attempts(batch)
        kept = [r.data() for r in rows(graph_client, RUN_TOTALS)]
        graph_client.write(lambda tx: tx.run("memory/attempt/refresh_runs", run_uids=["t/r1", "t/r2"]))
        assert [r.data() for r in rows(graph_client, RUN_TOTALS)] == kept
        for run in ("r1", "r2"):
            chain = rows(
                graph_client,
                "MATCH (d:Decision {ns: 't', run_id: $run}) OPTIONAL MATCH (d)-[:NEXT]->(n) "
                "RETURN d.step AS step, collect(n.step) AS next ORDER BY step",
                run=run,
            )
            ordered = sorted(done[run])
            assert [(c["step"], c["next"]) for c in chain] == [
                (s, [ordered[i + 1]] if i + 1 < len(ordered) else []) for i, s in enumerate(ordered)
            ]
    assert [k["steps"] for k in kept] == [40, 40]


def test_a_run_whose_totals_do_not_match_its_decisions_is_recomputed_in_full(memory, graph_client):
    """Totals that disagree with the run's decisions (as after an import into the run) are not carried on:
    the next write recomputes them from all the decisions."""
    start(memory)
    memory.record_attempts([synthetic.attempt("r1", 0, OP, speedup=1.0), synthetic.attempt("r1", 1, OP, speedup=3.0)])
    rows(graph_client, "MATCH (run:Run {uid: 't/r1'}) SET run.steps = 7, run.prompt_tokens = 0")
    memory.record_attempt(synthetic.attempt("r1", 2, OP, parent="r1:s1", speedup=2.0))
    kept = rows(graph_client, RUN_TOTALS)[0]
    assert (kept["steps"], kept["last_step"], kept["prompt"], kept["incumbent"]) == (3, 2, 300, ["r1:s1"])


def test_a_cases_tolerance_rule_is_stored_with_the_case_and_read_back(memory, graph_client):
    """The rule that accepted a case's outputs ("float64-reference": the reference's own accuracy) is in the
    outcome JSON; the graph keeps it with the case (``StoredCase.tolerance``), and a case within the default
    tolerance reads None."""
    start(memory)
    memory.record_attempts(
        [
            synthetic.attempt("r1", 0, OP, speedup=1.5, tolerance="float64-reference"),
            synthetic.attempt("r1", 1, OP, parent="r1:s0", speedup=2.0),
        ]
    )
    precise, plain = memory.outcome("r1:s0"), memory.outcome("r1:s1")
    assert [c.tolerance for c in precise.cases] == ["float64-reference"] * 4
    assert [c.tolerance for c in plain.cases] == [None] * 4
    (row,) = rows(graph_client, "MATCH (o:Outcome {uid: $uid}) RETURN o.cases_json AS c", uid="t/r1:s0")
    assert {c["tolerance"] for c in json.loads(row["c"])} == {"float64-reference"}
