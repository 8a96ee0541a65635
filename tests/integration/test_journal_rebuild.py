"""The journal is the complete record: a namespace rebuilt from it into an empty one holds the same nodes,
relationships and scores, and `sync` finds and restores a relationship the graph lost (real Neo4j)."""

from __future__ import annotations

import shutil

from kope.memory import ExperienceGraph, Journal
from tests.support import journal_scenario
from tests.support.journal_scenario import cypher, snapshot, used_insight_edges


def test_a_namespace_rebuilt_from_its_journal_has_identical_nodes_relationships_and_scores(graph_client, tmp_path):
    source = ExperienceGraph(graph_client, namespace="src", journal=Journal(tmp_path, "src"))
    journal_scenario.record(source)
    before = snapshot(graph_client, "src")
    assert used_insight_edges(graph_client, "src") == 8  # r1, r2 (two each), r3 cite insights at steps 2 and 3
    assert {"USED", "FROM", "NEXT", "IN_RUN", "PRODUCED", "WROTE", "DERIVED_FROM", "ABOUT", "INCUMBENT"} <= set(
        before["relationships"]
    )

    shutil.copytree(tmp_path / "src", tmp_path / "rebuilt")  # the journal alone, into an empty namespace
    rebuilt = ExperienceGraph(graph_client, namespace="rebuilt", journal=Journal(tmp_path, "rebuilt"))
    report = rebuilt.sync()
    assert report.ok and not report.failed and not report.unlinked, report.to_dict()
    assert report.replayed["attempt"] == 16 and report.replayed["distill"] == 1

    assert snapshot(graph_client, "rebuilt") == before
    again = rebuilt.sync(dry_run=True)
    assert again.pending == 0 and again.relationships == {}


def test_sync_reports_and_restores_relationships_the_graph_lost(graph_client, tmp_path):
    graph = ExperienceGraph(graph_client, namespace="t", journal=Journal(tmp_path, "t"))
    journal_scenario.record(graph)
    before = snapshot(graph_client, "t")
    # Lose an attempt->insight USED edge, a lineage edge and an outcome edge (nodes all stay).
    cypher(
        graph_client,
        "MATCH (:Decision {uid: $d})-[u:USED]->(:Insight {uid: $i}) DELETE u",
        d="t/r1:s2",
        i=f"t/{journal_scenario.RULE}",
    )
    cypher(graph_client, "MATCH (:Decision {uid: $d})-[f:FROM]->(:Decision) DELETE f", d="t/r3:s3")
    cypher(graph_client, "MATCH (:Decision {uid: $d})-[p:PRODUCED]->() DELETE p", d="t/r0:s1")

    dry = graph.sync(dry_run=True)
    assert dry.pending == 0  # every node is there ...
    assert dry.relationships == {"USED": 1, "FROM": 1, "PRODUCED": 1}  # ... but not every relationship

    report = graph.sync()
    assert report.relinked == 3 and report.ok, report.to_dict()
    assert snapshot(graph_client, "t") == before
    assert graph.sync(dry_run=True).relationships == {}


def test_evidence_outside_the_namespace_is_not_reported_as_a_missing_relationship(graph_client, tmp_path):
    from kope.memory import UsedItem, synthetic

    graph = ExperienceGraph(graph_client, namespace="t", journal=Journal(tmp_path, "t"))
    hw = journal_scenario.HW
    graph.start_run(synthetic.run_spec("softmax", run_id="r1", hw=hw))
    elsewhere = UsedItem(kind="decision", id="other-team-run:s4", tier="warm", rank=0, tokens=10)
    result = graph.record_attempt(synthetic.attempt("r1", 0, "softmax", hw=hw, used=(elsewhere,)))
    assert result.missing_evidence == ("decision:other-team-run:s4",)
    assert graph.sync(dry_run=True).relationships == {}  # nothing to restore: it cannot be linked here


def test_an_import_is_journaled_so_a_namespace_grown_from_it_rebuilds_identically(graph_client, tmp_path):
    import io

    from kope.memory import synthetic

    seed = ExperienceGraph(graph_client, namespace="seed")
    journal_scenario.record(seed)
    export = io.StringIO()
    seed.export_to(export)
    export_path = tmp_path / "seed.jsonl"
    export_path.write_text(export.getvalue(), encoding="utf-8")

    grown = ExperienceGraph(graph_client, namespace="grown", journal=Journal(tmp_path / "j", "grown"))
    with open(export_path, encoding="utf-8") as handle:
        grown.import_from(handle, source=str(export_path))
    export_path.unlink()  # the journal keeps its own copy
    hw = journal_scenario.HW
    grown.start_run(synthetic.run_spec("softmax", run_id="after", hw=hw))
    grown.record_attempt(synthetic.attempt("after", 0, "softmax", parent="r0:s1", hw=hw, speedup=2.0))  # an import's
    grown.finish_run("after")
    before = snapshot(graph_client, "grown")

    shutil.copytree(tmp_path / "j" / "grown", tmp_path / "j" / "rebuilt")
    rebuilt = ExperienceGraph(graph_client, namespace="rebuilt", journal=Journal(tmp_path / "j", "rebuilt"))
    report = rebuilt.sync()
    assert report.ok and report.replayed["import"] == 1 and report.replayed["attempt"] == 1, report.to_dict()
    assert snapshot(graph_client, "rebuilt") == before
    assert rebuilt.sync(dry_run=True).pending == 0  # the import is there now: not replayed again
