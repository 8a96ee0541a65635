"""kope commands as clients of the memory server: `kope optimize` and `kope bench` through a real
`kope serve` process leave the graph direct Bolt leaves; the server SIGKILLed mid-run loses nothing.

The clients get no Neo4j settings at all (a closed port and a wrong password), only
KOPE_MEMORY_URL and KOPE_MEMORY_TOKEN. "The same graph as direct Bolt" is checked on the same
attempts: measured speedups differ from one evaluation to the next, so a second live run could
not give equal d(v) values; instead the client's journal (every run start, attempt and run end,
exactly as the loop produced them) is written direct to Bolt by `kope memory sync` into another
namespace, and both namespaces must hold the same nodes, relationships and scores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from kope.memory import Journal
from tests.support.memory_server import KOPE, client_env, memory_server

pytestmark = pytest.mark.slow


def cypher(graph_client, query, **params):
    records, _, _ = graph_client._driver.execute_query(query, params, database_=graph_client.database)
    return [r.data() for r in records]


def snapshot(graph_client, ns):
    """What a namespace holds, without the server's provenance stamps: counts, scores, runs, insights."""
    return {
        "nodes": {
            r["label"]: r["n"]
            for r in cypher(graph_client, "MATCH (n {ns: $ns}) RETURN labels(n)[0] AS label, count(*) AS n", ns=ns)
        },
        "relationships": {
            r["type"]: r["n"]
            for r in cypher(
                graph_client,
                "MATCH (a {ns: $ns})-[r]->(b {ns: $ns}) RETURN type(r) AS type, count(*) AS n",
                ns=ns,
            )
        },
        "decisions": {
            r["id"]: r["facts"]
            for r in cypher(
                graph_client,
                "MATCH (d:Decision {ns: $ns}) RETURN d.id AS id, "
                "[d.parent_id, d.status, d.a, d.r, d.label, d.d, d.conf, d.code_hash] AS facts",
                ns=ns,
            )
        },
        "runs": {
            r["id"]: r["facts"]
            for r in cypher(
                graph_client,
                "MATCH (run:Run {ns: $ns}) OPTIONAL MATCH (run)-[:INCUMBENT]->(i) "
                "RETURN run.id AS id, [run.status, run.steps, run.ended_at, i.id] AS facts",
                ns=ns,
            )
        },
        "insights": {
            r["id"]: r["facts"]
            for r in cypher(
                graph_client,
                "MATCH (i:Insight {ns: $ns}) RETURN i.id AS id, [i.support, i.confidence, i.text] AS facts",
                ns=ns,
            )
        },
    }


def replay_direct(kope_cli, neo4j_server, graph_client, client_data, source_ns, target_ns, tmp_path):
    """The client's journal of ``source_ns``, written direct to Bolt into ``target_ns``."""
    direct = tmp_path / f"direct-{target_ns}"
    shutil.copytree(client_data / "memory" / source_ns, direct / "memory" / target_ns)
    # The journal alone: the client journaled the knowledge documents its prompts cite (#35 item 11).
    proc = kope_cli("memory", "sync", "--namespace", target_ns, env=neo4j_server.env(KOPE_DATA_DIR=str(direct)))
    assert proc.returncode == 0, proc.stderr


