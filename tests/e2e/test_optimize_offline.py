"""`kope optimize` with the offline proposer: real templates, the real harness on CPU and the real Neo4j.

The offline proposer is KOPE's default without an LLM; these tests check that it
explores a template, says what it is, and that memory changes what it does on the
next operator of a family (and that --no-memory does not).
"""

from __future__ import annotations

import json

import pytest

from kope.agent.offline import TemplateChoice
from kope.memory import ExperienceGraph

pytestmark = pytest.mark.slow
CASES = "0"  # one case keeps each evaluation short


def optimize(kope_cli, neo4j_server, tmp_path, namespace, task, *args):
    env = neo4j_server.env(KOPE_NAMESPACE=namespace, KOPE_DATA_DIR=str(tmp_path / "data"))
    proc = kope_cli(
        "optimize",
        task,
        "--proposer",
        "offline",
        "--cases",
        CASES,
        "--out",
        str(tmp_path / "out"),
        "--json",
        *args,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "offline" in proc.stderr and "Traceback" not in proc.stderr
    return json.loads(proc.stdout)[0]


def test_the_next_operator_of_a_family_starts_from_the_best_recorded_settings(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    first = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e", "relu", "--steps", "3")
    assert first["proposer"] == "offline" and len(first["steps"]) == 3
    assert first["steps"][0]["title"] == "baseline: template pointwise"
    assert all(s["status"] == "correct" for s in first["steps"]), first["steps"]
    memory = ExperienceGraph(graph_client, namespace="offline-e2e")
    relu = memory.run_state(first["run_id"]).decisions
    # each later step changes exactly one knob of the state it starts from, and says so
    for decision in relu[1:]:
        parent = next(d for d in relu if d.id == decision.parent_id)
        choice, parent_choice = TemplateChoice.of(decision.params), TemplateChoice.of(parent.params)
        changed = {k for k, v in choice.settings.items() if parent_choice.settings[k] != v}
        assert choice.change is not None and changed == {choice.change["knob"]}
        assert decision.thought.startswith("[offline proposer]")
    best_relu = max((d for d in relu if d.status == "correct"), key=lambda d: (d.a or 0.0, -d.step))

    second = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e", "leaky_relu", "--steps", "1")
    step0 = second["steps"][0]
    decision = memory.run_state(second["run_id"]).decisions[0]
    assert TemplateChoice.of(decision.params).template == "pointwise"
    # memory held relu's lineage: the best correct settings recorded there are the starting point, cited
    assert step0["title"] == "start from the best recorded settings (relu)", step0
    assert TemplateChoice.of(decision.params).settings == TemplateChoice.of(best_relu.params).settings
    assert f"({best_relu.id}:" in decision.thought
    records, _, _ = graph_client._driver.execute_query(
        "MATCH (d:Decision {ns: $ns, id: $id})-[:USED]->(e:Decision) RETURN e.operator AS op",
        {"ns": "offline-e2e", "id": decision.id},
        database_=graph_client.database,
    )
    assert "relu" in {r["op"] for r in records}, "the relu lineage was in leaky_relu's first prompt"

    alone = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e", "leaky_relu", "--steps", "1", "--no-memory")
    assert alone["steps"][0]["title"] == "baseline: template pointwise"
    assert alone["memory"] is False


def test_a_task_without_a_template_or_example_ends_exhausted_and_says_why(kope_cli, neo4j_server, tmp_path):
    summary = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e-none", "tiny_cnn", "--steps", "2")
    assert summary["status"] == "exhausted" and summary["steps"] == []
    assert "no kernel template for 'tiny_cnn'" in summary["stop_reason"]
    assert "--proposer llm" in summary["stop_reason"]
