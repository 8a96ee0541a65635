"""Neo4j access: the Cypher catalog, the driver wrapper and the local server."""