def test_kope_optimize_through_the_server_leaves_the_graph_direct_bolt_leaves(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-opt", "read,write")
        data = tmp_path / "client"
        env = client_env(neo4j_server, server, token, data)
        args = ("optimize", "relu", "--proposer", "offline", "--cases", "0", "--steps", "3", "--json")
        proc = kope_cli(*args, "--out", str(tmp_path / "out"), env=env, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summary = json.loads(proc.stdout)[0]
        assert [s["in_graph"] for s in summary["steps"]] == [True, True, True]
        stats = json.loads(kope_cli("memory", "stats", "--json", env=env, check=True).stdout)
        assert stats["namespace"] == "team-opt" and stats["nodes"]["Decision"] == 3
        assert [t["team"] for t in stats["teams"]] == ["team-opt"]
    finally:
        server.stop()
    replay_direct(kope_cli, neo4j_server, graph_client, data, "team-opt", "direct-opt", tmp_path)
    through_server, direct = snapshot(graph_client, "team-opt"), snapshot(graph_client, "direct-opt")
    assert through_server["nodes"]["Decision"] == 3 and through_server["relationships"]["USED"] > 0
    assert through_server == direct


def test_a_small_kope_bench_through_the_server_leaves_the_graph_direct_bolt_leaves(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-bench", "read,write,admin")  # a bench wipes (prunes) its namespaces first
        server.registry.create_namespace(
            "bench-srv-active", "team-bench"
        )  # names outside a team's prefix: the operator's
        data = tmp_path / "client"
        env = client_env(neo4j_server, server, token, data)
        proc = kope_cli(
            "bench", "--suite", "builtin", "--family", "elementwise", "--limit", "1", "--proposer", "offline",
            "--steps", "2", "--cases", "0", "--configs", "active", "--out", str(tmp_path / "srv"), "--json",
            env=env, timeout=1200,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        results = json.loads((tmp_path / "srv" / "results.json").read_text())
        ns = results["configurations"][0]["namespace"]
        assert results["complete"] and server.registry.namespace(ns).owner == "team-bench"
    finally:
        server.stop()
    replay_direct(kope_cli, neo4j_server, graph_client, data, ns, "direct-bench", tmp_path)
    through_server, direct = snapshot(graph_client, ns), snapshot(graph_client, "direct-bench")
    assert through_server["nodes"]["Decision"] == 2
    assert through_server == direct


def test_the_server_killed_mid_run_loses_nothing_after_restart_and_sync(kope_cli, neo4j_server, graph_client, tmp_path):
    server = memory_server(neo4j_server, tmp_path)
    token = server.key("team-kill", "read,write")
    data = tmp_path / "client"
    env = client_env(neo4j_server, server, token, data)
    run = subprocess.Popen(
        [str(KOPE), "optimize", "relu", "--proposer", "offline", "--cases", "0", "--steps", "3",
         "--out", str(tmp_path / "out")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        # step 1's candidate is written just before the harness evaluates it (seconds): kill the server then
        while not list((tmp_path / "out" / "relu").glob("*/candidates/step-001.py")):
            assert run.poll() is None and time.monotonic() < deadline, "step 1 was never evaluated"
            time.sleep(0.1)
        assert len(cypher(graph_client, "MATCH (d:Decision {ns: 'team-kill'}) RETURN d.id AS id")) == 1
        server.kill()  # SIGKILL while step 1 is being evaluated
        _out, err = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            os.kill(run.pid, signal.SIGKILL)
        server.stop()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert run.returncode == 7 and len(errors) == 1 and "Traceback" not in err, err[-3000:]
    assert "no KOPE memory server answers" in errors[0] and "--resume" in err

    journal = Journal(data / "memory", "team-kill").scan()
    attempts = sorted(e.key for e in journal.entries if e.kind == "attempt")
    run_id = attempts[0].split(":")[0]
    assert len(attempts) == 2  # step 0 in the graph, step 1 only in the journal
    assert len(cypher(graph_client, "MATCH (d:Decision {ns: 'team-kill'}) RETURN d.id AS id")) == 1

    server.start()  # same port, same registry
    try:
        sync = kope_cli("memory", "sync", env=env, check=True)
        assert "replayed 0 runs, 1 attempts, 1 run ends" in sync.stdout, sync.stdout
        again = kope_cli("memory", "sync", env=env, check=True)
        assert "0 missing" in again.stdout
        stored = cypher(
            graph_client,
            "MATCH (d:Decision {ns: 'team-kill'}) RETURN d.id AS id, count(*) AS n, "
            "COUNT { (d)-[:PRODUCED]->() } AS outcomes ORDER BY id",
        )
        assert [(r["id"], r["n"], r["outcomes"]) for r in stored] == [(a, 1, 1) for a in attempts]
        status = cypher(graph_client, "MATCH (r:Run {ns: 'team-kill'}) RETURN r.status AS s, r.steps AS n")
        assert status == [{"s": "interrupted", "n": 2}]
        # the run is resumable from the server alone
        resumed = kope_cli(
            "optimize", "--resume", run_id, "--proposer", "offline", "--cases", "0", "--steps", "3",
            "--out", str(tmp_path / "out"), "--json", env=env, timeout=900,
        )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        assert json.loads(resumed.stdout)[0]["resumed_at"] == 2
        ids = [r["id"] for r in cypher(graph_client, "MATCH (d:Decision {ns: 'team-kill'}) RETURN d.id AS id")]
        assert sorted(ids) == [f"{run_id}:s{i}" for i in range(3)]
    finally:
        server.stop()
