"""Apply ``cypher/schema.cypher`` idempotently (``kope memory init`` and first use), and migrate the
properties of graphs written by an older KOPE (``kope memory migrate``, also run by ``kope memory init``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kope.db.client import GraphClient
from kope.errors import QueryError

SCHEMA_SCRIPT = "schema"
# Each migration is one idempotent statement under cypher/memory/migrate/, run per namespace, returning
# ``changed`` (how many nodes it rewrote). A graph already in the current shape changes nothing.
MIGRATIONS: tuple[str, ...] = (
    "memory/migrate/outcome_speedup",  # issue 31: Outcome.speedup = measured, Outcome.speedup_usable = a
)


@dataclass(frozen=True)
class SchemaReport:
    constraints: tuple[str, ...]
    indexes: tuple[str, ...]
    created: bool  # False when everything already existed


def expected_names(client: GraphClient) -> set[str]:
    """The kope_* names the schema file declares."""
    names = set()
    for text in client.catalog.statements(SCHEMA_SCRIPT):
        match = re.match(r"CREATE\s+(?:FULLTEXT\s+)?(?:CONSTRAINT|INDEX)\s+(\w+)", text, re.IGNORECASE)
        if match:
            names.add(match.group(1))
    return names


def existing(client: GraphClient) -> tuple[tuple[str, ...], tuple[str, ...]]:
    rows = client.execute("memory/schema/objects")
    constraints = tuple(r["name"] for r in rows if r["kind"] == "constraint")
    indexes = tuple(r["name"] for r in rows if r["kind"] == "index")
    return constraints, indexes


def apply_schema(client: GraphClient) -> SchemaReport:
    """Create what is missing (every statement is IF NOT EXISTS) and wait for indexes to come online."""
    constraints, indexes = existing(client)
    if expected_names(client) <= set(constraints) | set(indexes):
        return SchemaReport(constraints, indexes, created=False)
    # Two processes creating the same schema at once: the loser of a statement sees an "equivalent
    # schema rule" error; what matters is that it exists now, and the rest of the script still runs.
    client.run_script(SCHEMA_SCRIPT, skip=lambda exc: "quivalent" in str(exc) or "already exists" in str(exc))
    constraints, indexes = existing(client)
    missing = expected_names(client) - set(constraints) - set(indexes)
    if missing:
        raise QueryError(f"the memory schema is incomplete after applying it: missing {', '.join(sorted(missing))}")
    return SchemaReport(constraints, indexes, created=True)


def migrate_namespace(client: GraphClient, ns: str) -> dict[str, int]:
    """Run every migration on one namespace; per migration, how many nodes it changed (0: already current)."""
    changed = {}
    for name in MIGRATIONS:
        rows = client.execute(name, ns=ns)
        changed[name.rsplit("/", 1)[-1]] = int(rows[0]["changed"]) if rows else 0
    return changed
