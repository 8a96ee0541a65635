"""Helpers shared by tests that talk to the real Neo4j server."""


def clear_graph(client) -> None:
    """Delete every node and relationship in batches (schema objects are kept)."""
    while client.execute("db/clear_batch", limit=10_000)[0]["deleted"]:
        pass
