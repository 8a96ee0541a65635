"""What people read in the graph (class labels, marks, captions, datetimes, the outcome lineage) is written
by the recorder and comes out exactly the same from journal replay, import and `kope memory init`."""

import io

import pytest

from kope.memory import ExperienceGraph, Journal, UsedItem, synthetic

HW = synthetic.hardware("cpu-aaaa", "x86_64-avx2", "intel")


def rows(client, query, **params):
    """Ad-hoc assertions read the graph directly (test code, not KOPE's Cypher)."""
    return [dict(r) for r in client._driver.execute_query(query, params).records]


def knob(name, old, new, **extra):
    return {"template": "pointwise", "settings": {name: new}, "change": {"knob": name, "from": old, "to": new}, **extra}


def record_lineage(graph, rid="r1", op="relu"):
    graph.start_run(synthetic.run_spec(op, run_id=rid, family="elementwise", hw=HW, started_at=1.78e9))

    def a(step, parent=None, **kw):
        kw.setdefault("created_at", 1.78e9 + 10 * step + 0.123)
        return synthetic.attempt(
            rid, step, op, parent=None if parent is None else f"{rid}:s{parent}", family="elementwise", hw=HW, **kw
        )

    graph.record_attempts(
        [
            a(0, speedup=0.71, title="baseline: template pointwise", params={"template": "pointwise"}),
            a(1, 0, speedup=1.4, title="unroll: 1 -> 2", params=knob("unroll", 1, 2)),
            a(2, 1, status="compile_error", error_kind="compile_error", title="block: 16384 -> 4096"),
            a(3, 2, speedup=0.8, title="repair"),  # its parent failed: judged against PyTorch
            a(
                4,
                1,
                speedup=1.45,
                title="schedule: static -> dynamic",
                params=knob("schedule", "static", "dynamic", backtracked=True),
                used=(UsedItem(kind="decision", id=f"{rid}:s1", tier="warm", rank=0, tokens=80),),
            ),
        ]
    )
    graph.finish_run(rid)
    return graph


def presentation(client, ns):
    """Everything derived for people, by local id."""
    snap = {}
    for r in rows(
        client,
        "MATCH (d:Decision {ns: $ns})-[:PRODUCED]->(o:Outcome) "
        "RETURN d.id AS id, labels(d) AS dl, labels(o) AS ol, d.caption AS dc, o.caption AS oc, "
        "toString(d.created) AS created, toString(o.created) AS ocreated, "
        "o.case_names AS names, o.case_results AS results, o.case_speedups AS speedups",
        ns=ns,
    ):
        snap[("Decision", r.pop("id"))] = {**r, "dl": sorted(r["dl"]), "ol": sorted(r["ol"])}
    for r in rows(
        client,
        "MATCH (r:Run {ns: $ns}) RETURN r.id AS id, r.caption AS caption, toString(r.started) AS started, "
        "toString(r.ended) AS ended",
        ns=ns,
    ):
        snap[("Run", r.pop("id"))] = r
    for r in rows(client, "MATCH (k:Kernel {ns: $ns}) RETURN k.id AS id, k.caption AS caption", ns=ns):
        snap[("Kernel", r.pop("id"))] = r
    snap["outcome FROM"] = sorted(
        (r["c"], r["p"])
        for r in rows(client, "MATCH (c:Outcome {ns: $ns})-[:FROM]->(p:Outcome) RETURN c.id AS c, p.id AS p", ns=ns)
    )
    return snap


def labels(client, ns, decision):
    return rows(
        client,
        "MATCH (d:Decision {uid: $uid})-[:PRODUCED]->(o) RETURN labels(d) AS d, labels(o) AS o",
        uid=f"{ns}/{decision}",
    )[0]


