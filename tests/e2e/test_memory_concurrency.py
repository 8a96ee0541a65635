"""Several processes recording at once, and a recording process killed at any moment."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kope.memory import ExperienceGraph, Journal, synthetic
from kope.memory.scoring import recompute_all

pytestmark = pytest.mark.slow
WORKER = Path(__file__).with_name("memory_worker.py")


def spawn(neo4j_server, tmp_path, worker, attempts, seeds):
    settings = {
        "uri": neo4j_server.uri,
        "user": neo4j_server.user,
        "password": neo4j_server.password,
        "ns": "conc",
        "journal": str(tmp_path / "journal"),
        "go": str(tmp_path / "go"),
        "worker": worker,
        "attempts": attempts,
        "seeds": seeds,
    }
    return subprocess.Popen(
        [sys.executable, str(WORKER), json.dumps(settings)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def seed(graph_client, tmp_path):
    graph = ExperienceGraph(graph_client, namespace="conc", journal=Journal(tmp_path / "journal", "conc"))
    graph.start_run(synthetic.run_spec("softmax", run_id="seed"))
    graph.record_attempts(
        [synthetic.attempt("seed", 0, "softmax", speedup=1.0)]
        + [synthetic.attempt("seed", i, "softmax", parent="seed:s0", speedup=1.0 + i / 10) for i in (1, 2, 3)]
    )
    return graph, ["seed:s0", "seed:s1", "seed:s2", "seed:s3"]


def query(client, text):
    return [dict(r) for r in client._driver.execute_query(text).records]


def test_four_processes_recording_one_task_at_once_lose_and_duplicate_nothing(graph_client, neo4j_server, tmp_path):
    graph, seeds = seed(graph_client, tmp_path)
    per_worker = 12
    procs = [spawn(neo4j_server, tmp_path, w, per_worker, seeds) for w in range(4)]
    time.sleep(2.0)  # let the four interpreters start, then release them together
    (tmp_path / "go").touch()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    expected = 4 + 4 * per_worker
    decisions = query(
        graph_client, "MATCH (d:Decision {ns: 'conc'}) RETURN d.id AS id, d.r AS r, d.parent_id AS parent, d.d AS d"
    )
    assert len(decisions) == len({d["id"] for d in decisions}) == expected
    shared = query(
        graph_client,
        "MATCH (n) WHERE n.ns = 'conc' AND (n:Operator OR n:Task OR n:Hardware) RETURN labels(n)[0] AS l, count(*) AS n",
    )
    assert sorted((r["l"], r["n"]) for r in shared) == [("Hardware", 1), ("Operator", 1), ("Task", 1)]
    edges = query(
        graph_client,
        """
        MATCH (d:Decision {ns: 'conc'})
        RETURN sum(COUNT { (d)-[:FROM]->() }) AS from_edges, sum(COUNT { (d)-[:PRODUCED]->() }) AS produced,
               sum(COUNT { (d)-[:IN_RUN]->() }) AS in_run, sum(COUNT { (d)-[:NEXT]->() }) AS next,
               sum(COUNT { (d)-[:USED]->() }) AS used""",
    )[0]
    assert edges == {
        "from_edges": expected - 1,
        "produced": expected,
        "in_run": expected,
        "next": 3 + 4 * (per_worker - 1),
        "used": 4 * per_worker,
    }
    reference = recompute_all({d["id"]: (d["r"], d["parent"]) for d in decisions})
    for d in decisions:
        assert d["d"] == pytest.approx(reference[d["id"]], rel=1e-9, abs=1e-12), d["id"]
    scan = Journal(tmp_path / "journal", "conc").scan()
    assert scan.problems == [] and len([e for e in scan.entries if e.kind == "attempt"]) == expected


def test_a_recording_process_killed_at_any_moment_loses_and_duplicates_nothing(graph_client, neo4j_server, tmp_path):
    graph, seeds = seed(graph_client, tmp_path)
    (tmp_path / "go").touch()
    proc = spawn(neo4j_server, tmp_path, 7, None, seeds)
    acknowledged = []
    deadline = time.monotonic() + 120
    while len(acknowledged) < 15 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line:
            acknowledged.append(json.loads(line)["acknowledged"])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert len(acknowledged) == 15
    in_graph = {d["id"] for d in query(graph_client, "MATCH (d:Decision {ns: 'conc', run_id: 'w7'}) RETURN d.id AS id")}
    assert set(acknowledged) <= in_graph  # what the caller was told is in the graph
    report = graph.sync()
    journaled = {
        e.key
        for e in Journal(tmp_path / "journal", "conc").scan().entries
        if e.kind == "attempt" and e.key.startswith("w7:")
    }
    rows = query(graph_client, "MATCH (d:Decision {ns: 'conc', run_id: 'w7'}) RETURN d.id AS id")
    assert sorted(r["id"] for r in rows) == sorted(journaled)  # every journaled attempt, exactly once
    assert report.ok and graph.sync().pending == 0
