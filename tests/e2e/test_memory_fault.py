"""Neo4j stopped in the middle of a sequence of attempts, then restarted: after
`kope memory sync` every attempt is in the graph exactly once.

This module runs its own Maven-provisioned server (temporary data dir, free
ports) so it can stop and restart it without touching the session server.
"""

from __future__ import annotations

import os
import sys

import pytest

from kope.config import load_config
from kope.db.client import GraphClient
from kope.db.local import LocalNeo4j
from kope.db.ports import free_port
from kope.memory import ExperienceGraph, synthetic

pytestmark = pytest.mark.slow
OP = "softmax"


@pytest.fixture(scope="module")
def own_server(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("fault-server")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J_")}
    config = load_config(
        {"data_dir": str(data_dir), "server.bolt_port": free_port(), "server.http_port": free_port()}, environ=environ
    )
    server = LocalNeo4j(config, progress=lambda m: print(f"[fault-neo4j] {m}", file=sys.stderr))
    server.start()
    try:
        yield server, config, environ
    finally:
        server.stop()


def cli_env(config, environ):
    return dict(
        environ,
        KOPE_DATA_DIR=str(config.data_dir),
        KOPE_NEO4J_BOLT_PORT=str(config.server.bolt_port),
        KOPE_NEO4J_HTTP_PORT=str(config.server.http_port),
        COLUMNS="200",
        NO_COLOR="1",
    )


def test_server_stopped_mid_sequence_then_sync_writes_every_attempt_exactly_once(own_server, kope_cli):
    server, config, environ = own_server
    graph = ExperienceGraph.from_config(config, namespace="fault")
    client = graph.client
    attempts = [
        synthetic.attempt("run-f", i, OP, parent=None if i == 0 else f"run-f:s{i - 1}", speedup=1.0 + i / 10)
        for i in range(8)
    ]
    graph.start_run(synthetic.run_spec(OP, run_id="run-f"))
    before = [graph.record_attempt(a) for a in attempts[:3]]
    assert all(r.in_graph for r in before)

    server.stop()
    during = [graph.record_attempt(a) for a in attempts[3:6]]
    assert not any(r.in_graph for r in during)
    assert all("no Neo4j server answers" in r.pending_reason and "kope memory sync" in r.pending_reason for r in during)
    assert graph.finish_run("run-f") is None  # journaled, not yet in the graph

    server.start()
    sync = kope_cli("memory", "sync", "--namespace", "fault", env=cli_env(config, environ), check=True)
    assert "3 missing" not in sync.stdout and "replayed 0 runs, 3 attempts, 1 run ends" in sync.stdout, sync.stdout

    rows = client._driver.execute_query(
        "MATCH (d:Decision {ns: 'fault'}) RETURN d.id AS id, count(*) AS n ORDER BY id"
    ).records
    assert [(r["id"], r["n"]) for r in rows] == [(f"run-f:s{i}", 1) for i in range(6)]
    shape = client._driver.execute_query(
        "MATCH (d:Decision {ns: 'fault'}) RETURN sum(COUNT { (d)-[:FROM]->() }) AS from_edges, "
        "sum(COUNT { (d)-[:NEXT]->() }) AS next_edges, sum(COUNT { (d)-[:PRODUCED]->() }) AS outcomes"
    ).records[0]
    assert dict(shape) == {"from_edges": 5, "next_edges": 5, "outcomes": 6}
    assert graph.run("run-f").status == "finished"

    again = kope_cli("memory", "sync", "--namespace", "fault", env=cli_env(config, environ), check=True)
    assert "0 missing" in again.stdout
    # The recording process carries on: what it held back is already there, nothing doubles.
    after = [graph.record_attempt(a) for a in attempts[6:]]
    assert all(r.in_graph and r.created for r in after)
    count = client._driver.execute_query("MATCH (d:Decision {ns: 'fault'}) RETURN count(d) AS n").records[0]["n"]
    assert count == 8 and graph.run_state("run-f").incumbent.id == "run-f:s7"
    graph.close()


def test_the_running_server_allows_browser_guides_from_127_0_0_1(own_server):
    _server, config, _environ = own_server
    with GraphClient.from_config(config) as client:
        rows = client._driver.execute_query(
            "CALL dbms.clientConfig() YIELD name, value "
            "WHERE name = 'browser.remote_content_hostname_whitelist' RETURN value"
        ).records
    assert "127.0.0.1" in rows[0]["value"].split(",")