def test_each_decision_and_its_outcome_carry_exactly_one_class_label(graph_client):
    record_lineage(ExperienceGraph(graph_client, namespace="t"))
    expected = {
        "r1:s0": ("Negative", {"Root"}),  # a 0.71x root: slower than PyTorch
        "r1:s1": ("Effective", set()),
        "r1:s2": ("Failed", set()),
        "r1:s3": ("Negative", set()),  # 0.8x after a failed parent: compared with PyTorch
        "r1:s4": ("Effective", {"Backtrack", "Incumbent"}),  # 1.45x PyTorch (a step of 1.45 / 1.4), the best
    }
    for decision, (cls, marks) in expected.items():
        got = labels(graph_client, "t", decision)
        assert set(got["d"]) == {"Decision", cls} | marks, decision
        assert set(got["o"]) == {"Outcome", cls} | marks, decision


def test_the_incumbent_label_moves_with_the_incumbent_in_the_same_write(graph_client):
    graph = record_lineage(ExperienceGraph(graph_client, namespace="t"))
    graph.start_run(synthetic.run_spec("relu", run_id="r2", family="elementwise", hw=HW))
    graph.record_attempt(synthetic.attempt("r2", 0, "relu", family="elementwise", hw=HW, speedup=1.1))
    result = graph.record_attempt(
        synthetic.attempt("r2", 1, "relu", parent="r1:s4", family="elementwise", hw=HW, speedup=3.0)
    )
    assert result.incumbent_changed and result.incumbent_id == "r2:s1"
    marked = rows(
        graph_client,
        "MATCH (d:Decision:Incumbent {ns: 't'})-[:PRODUCED]->(o:Outcome:Incumbent) RETURN d.id AS id ORDER BY id",
    )
    assert [r["id"] for r in marked] == ["r1:s4", "r2:s1"]
    incumbents = rows(graph_client, "MATCH (:Run {ns: 't'})-[:INCUMBENT]->(d) RETURN d.id AS id ORDER BY id")
    assert [r["id"] for r in marked] == [r["id"] for r in incumbents]


def test_captions_say_what_was_tried_and_how_it_went(graph_client):
    record_lineage(ExperienceGraph(graph_client, namespace="t"))
    snap = presentation(graph_client, "t")
    assert [snap[("Decision", f"r1:s{i}")]["dc"] for i in range(5)] == [
        "0.71× · relu · s0 baseline pointwise",
        "1.40× ↑1.97 · s1 unroll 1→2",
        "compile error · s2 block 16384→4096",
        "0.80× · s3 repair",  # its parent failed: no step to compare
        "1.45× ↑1.04 · s4 schedule static→dynamic",
    ]
    assert all(v["dc"] == v["oc"] for k, v in snap.items() if k[0] == "Decision")
    assert snap[("Run", "r1")]["caption"] == "relu · 2026-05-28 20:26"
    kernels = sorted(v["caption"].split(" · ")[0] for k, v in snap.items() if k[0] == "Kernel")
    assert kernels == [
        "kernel",
        "kernel",
        "pointwise",
        "pointwise",
        "pointwise",
    ]  # template, where the proposer named one


def test_times_are_neo4j_datetimes_of_the_recorded_epoch_seconds(graph_client):
    record_lineage(ExperienceGraph(graph_client, namespace="t"))
    row = rows(
        graph_client,
        "MATCH (d:Decision {uid: 't/r1:s1'})-[:PRODUCED]->(o), (r:Run {uid: 't/r1'}) "
        "RETURN d.created AS created, d.created_at AS created_at, o.created AS ocreated, r.started AS started, "
        "r.started_at AS started_at, r.ended AS ended, r.ended_at AS ended_at",
    )[0]
    assert row["created"].to_native().timestamp() == pytest.approx(row["created_at"], abs=5e-4)
    assert row["ocreated"] == row["created"]
    assert row["started"].to_native().timestamp() == pytest.approx(row["started_at"], abs=5e-4)
    assert row["ended"].to_native().timestamp() == pytest.approx(row["ended_at"], abs=5e-4)


