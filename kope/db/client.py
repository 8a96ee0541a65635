"""One narrow wrapper around the Neo4j driver.

``GraphClient.execute(name, **params)`` runs a named statement from the
catalog against the configured database, routes ``// mode: read`` statements
to readers, logs the statement name and parameter names at debug level (never
values: they may be large, and credentials must never reach logs), and turns
driver exceptions into typed :mod:`kope.errors`.

Multi-statement work uses :meth:`GraphClient.write` / :meth:`GraphClient.read`
with a function that receives a :class:`Tx`; the driver retries transient
failures of the whole function, so the function must be idempotent (MERGE).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import neo4j
from neo4j import GraphDatabase, RoutingControl
from neo4j import exceptions as nx

from kope.db.catalog import CypherCatalog, default_catalog
from kope.errors import DatabaseAuthError, DatabaseUnavailableError, KopeError, QueryError

if TYPE_CHECKING:
    from kope.config import KopeConfig

log = logging.getLogger("kope.db")
T = TypeVar("T")


@contextmanager
def translate_errors(uri: str, user: str, *, password_hint: str | None = None) -> Iterator[None]:
    """Map driver exceptions to KOPE's typed errors with one clear line."""
    try:
        yield
    except KopeError:
        raise
    except nx.AuthError as exc:
        raise DatabaseAuthError(
            f"Neo4j at {uri} rejected the credentials for user {user!r}",
            hint=password_hint or "set KOPE_NEO4J_PASSWORD to the server's password",
        ) from exc
    except nx.ClientError as exc:
        code = exc.code or ""
        if code.endswith("CredentialsExpired"):
            raise DatabaseAuthError(
                f"Neo4j at {uri}: the password of user {user!r} must be changed before use",
                hint="log in once with Neo4j Browser or cypher-shell and set a new password",
            ) from exc
        raise QueryError(f"Neo4j rejected the statement: {exc.message or exc}") from exc
    except (nx.ServiceUnavailable, nx.SessionExpired) as exc:
        raise DatabaseUnavailableError(
            f"no Neo4j server answers at {uri}",
            hint="start the local one with `kope db start`, or set KOPE_NEO4J_URI",
        ) from exc
    except nx.DriverError as exc:
        raise DatabaseUnavailableError(f"Neo4j driver error for {uri}: {exc}") from exc
    except nx.Neo4jError as exc:
        raise QueryError(f"Neo4j error: {exc.message or exc}") from exc


class Tx:
    """A transaction handle that only runs catalog statements by name."""

    def __init__(self, tx: neo4j.ManagedTransaction, catalog: CypherCatalog) -> None:
        self._tx = tx
        self._catalog = catalog

    def run(self, name: str, **params: Any) -> list[dict[str, Any]]:
        statement = self._catalog.get(name)
        log.debug("cypher %s params=%s", name, sorted(params))
        result = self._tx.run(statement.text, params)
        return [record.data() for record in result]

    def run_records(self, name: str, **params: Any) -> list[neo4j.Record]:
        statement = self._catalog.get(name)
        log.debug("cypher %s params=%s", name, sorted(params))
        return list(self._tx.run(statement.text, params))


class GraphClient:
    """A driver for one database; create one per process and ``close()`` it."""

    def __init__(
        self,
        uri: str,
        user: str,
        password: str | None,
        database: str = "neo4j",
        *,
        catalog: CypherCatalog | None = None,
        password_hint: str | None = None,
        connection_timeout: float = 10.0,
    ) -> None:
        self.uri = uri
        self.user = user
        self.database = database
        self.catalog = catalog or default_catalog()
        self._password_hint = password_hint
        self._driver = GraphDatabase.driver(
            uri,
            auth=(user, password or ""),
            connection_timeout=connection_timeout,
            max_transaction_retry_time=15.0,
            user_agent="kope",
            # KOPE's statements read optional properties on purpose; the server's
            # "property does not exist" notices would only be noise in logs and CLI output.
            notifications_min_severity="OFF",
        )

    @classmethod
    def from_config(cls, config: KopeConfig, **kwargs: Any) -> GraphClient:
        hint = None
        if config.uses_local_server and not config.neo4j.password:
            hint = (
                f"the local server's password is stored in {config.password_file}; set KOPE_NEO4J_PASSWORD to override"
            )
        return cls(
            config.neo4j_uri,
            config.neo4j.user,
            config.neo4j_password(),
            config.neo4j.database,
            password_hint=hint,
            **kwargs,
        )

    # -- lifecycle --------------------------------------------------------------------
    def close(self) -> None:
        self._driver.close()

    def __enter__(self) -> GraphClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _errors(self) -> AbstractContextManager[None]:
        return translate_errors(self.uri, self.user, password_hint=self._password_hint)

    def verify(self) -> None:
        """Fail with a typed error unless the server answers and accepts us."""
        with self._errors():
            self._driver.verify_connectivity()
            self._driver.execute_query("RETURN 1", database_=self.database)

    # -- statements -------------------------------------------------------------------
    def execute(self, name: str, **params: Any) -> list[dict[str, Any]]:
        """Run one named statement in its own transaction; rows as dicts."""
        statement = self.catalog.get(name)
        routing = RoutingControl.READ if statement.mode == "read" else RoutingControl.WRITE
        log.debug("cypher %s params=%s", name, sorted(params))
        with self._errors():
            records, _summary, _keys = self._driver.execute_query(
                statement.text, params, routing_=routing, database_=self.database
            )
        return [record.data() for record in records]

    def write(self, work: Callable[[Tx], T]) -> T:
        """Run ``work`` in one write transaction (retried as a whole on transient errors)."""
        with self._errors(), self._driver.session(database=self.database) as session:
            return session.execute_write(lambda tx: work(Tx(tx, self.catalog)))

    def read(self, work: Callable[[Tx], T]) -> T:
        with self._errors(), self._driver.session(database=self.database) as session:
            return session.execute_read(lambda tx: work(Tx(tx, self.catalog)))

    def run_script(self, name: str) -> int:
        """Run every statement of a multi-statement catalog file (e.g. the schema)."""
        count = 0
        with self._errors(), self._driver.session(database=self.database) as session:
            for text in self.catalog.statements(name):
                session.run(text).consume()
                count += 1
        return count

    def server_info(self) -> dict[str, Any]:
        rows = self.execute("db/components")
        return rows[0] if rows else {}

    def counts(self) -> dict[str, int]:
        rows = self.execute("db/counts")
        return {"nodes": int(rows[0]["nodes"]), "relationships": int(rows[0]["relationships"])}
