"""Export/import, prune, insights, sync and the Browser guide queries against a real Neo4j."""

import io

import pytest

from kope.memory import ExperienceGraph, Journal, KnowledgeDoc, UsedItem, synthetic
from kope.memory.browser import load_slides
from kope.memory.errors import ExportFormatError, PruneRefusedError, UnknownRunError
from kope.memory.scoring import recompute_all

HW = synthetic.hardware("cpu-aaaa", "x86_64-avx2", "intel")


def populate(graph, prefix="r", runs=3):
    """A small but complete memory: branches, failures, cross-run lineage, USED edges, insights, knowledge."""
    graph.upsert_knowledge([KnowledgeDoc(id="cpu-simd", title="x86 SIMD", text="Use 8-wide loads.", targets=("cpu",))])
    for n in range(runs):
        rid = f"{prefix}{n}"
        op = ["softmax", "layernorm", "relu"][n % 3]
        family = "elementwise" if op == "relu" else "normalization"
        graph.start_run(synthetic.run_spec(op, run_id=rid, family=family, hw=HW))
        graph.record_attempts(
            [
                synthetic.attempt(rid, 0, op, family=family, hw=HW, speedup=1.0),
                synthetic.attempt(
                    rid, 1, op, parent=f"{rid}:s0", family=family, hw=HW, speedup=1.4, layer="vectorization"
                ),
                synthetic.attempt(
                    rid, 2, op, parent=f"{rid}:s0", family=family, hw=HW, status="compile_error", layer="vectorization"
                ),
                synthetic.attempt(
                    rid,
                    3,
                    op,
                    parent=f"{rid}:s1",
                    family=family,
                    hw=HW,
                    status="compile_error",
                    layer="tiling",
                    used=(
                        UsedItem(kind="decision", id=f"{rid}:s1", tier="warm", rank=0, tokens=50),
                        UsedItem(kind="knowledge", id="cpu-simd", tier="cold", rank=1, tokens=20),
                    ),
                ),
            ]
        )
        graph.finish_run(rid)
    return graph


def counts(graph):
    s = graph.stats()
    return s.nodes, s.relationships


def test_export_then_import_into_an_empty_database_reproduces_identical_counts(graph_client):
    source = populate(ExperienceGraph(graph_client, namespace="src"))
    buffer = io.StringIO()
    exported = source.export_to(buffer)
    before = counts(source)
    assert exported.node_total == sum(before[0].values()) and exported.relationship_total == sum(before[1].values())

    from tests.support.graph import clear_graph

    text = buffer.getvalue()
    clear_graph(graph_client)  # the database is now empty
    target = ExperienceGraph(graph_client, namespace="src")
    target.import_from(io.StringIO(text), "export.jsonl")
    assert counts(target) == before
    again = io.StringIO()
    target.export_to(again)
    strip = lambda t: t.splitlines()[1:]  # noqa: E731 - everything but the header (export time)
    assert strip(again.getvalue()) == strip(text)


def test_import_is_idempotent_and_can_target_another_namespace(graph_client):
    source = populate(ExperienceGraph(graph_client, namespace="team-a"))
    buffer = io.StringIO()
    source.export_to(buffer)
    other = ExperienceGraph(graph_client, namespace="team-b")
    other.import_from(io.StringIO(buffer.getvalue()))
    first = counts(other)
    other.import_from(io.StringIO(buffer.getvalue()))
    assert counts(other) == first == counts(source)
    assert other.run_state("r0").incumbent.id == "r0:s1"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda lines: lines[:-1], "no end marker: the file is truncated"),
        (lambda lines: ['{"format": "other"}'] + lines[1:], "not a KOPE memory export"),
        (lambda lines: [lines[0].replace('"version": 2', '"version": 9')] + lines[1:], "version 9 is not supported"),
        (lambda lines: lines[:1] + ['{"node": "Person", "id": "x", "props": {}}'] + lines[1:], "bad node line"),
        (
            lambda lines: (
                lines[:1] + ['{"rel": "KNOWS", "from": ["Run", "a"], "to": ["Run", "b"], "props": {}}'] + lines[1:]
            ),
            "KNOWS",
        ),
    ],
)
def test_a_bad_export_file_is_rejected_before_anything_is_written(graph_client, mutate, message):
    source = populate(ExperienceGraph(graph_client, namespace="src"), runs=1)
    buffer = io.StringIO()
    source.export_to(buffer)
    lines = mutate(buffer.getvalue().splitlines())
    target = ExperienceGraph(graph_client, namespace="dst")
    with pytest.raises(ExportFormatError, match=message):
        target.import_from(io.StringIO("\n".join(lines) + "\n"))
    assert sum(target.stats().nodes.values()) == 0


def test_prune_a_run_leaves_no_dangling_edges_and_rescored_ancestors(graph_client):
    graph = populate(ExperienceGraph(graph_client, namespace="t"), runs=2)
    # r2 continues from r0's best decision: a cross-run lineage.
    graph.start_run(synthetic.run_spec("softmax", run_id="r2", hw=HW))
    graph.record_attempt(synthetic.attempt("r2", 0, "softmax", parent="r0:s1", hw=HW, speedup=2.0))
    with pytest.raises(PruneRefusedError, match="runs r2 started from decisions of the selected runs"):
        graph.prune(["r0"])
    before = {d.id: d.d for d in graph.run_state("r0").decisions}
    report = graph.prune(["r2"])
    assert report.runs == ["r2"] and report.decisions == 1 and report.rescored >= 2
    after = {d.id: d.d for d in graph.run_state("r0").decisions}
    assert after["r0:s1"] < before["r0:s1"]
    decisions = [d for rid in ("r0", "r1") for d in graph.run_state(rid).decisions]
    assert after == pytest.approx(
        {k: v for k, v in recompute_all({d.id: (d.r, d.parent_id) for d in decisions}).items() if k.startswith("r0")}
    )
    dangling = graph_client._driver.execute_query(
        "MATCH (d:Decision {ns: 't'}) WHERE d.parent_id IS NOT NULL AND NOT (d)-[:FROM]->() RETURN count(d) AS n"
    ).records[0]["n"]
    assert dangling == 0
    with pytest.raises(UnknownRunError):
        graph.run("r2")