def test_the_outcomes_mirror_the_decision_lineage_and_nothing_else_links_them(graph_client):
    record_lineage(ExperienceGraph(graph_client, namespace="t"))
    assert presentation(graph_client, "t")["outcome FROM"] == [
        ("r1:s1", "r1:s0"),
        ("r1:s2", "r1:s1"),
        ("r1:s3", "r1:s2"),
        ("r1:s4", "r1:s1"),
    ]
    other = rows(graph_client, "MATCH (:Outcome {ns: 't'})-[r]-(:Outcome) WHERE type(r) <> 'FROM' RETURN count(r) AS n")
    assert other[0]["n"] == 0
    stats = ExperienceGraph(graph_client, namespace="t").stats()
    assert stats.relationships["FROM"] == 4  # the mirror is presentation: not counted as memory


def test_journal_replay_reproduces_the_presentation_exactly(graph_client, tmp_path):
    graph = record_lineage(ExperienceGraph(graph_client, namespace="t", journal=Journal(tmp_path, "t")))
    before = presentation(graph_client, "t")
    graph.prune(everything=True)  # the graph loses everything, the journal keeps it
    assert presentation(graph_client, "t")["outcome FROM"] == []
    report = graph.sync()
    assert report.ok and {k: n for k, n in report.replayed.items() if n} == {"run": 1, "attempt": 5, "run_end": 1}
    assert presentation(graph_client, "t") == before


def test_import_reproduces_the_presentation_exactly(graph_client):
    source = record_lineage(ExperienceGraph(graph_client, namespace="src"))
    buffer = io.StringIO()
    source.export_to(buffer)
    assert "caption" not in buffer.getvalue() and "Effective" not in buffer.getvalue()
    ExperienceGraph(graph_client, namespace="dst").import_from(io.StringIO(buffer.getvalue()), distill=False)
    assert presentation(graph_client, "dst") == presentation(graph_client, "src")


def test_init_derives_the_presentation_of_a_graph_recorded_without_it(graph_client):
    graph = record_lineage(ExperienceGraph(graph_client, namespace="t"))
    before = presentation(graph_client, "t")
    graph_client._driver.execute_query(  # what a graph recorded by an older KOPE looks like
        "MATCH (n {ns: 't'}) WHERE n:Decision OR n:Outcome OR n:Run OR n:Kernel "
        "REMOVE n:Effective:Partial:Ineffective:Negative:Failed:Root:Backtrack:Incumbent "
        "REMOVE n.caption, n.created, n.started, n.ended, n.case_names, n.case_results, n.case_speedups "
        "WITH n OPTIONAL MATCH (n:Outcome)-[f:FROM]->() DELETE f"
    )
    assert presentation(graph_client, "t") != before
    counts = graph.refresh_presentation()
    assert counts == {"Decision": 5, "Run": 1, "Kernel": 5}
    assert presentation(graph_client, "t") == before
    graph.refresh_presentation()  # idempotent
    assert presentation(graph_client, "t") == before


def test_the_lineages_read_back_per_operator(graph_client):
    graph = record_lineage(ExperienceGraph(graph_client, namespace="t"))
    record_lineage(graph, rid="g1", op="gelu")
    groups = graph.lineages()
    assert [g.operator for g in groups] == ["gelu", "relu"]
    relu = groups[1]
    assert relu.roots == ["r1:s0"] and relu.children == {
        "r1:s0": ["r1:s1"],
        "r1:s1": ["r1:s2", "r1:s4"],
        "r1:s2": ["r1:s3"],
    }
    assert {n.id: n.cls for n in relu.nodes.values()} == {
        "r1:s0": "negative",
        "r1:s1": "effective",
        "r1:s2": "failed",
        "r1:s3": "negative",
        "r1:s4": "effective",
    }
    assert [n.id for n in relu.nodes.values() if n.incumbent] == ["r1:s4"] and relu.best.id == "r1:s4"
    assert [(e.tier, e.rank, e.tokens, e.id) for e in relu.evidence["r1:s4"]] == [("warm", 0, 80, "r1:s1")]
    assert [r.id for r in relu.runs] == ["r1"] and [n.step for n in relu.run_steps("r1")] == [0, 1, 2, 3, 4]
    assert [g.operator for g in graph.lineages("gelu")] == ["gelu"]
