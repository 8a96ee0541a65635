"""The driver wrapper against a real Neo4j server."""

import pytest

from kope.db.catalog import CypherCatalog
from kope.db.client import GraphClient
from kope.errors import DatabaseAuthError, DatabaseUnavailableError, QueryError


def test_server_is_neo4j_5_26(graph_client):
    info = graph_client.server_info()
    assert info["version"].startswith("5.26")


def client_with(neo4j_server, folder):
    return GraphClient(neo4j_server.uri, neo4j_server.user, neo4j_server.password, catalog=CypherCatalog(folder))


def test_nodes_written_in_a_transaction_can_be_read_back(graph_client, neo4j_server, tmp_path):
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "put.cypher").write_text(
        "UNWIND $names AS name MERGE (p:Probe {name: name}) RETURN count(p) AS n"
    )
    (tmp_path / "t" / "get.cypher").write_text("// mode: read\nMATCH (p:Probe) RETURN p.name AS name ORDER BY name")
    client = client_with(neo4j_server, tmp_path)
    assert client.write(lambda tx: tx.run("t/put", names=["b", "a", "b"]))[0]["n"] == 3
    assert [r["name"] for r in client.execute("t/get")] == ["a", "b"]
    assert graph_client.counts() == {"nodes": 2, "relationships": 0}
    client.close()


def test_wrong_password_is_a_typed_error(neo4j_server):
    client = GraphClient(neo4j_server.uri, neo4j_server.user, "definitely-wrong")
    with pytest.raises(DatabaseAuthError, match="rejected the credentials"):
        client.verify()
    client.close()


def test_unreachable_server_is_a_typed_error():
    from kope.db.ports import free_port

    client = GraphClient(f"bolt://127.0.0.1:{free_port()}", "neo4j", "x", connection_timeout=2)
    with pytest.raises(DatabaseUnavailableError, match="no Neo4j server answers"):
        client.verify()
    client.close()


def test_bad_statement_is_a_query_error(neo4j_server, tmp_path):
    (tmp_path / "bad.cypher").write_text("MATCH (n RETURN n")
    with client_with(neo4j_server, tmp_path) as client, pytest.raises(QueryError, match="rejected the statement"):
        client.execute("bad")
