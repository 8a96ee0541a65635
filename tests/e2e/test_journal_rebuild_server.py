"""A server client's journal is the complete record too (#35 item 11): through a real `kope serve`, a
namespace rebuilt from the client's journal into an empty one holds the same nodes, relationships
(knowledge documents and attempt->insight USED edges included) and scores, and `kope memory sync`
finds and restores a relationship the graph lost."""

from __future__ import annotations

import json
import shutil

import pytest

from kope.memory.remote import RemoteMemory
from tests.support import journal_scenario
from tests.support.journal_scenario import cypher, snapshot, used_insight_edges
from tests.support.memory_server import client_env, memory_server

pytestmark = pytest.mark.slow


def test_a_server_clients_namespace_rebuilt_from_its_journal_through_the_server_is_identical(
    neo4j_server, graph_client, tmp_path
):
    server = memory_server(neo4j_server, tmp_path)
    try:
        with RemoteMemory(server.url, server.key("team-j"), journal_root=tmp_path / "client") as memory:
            assert memory.namespace == "team-j"
            journal_scenario.record(memory)
        before = snapshot(graph_client, "team-j")
        assert before["nodes"]["Knowledge"] == 1 and used_insight_edges(graph_client, "team-j") == 8
        assert (tmp_path / "client" / "team-j" / "wal" / "_knowledge.jsonl").exists()  # journaled by the client

        # Only the journal, into another team's empty namespace, through the server.
        shutil.copytree(tmp_path / "client" / "team-j", tmp_path / "rebuild" / "team-k")
        with RemoteMemory(server.url, server.key("team-k"), journal_root=tmp_path / "rebuild") as rebuilt:
            assert rebuilt.namespace == "team-k"
            report = rebuilt.sync()
            assert report.ok and report.replayed["knowledge"] == 1 and report.replayed["attempt"] == 16
            assert rebuilt.sync(dry_run=True).relationships == {}
        assert snapshot(graph_client, "team-k") == before
    finally:
        server.stop()


def test_kope_memory_sync_through_the_server_reports_and_restores_a_lost_relationship(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-s")
        with RemoteMemory(server.url, token, journal_root=tmp_path / "client" / "memory") as memory:
            journal_scenario.record(memory)
        before = snapshot(graph_client, "team-s")
        cypher(
            graph_client,
            "MATCH (:Decision {uid: $d})-[u:USED]->(:Insight) DELETE u",
            d="team-s/r2:s3",
        )  # both of the attempt's insight edges
        env = client_env(neo4j_server, server, token, tmp_path / "client")
        dry = kope_cli("memory", "sync", "--dry-run", "--json", env=env)
        assert dry.returncode == 0, dry.stderr
        assert json.loads(dry.stdout)["relationships"] == {"USED": 2}
        done = kope_cli("memory", "sync", env=env)
        assert done.returncode == 0, done.stderr
        assert "2 relationships missing (USED 2)" in done.stdout and "restored the relationships of 1" in done.stdout
        assert snapshot(graph_client, "team-s") == before
    finally:
        server.stop()
