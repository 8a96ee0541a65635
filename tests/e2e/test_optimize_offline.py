"""`kope optimize` with the offline proposer: real templates, the real harness on CPU and the real Neo4j.

The offline proposer is KOPE's default without an LLM; these tests check that it
explores a template, says what it is, and that memory changes what it does on the
next operator of a family (and that --no-memory does not).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from kope.agent.offline import TemplateChoice
from kope.memory import ExperienceGraph
from tests.support.hints import parse_hint

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


def serve(args, env):
    """Start `kope ARGS` (kope browser), read its banner, fetch the guide and the lineage page, stop it."""
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("kope")), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env,
    )  # fmt: skip
    try:
        lines = []
        while not any(ln.startswith("Lineage page:") for ln in lines):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
        namespace = args[args.index("--namespace") + 1]
        play = next(ln.split(":play ", 1)[1].strip() for ln in lines if ":play " in ln)
        with urllib.request.urlopen(play, timeout=10) as response:
            assert f":params {{ns: &#x27;{namespace}&#x27;" in response.read().decode()
        lineage = next(ln.split(None, 2)[2].strip() for ln in lines if ln.startswith("Lineage page:"))
        with urllib.request.urlopen(lineage, timeout=30) as response:
            assert f"namespace {namespace}" in response.read().decode()
        return lines
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)


def test_the_next_operator_of_a_family_is_tuned_by_a_model_trained_on_the_first(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    first = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e", "relu", "--steps", "3")
    assert first["proposer"] == "offline" and len(first["steps"]) == 3
    assert first["steps"][0]["title"] == "baseline: template pointwise"
    assert all(s["status"] == "correct" for s in first["steps"]), [
        (s["title"], s["status"], s["error_kind"]) for s in first["steps"]
    ]
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


def test_a_block_operator_is_served_by_the_composite_pipeline_template(kope_cli, neo4j_server, tmp_path):
    # tiny_cnn had no template before structure matching; a task no template computes is tested in
    # test_structure_cli (exit 12 with the ops that are not covered)
    summary = optimize(kope_cli, neo4j_server, tmp_path, "offline-e2e-pipeline", "tiny_cnn", "--steps", "1")
    assert summary["steps"][0]["title"] == "baseline: template pipeline"
    assert summary["steps"][0]["status"] == "correct"


def test_the_end_of_run_hints_open_this_runs_namespace_on_this_server(kope_cli, neo4j_server, tmp_path):
    env = neo4j_server.env(KOPE_NAMESPACE="hint-e2e", KOPE_DATA_DIR=str(tmp_path / "data"))
    proc = kope_cli(
        "optimize", "relu", "--proposer", "offline", "--cases", CASES, "--steps", "1", "--out", str(tmp_path / "out"),
        env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"connect to {neo4j_server.uri}" in proc.stdout
    hint_env, browser_args = parse_hint(proc.stdout, "Inspect the lineages in Neo4j Browser")
    assert hint_env == {"KOPE_NEO4J_URI": neo4j_server.uri}
    assert browser_args == ["browser", "--port", "7476", "--namespace", "hint-e2e"]
    report_env, report_args = parse_hint(proc.stdout, "or write it to a file:")
    assert report_env == hint_env and report_args == [
        "memory",
        "report",
        "-o",
        "lineage.html",
        "--namespace",
        "hint-e2e",
    ]

    # run as printed, from a shell that knows neither the namespace nor the server (only the password)
    bare = {k: v for k, v in env.items() if k not in ("KOPE_NAMESPACE", "KOPE_NEO4J_URI")}
    written = kope_cli(*report_args, env={**bare, **report_env}, check=True)
    assert "namespace hint-e2e" in written.stdout
    page = (tmp_path / "lineage.html").read_text()
    assert "namespace hint-e2e" in page and 'data-operator="relu"' in page
    lines = serve(browser_args[:2] + ["0"] + browser_args[3:], {**bare, **hint_env})
    assert any(":play http://127.0.0.1:" in ln for ln in lines) and "(namespace hint-e2e)" in "".join(lines)
