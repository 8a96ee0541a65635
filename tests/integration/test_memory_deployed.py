"""The as-deployed figure of a run's best kernel in the Experience Graph, against a real Neo4j (#33 item 7).

``kope optimize`` times its best kernel as deployed after the run (``best.py`` in plain processes under the
user's own settings); the figure goes onto that attempt's Outcome through the same journal-first path as every
write (``Memory.record_deployed``, ``kope.memory.deployed``), is shown by the lineage page and the captions
Browser draws, survives export -> import and a journal replay, and reaches the graph through a memory server.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from kope.memory import DeployedFigures, ExperienceGraph, Journal, synthetic
from kope.memory.browser import load_slides
from kope.memory.errors import InvalidRecordError, UnknownDecisionError
from kope.memory.lineage_page import render_page
from kope.memory.remote import RemoteMemory
from tests.support.memory_server import memory_server

ROOT = Path(__file__).resolve().parents[1]
TINY_RELU = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
HW = synthetic.hardware("cpu-dddd", "x86_64-avx2", "intel")
FIGURES = {"case0": 0.5, "case1": 0.25, "case2": None}  # case2 not timed as deployed; case3 not named


def recorded(memory, run_id: str = "r0") -> DeployedFigures:
    """A run of two attempts (s1 the best, 2.0x by the harness), ended, then its best timed as deployed."""
    memory.start_run(synthetic.run_spec("relu", run_id=run_id, family="elementwise", hw=HW))
    memory.record_attempts(
        [
            synthetic.attempt(run_id, 0, "relu", family="elementwise", hw=HW, speedup=1.0),
            synthetic.attempt(run_id, 1, "relu", parent=f"{run_id}:s0", family="elementwise", hw=HW, speedup=2.0),
        ]
    )
    memory.finish_run(run_id)
    figures = DeployedFigures(
        run_id=run_id,
        decision_id=f"{run_id}:s1",
        speedup=0.354,
        error="incorrect: case3 was not timed",
        cases=FIGURES,
    )
    assert memory.record_deployed(figures) is True
    return figures


def assert_holds(memory, figures: DeployedFigures) -> None:
    best = memory.outcome(figures.decision_id)
    assert best.speedup == 2.0  # the harness's figure is unchanged beside it
    assert (best.deployed_speedup, best.deployed_error) == (figures.speedup, figures.error)
    assert best.deployed_at == figures.measured_at
    assert {c.name: c.deployed_speedup for c in best.cases} == {**FIGURES, "case3": None}
    other = memory.outcome(figures.decision_id.replace(":s1", ":s0"))  # not measured as deployed: reads as None
    assert (other.deployed_speedup, other.deployed_error, other.deployed_at) == (None, None, None)


def outcome_props(graph_client, uid: str) -> dict:
    """Every property of one Outcome node, as Browser shows it."""
    query = "MATCH (o:Outcome {uid: $uid}) RETURN properties(o) AS p"
    records, _, _ = graph_client._driver.execute_query(query, {"uid": uid}, database_=graph_client.database)
    return records[0].data()["p"]


def test_the_best_attempts_outcome_holds_the_as_deployed_figure_and_readers_show_it(graph_client, tmp_path):
    graph = ExperienceGraph(graph_client, namespace="dep-a", journal=Journal(tmp_path / "memory", "dep-a"))
    figures = recorded(graph)
    assert_holds(graph, figures)
    props = outcome_props(graph_client, "dep-a/r0:s1")
    assert props["deployed_speedup"] == 0.354 and props["caption"].startswith("2.00× ↑2.00 · deployed 0.35× · s1")
    assert props["case_speedups"] == [
        "2.00× · deployed 0.50×",
        "2.00× · deployed 0.25×",
        "2.00× · deployed -",
        "2.00×",
    ]
    assert "deployed" not in outcome_props(graph_client, "dep-a/r0:s0")["caption"]
    # the Browser guide's per-case slide (default: the fastest correct decision, the run's best)
    cases = next(s for s in load_slides() if s.name.endswith("06_cases"))
    rows = graph_client.execute(cases.name, ns="dep-a", decision=None)
    assert "deployed 0.35×" in rows[0]["decision"]
    assert [r["speedup"] for r in rows] == props["case_speedups"]
    # written twice (a retried write, a replay): the same properties
    graph.record_deployed(figures)
    assert outcome_props(graph_client, "dep-a/r0:s1") == props
    # the lineage page: the operator's summary, the decision's facts, the per-case column
    page = render_page("dep-a", graph.lineages())
    assert "best 2.00× · 0.35× as deployed (s1" in page
    assert "<th>speedup as deployed</th><td>0.35×</td>" in page and "<th>as deployed</th>" in page
    assert "incorrect: case3 was not timed" in page
    # the journal has it, in the operator's log and its Markdown
    wal = [json.loads(line) for line in (tmp_path / "memory" / "dep-a" / "wal" / "relu.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in wal][-1] == "deployed" and wal[-1]["data"]["cases"] == FIGURES
    assert "`r0:s1` as deployed" in (tmp_path / "memory" / "dep-a" / "journal" / "relu.md").read_text()


def test_a_measurement_of_a_decision_the_graph_lacks_or_of_another_run_is_refused(graph_client):
    graph = ExperienceGraph(graph_client, namespace="dep-missing")
    with pytest.raises(UnknownDecisionError, match="no outcome to go to"):
        graph.record_deployed(DeployedFigures(run_id="r9", decision_id="r9:s0", speedup=1.0))
    recorded(graph)
    with pytest.raises(InvalidRecordError, match="belongs to run r0, not to run r1"):
        graph.record_deployed(DeployedFigures(run_id="r1", decision_id="r0:s0", speedup=1.0))
    assert graph.outcome("r0:s0").deployed_speedup is None  # nothing written


def test_export_import_keeps_the_figure_and_a_file_without_it_still_imports(graph_client):
    source = ExperienceGraph(graph_client, namespace="dep-src")
    figures = recorded(source)
    buffer = io.StringIO()
    source.export_to(buffer)
    text = buffer.getvalue()
    target = ExperienceGraph(graph_client, namespace="dep-dst")
    target.import_from(io.StringIO(text), "export.jsonl")
    assert_holds(target, figures)
    caption = outcome_props(graph_client, "dep-dst/r0:s1")["caption"]
    assert "deployed 0.35×" in caption  # derived again on import

    # a file written before the measurement existed: no deployed_* property, no per-case figure
    lines = []
    for line in text.splitlines():
        obj = json.loads(line)
        if obj.get("node") == "Outcome":
            props = {k: v for k, v in obj["props"].items() if not k.startswith("deployed_")}
            cases = [{k: v for k, v in c.items() if k != "deployed_speedup"} for c in json.loads(props["cases_json"])]
            obj["props"] = {**props, "cases_json": json.dumps(cases, separators=(",", ":"))}
        lines.append(json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")))
    old = ExperienceGraph(graph_client, namespace="dep-old")
    old.import_from(io.StringIO("\n".join(lines) + "\n"), "old.jsonl")
    best = old.outcome("r0:s1")
    assert best.speedup == 2.0 and best.deployed_speedup is None and best.deployed_at is None
    assert all(c.deployed_speedup is None for c in best.cases)
    assert "deployed" not in outcome_props(graph_client, "dep-old/r0:s1")["caption"]


def test_a_journal_replay_restores_the_figure_once(graph_client, tmp_path):
    graph = ExperienceGraph(graph_client, namespace="dep-j", journal=Journal(tmp_path / "a" / "memory", "dep-j"))
    figures = recorded(graph)
    shutil.copytree(tmp_path / "a" / "memory" / "dep-j", tmp_path / "b" / "memory" / "dep-rebuilt")
    rebuilt = ExperienceGraph(
        graph_client, namespace="dep-rebuilt", journal=Journal(tmp_path / "b" / "memory", "dep-rebuilt")
    )
    report = rebuilt.sync()
    assert report.ok and report.replayed["deployed"] == 1, report.to_dict()
    assert_holds(rebuilt, figures)
    assert rebuilt.sync().pending == 0  # the graph holds it now: nothing to replay
    assert graph.sync().pending == 0  # and the original never lacked it


def test_a_memory_server_keeps_the_figure(neo4j_server, graph_client, tmp_path):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-dep", "read,write")
        with RemoteMemory(server.url, token, journal_root=tmp_path / "client" / "memory") as remote:
            figures = recorded(remote)
            assert_holds(remote, figures)  # read back through the server
            namespace = remote.namespace
            assert remote.sync().pending == 0
    finally:
        server.stop()
    assert outcome_props(graph_client, f"{namespace}/r0:s1")["deployed_speedup"] == figures.speedup
    # the client's journal alone, written straight to Neo4j, gives the same outcome
    shutil.copytree(tmp_path / "client" / "memory" / namespace, tmp_path / "direct" / "memory" / "dep-direct")
    direct = ExperienceGraph(
        graph_client, namespace="dep-direct", journal=Journal(tmp_path / "direct" / "memory", "dep-direct")
    )
    assert direct.sync().ok
    assert_holds(direct, figures)


def test_kope_optimize_records_its_best_kernels_as_deployed_figure_in_the_graph(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    env = neo4j_server.env(
        KOPE_NAMESPACE="dep-run",
        KOPE_DATA_DIR=str(tmp_path / "data"),
        KOPE_EVALUATOR_WARMUP_MS="5",
        KOPE_EVALUATOR_REP_MS="20",
        KOPE_EVALUATOR_FINAL_REP_MS="20",
    )
    proc = kope_cli(
        "optimize", str(TINY_RELU), "--proposer", "offline", "--cases", "1", "--steps", "1",
        "--out", str(tmp_path / "out"), "--json", env=env, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)[0]
    assert summary["best_deployed_speedup"] is not None, summary  # measured: the run's best kernel as deployed
    graph = ExperienceGraph(graph_client, namespace="dep-run")
    best = graph.outcome(summary["best_id"])
    assert best.deployed_speedup == summary["best_deployed_speedup"] and best.deployed_error is None
    assert best.speedup == summary["best_speedup"]  # the harness's figure beside it
    stored = {c.name: c.deployed_speedup for c in best.cases}
    assert stored and all(v is not None and v > 0 for v in stored.values()), stored
    written = json.loads((Path(summary["best_path"]).parent / "best_outcome.json").read_text())
    assert written["deployed_cases"] == stored  # the run folder and the graph say the same
    shown = json.loads(kope_cli("memory", "show", summary["run_id"], "--json", env=env, check=True).stdout)
    assert shown["deployed"]["speedup"] == best.deployed_speedup and shown["deployed"]["error"] is None
    text = kope_cli("memory", "show", summary["run_id"], env=env, check=True).stdout
    assert f"as deployed: {best.deployed_speedup:.3f}x" in text
    report = tmp_path / "lineage.html"
    kope_cli("memory", "report", "-o", str(report), env=env, check=True)
    assert f"{summary['best_deployed_speedup']:.2f}× as deployed" in report.read_text()
    export = tmp_path / "export.jsonl"
    kope_cli("memory", "export", "-o", str(export), env=env, check=True)
    kope_cli("memory", "import", str(export), "--namespace", "dep-run-copy", env=env, check=True)
    copy = ExperienceGraph(graph_client, namespace="dep-run-copy").outcome(summary["best_id"])
    assert copy.deployed_speedup == best.deployed_speedup