def test_prune_by_age_and_everything(graph_client):
    graph = populate(ExperienceGraph(graph_client, namespace="t"), runs=2)
    assert graph.prune(older_than_days=1).runs == []
    assert graph.prune(older_than_days=0, dry_run=True).decisions == 8
    report = graph.prune(older_than_days=0)
    assert report.runs == ["r0", "r1"] and report.orphans["kernels"] > 0
    nodes = graph.stats().nodes
    assert nodes["Decision"] == nodes["Run"] == nodes["Kernel"] == nodes["Task"] == nodes["Insight"] == 0
    assert nodes["Knowledge"] == 1
    assert graph.prune(everything=True).deleted_nodes == 1
    assert sum(graph.stats().nodes.values()) == 0


def test_insights_are_distilled_deterministically_and_linked_to_their_outcomes(graph_client):
    graph = populate(ExperienceGraph(graph_client, namespace="t"), runs=3)
    report = graph.distill()
    assert report.rules == 2  # compile_error on x86_64-avx2 for normalization (4) and elementwise (2)
    rows = graph_client._driver.execute_query(
        "MATCH (i:Insight {ns: 't', kind: 'rule', family: 'normalization'})-[:DERIVED_FROM]->(o:Outcome) "
        "RETURN i.support AS support, i.text AS text, collect(o.id) AS outcomes"
    ).records
    assert rows[0]["support"] == 4
    assert sorted(rows[0]["outcomes"]) == ["r0:s2", "r0:s3", "r1:s2", "r1:s3"]
    about = graph_client._driver.execute_query(
        "MATCH (:Insight {ns: 't', kind: 'rule', family: 'normalization'})-[:ABOUT]->(n) RETURN labels(n)[0] AS l, n.id AS id ORDER BY l, id"
    ).records
    assert [(r["l"], r["id"]) for r in about] == [
        ("Hardware", "cpu-aaaa"),
        ("Operator", "layernorm"),
        ("Operator", "softmax"),
    ]
    text = rows[0]["text"]
    graph.distill()
    assert (
        graph_client._driver.execute_query(
            "MATCH (i:Insight {ns: 't', kind: 'rule', family: 'normalization'}) RETURN i.text AS t"
        ).records[0]["t"]
        == text
    )


def test_sync_replays_only_what_the_graph_lacks(graph_client, tmp_path):
    journal = Journal(tmp_path, "t")
    graph = ExperienceGraph(graph_client, namespace="t", journal=journal)
    graph.start_run(synthetic.run_spec("softmax", run_id="r1", hw=HW))
    graph.record_attempts(
        [synthetic.attempt("r1", i, "softmax", parent=i and "r1:s0" or None, hw=HW) for i in range(3)]
    )
    # A process journaled two more attempts and died before writing them to the graph.
    lost = [
        synthetic.attempt("r1", 3, "softmax", parent="r1:s2", hw=HW),
        synthetic.attempt("r1", 4, "softmax", parent="r1:s3", hw=HW),
    ]
    from kope.memory.journal import JournalEntry

    journal.append([JournalEntry("attempt", a.id, "softmax", a.to_json()) for a in lost])
    dry = graph.sync(dry_run=True)
    assert dry.pending == 2 and dry.present == 4
    report = graph.sync()
    assert report.replayed["attempt"] == 2 and report.ok
    assert [d.id for d in graph.run_state("r1").decisions] == [f"r1:s{i}" for i in range(5)]
    assert graph.sync().pending == 0


def add_effect_evidence(graph):
    """Two machines each timing elu with math=libm and math=poly: one effect insight (two comparisons)."""
    for n, hw in enumerate((HW, synthetic.hardware("cpu-bbbb", "x86_64-avx2", "intel"))):
        rid = f"effect{n}"
        graph.start_run(synthetic.run_spec("elu", run_id=rid, family="elementwise", hw=hw))
        graph.record_attempts(
            [
                synthetic.attempt(
                    rid,
                    step,
                    "elu",
                    family="elementwise",
                    hw=hw,
                    speedup=speed,
                    params={"template": "pointwise", "settings": {"math": math}},
                )
                for step, (math, speed) in enumerate([("libm", 1.0), ("poly", 4.0 + n)])
            ]
        )
        graph.finish_run(rid)


def test_every_browser_guide_query_runs_on_a_populated_graph(graph_client):
    populate(ExperienceGraph(graph_client, namespace="t"), runs=3)
    add_effect_evidence(ExperienceGraph(graph_client, namespace="t"))  # the effect slide needs controlled comparisons
    for slide in load_slides():  # with the parameters the slide sets: ns, every other one null (defaulted)
        params = {name: "t" if name == "ns" else None for name in slide.params}
        rows = graph_client.execute(slide.name, **params)
        assert rows, f"{slide.name} returned nothing on a populated graph"


def test_every_memory_and_browser_statement_compiles(graph_client):
    names = [n for n in graph_client.catalog.names() if n.startswith(("memory/", "browser/"))]
    assert len(names) > 50
    for name in names:
        graph_client._driver.execute_query("EXPLAIN " + graph_client.catalog.get(name).text)  # raises on a syntax error
