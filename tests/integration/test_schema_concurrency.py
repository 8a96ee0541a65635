"""The memory schema applied by several processes at once on an empty database (a bench's first pairs)."""

import re
import threading

from kope.db.client import GraphClient
from kope.memory.schema import apply_schema, existing, expected_names


def drop_kope_schema(client) -> None:
    driver = client._driver
    for kind, plural in (("CONSTRAINT", "CONSTRAINTS"), ("INDEX", "INDEXES")):
        records, _, _ = driver.execute_query(f"SHOW {plural} YIELD name RETURN name", database_=client.database)
        for record in records:
            name = record["name"]
            if re.fullmatch(r"kope_\w+", name):  # names from the server, checked: DROP takes no parameters
                driver.execute_query(f"DROP {kind} {name} IF EXISTS", database_=client.database)


def test_processes_applying_the_schema_at_once_all_end_with_the_whole_schema(graph_client, neo4j_server):
    drop_kope_schema(graph_client)
    assert expected_names(graph_client) - set(sum(existing(graph_client), ())) == expected_names(graph_client)
    clients = [GraphClient(neo4j_server.uri, neo4j_server.user, neo4j_server.password) for _ in range(4)]
    start = threading.Barrier(len(clients))
    errors: list[BaseException] = []

    def apply(client):
        start.wait()
        try:
            apply_schema(client)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=apply, args=(c,)) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for c in clients:
        c.close()
    assert errors == []
    constraints, indexes = existing(graph_client)
    assert expected_names(graph_client) <= set(constraints) | set(indexes)
