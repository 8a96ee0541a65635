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


def test_the_next_operator_of_a_family_is_tuned_by_a_model_trained_on_the_first(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    first = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e", "relu", "--steps", "3")
    assert first["proposer"] == "offline" and len(first["steps"]) == 3
    assert first["steps"][0]["title"] == "baseline: template pointwise"
    assert all(s["status"] == "correct" for s in first["steps"]), first["steps"]
    memory = ExperienceGraph(graph_client, namespace="offline-e2e")
    relu = memory.run_state(first["run_id"]).decisions
    # without records of three settings the proposer follows its initial design (one-knob changes), never
    # touching math (relu evaluates no exp), and never the same kernel twice
    assert len({d.code_hash for d in relu}) == 3
    for decision in relu:
        assert TemplateChoice.of(decision.params).settings["math"] == "libm"
        assert decision.thought.startswith("[offline proposer]")
    for decision in relu[1:]:
        parent = next(d for d in relu if d.id == decision.parent_id)
        choice, parent_choice = TemplateChoice.of(decision.params), TemplateChoice.of(parent.params)
        changed = {k for k, v in choice.settings.items() if parent_choice.settings[k] != v}
        assert choice.change is not None and changed == {choice.change["knob"]}

    second = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e", "leaky_relu", "--steps", "1")
    step0 = second["steps"][0]
    decision = memory.run_state(second["run_id"]).decisions[0]
    chosen = TemplateChoice.of(decision.params)
    assert chosen.template == "pointwise"
    # memory held relu's three attempts: the cost model trained on them chose the first step and cites them
    tuner = chosen.tuner
    assert tuner is not None
    assert tuner["basis"] == "model" and tuner["memory_records"] == 3 and tuner["predicted"] > 0
    assert step0["model"]["predicted"] == tuner["predicted"]
    assert step0["cited"] and {c.rsplit(":", 1)[0] for c in step0["cited"]} == {first["run_id"]}
    assert "Cost model (random forest) trained on 3 recorded attempts (0 from this run, 3 from memory)" in (
        decision.thought
    )
    records, _, _ = graph_client._driver.execute_query(
        "MATCH (d:Decision {ns: $ns, id: $id})-[:USED]->(e:Decision) RETURN e.operator AS op",
        {"ns": "offline-e2e", "id": decision.id},
        database_=graph_client.database,
    )
    assert "relu" in {r["op"] for r in records}, "the relu lineage was in leaky_relu's first prompt"

    alone = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e", "leaky_relu", "--steps", "1", "--no-memory")
    assert alone["steps"][0]["title"] == "baseline: template pointwise"
    assert alone["memory"] is False


def test_the_summary_says_where_each_operator_got_its_best_and_what_memory_contributed(
    kope_cli, neo4j_server, tmp_path
):
    env = neo4j_server.env(KOPE_NAMESPACE="offline-e2e-summary", KOPE_DATA_DIR=str(tmp_path / "data"))
    proc = kope_cli(
        "optimize",
        "--suite",
        "builtin",
        "--family",
        "elementwise",
        "--limit",
        "2",
        "--steps",
        "3",
        "--proposer",
        "offline",
        "--cases",
        CASES,
        "--out",
        str(tmp_path / "out"),
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "best at step" in proc.stdout and "What memory contributed:" in proc.stdout
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip().startswith(("add_scaled:", "clamp:"))]
    contribution = [line for line in lines if "memory:" in line]
    assert any(line.startswith("add_scaled:") and "initial design" in line for line in contribution), lines
    assert any(
        line.startswith("clamp:") and "predicted" in line and "measured" in line and "cited" in line
        for line in contribution
    ), lines


def test_a_task_without_a_template_or_example_ends_exhausted_and_says_why(kope_cli, neo4j_server, tmp_path):
    summary = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e-none", "tiny_cnn", "--steps", "2")
    assert summary["status"] == "exhausted" and summary["steps"] == []
    assert "no kernel template for 'tiny_cnn'" in summary["stop_reason"]
    assert "--proposer llm" in summary["stop_reason"]
