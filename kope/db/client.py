"""One narrow wrapper around the Neo4j driver.

``GraphClient.execute(name, **params)`` runs a named statement from the
catalog against the configured database, routes ``// mode: read`` statements
to readers, logs the statement name and parameter names at debug level (never
values: they may be large, and credentials must never reach logs), and turns
driver exceptions into typed :mod:`kope.errors`.

Multi-statement work uses :meth:`GraphClient.write` / :meth:`GraphClient.read`
with a function that receives a :class:`Tx`; the driver retries transient
failures of the whole function, so the function must be idempotent (MERGE).

An unreachable server is reported at once: the first statement a client runs
checks connectivity without the driver's retry loop (connection timeout
``CONNECT_TIMEOUT_S``), so ``no Neo4j server answers at ...`` comes within
seconds, not after ``max_transaction_retry_time`` of retries; the driver's own
log lines (retry warnings) are kept below ERROR so the one error line is all a
user sees. A server that was reached and then stops answering is given
``UNAVAILABLE_RETRY_S`` (the driver's retry time) before the error: a network
blip is ridden out, a stopped server is reported within seconds, and the memory
stores journal the write (nothing is lost; ``kope memory sync`` writes it
later) instead of holding each step for 15 s. Transient errors of a server
that answers (deadlocks between concurrent writers) are retried for
``RETRY_TIME_S`` around the driver's loop. A login refused because of too many
wrong passwords in a row says so (the account is locked for a while) instead of
blaming the password.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import neo4j
from neo4j import GraphDatabase, RoutingControl
from neo4j import exceptions as nx
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_random_exponential

from kope.db.catalog import CypherCatalog, default_catalog
from kope.errors import DatabaseAuthError, DatabaseUnavailableError, KopeError, QueryError

if TYPE_CHECKING:
    from kope.config import KopeConfig

log = logging.getLogger("kope.db")
T = TypeVar("T")
CONNECT_TIMEOUT_S = 3.0
RETRY_TIME_S = 15.0  # transient errors (deadlocks between concurrent writers) of a reachable server
UNAVAILABLE_RETRY_S = 3.0  # the driver's retry time: also how long a server that stopped answering is retried


def _transient_retries() -> Retrying:
    """Retry a transient error of a server that answers (a deadlock between concurrent writers: the server aborts
    one of them) for ``RETRY_TIME_S``; the driver's own loop gives up after ``UNAVAILABLE_RETRY_S``, so an
    unreachable server is not retried here."""
    return Retrying(
        stop=stop_after_delay(RETRY_TIME_S),
        wait=wait_random_exponential(multiplier=0.2, max=3),
        retry=retry_if_exception(lambda e: isinstance(e, nx.TransientError) and e.is_retryable()),
        reraise=True,
    )


@dataclass
class TransactionStats:
    """What one unit of work (a memory server request) spent on Neo4j, counted while :func:`transaction_stats`
    is active in its context: units of work run (each retried as a whole), transient errors retried, seconds."""

    transactions: int = 0
    retries: int = 0
    seconds: float = 0.0


_stats: ContextVar[TransactionStats | None] = ContextVar("kope_db_transaction_stats", default=None)


@contextmanager
def transaction_stats() -> Iterator[TransactionStats]:
    """Count the statements and transactions this context (and the threads it hands work to) runs."""
    stats = TransactionStats()
    token = _stats.set(stats)
    try:
        yield stats
    finally:
        _stats.reset(token)


def _retried(work: Callable[[], T]) -> T:
    """``work`` retried on transient errors (see :func:`_transient_retries`), counted in the active stats."""
    stats = _stats.get()
    began = time.perf_counter()
    tries = 0
    try:
        for attempt in _transient_retries():
            with attempt:
                tries += 1
                result = work()
        return result
    finally:
        if stats is not None:
            stats.transactions += 1
            stats.retries += max(0, tries - 1)
            stats.seconds += time.perf_counter() - began


def _quiet_driver_logs() -> None:
    """The driver logs retries and connection failures as warnings; KOPE reports one typed error instead."""
    driver_log = logging.getLogger("neo4j")
    if driver_log.level == logging.NOTSET:
        driver_log.setLevel(logging.ERROR)


def _locked_out(uri: str, user: str, password_hint: str | None) -> DatabaseAuthError:
    return DatabaseAuthError(
        f"Neo4j at {uri} refuses logins for user {user!r} for now: too many wrong passwords in a row locked the "
        "account for a while (even the right password is refused until then)",
        hint="wait a few seconds (the server's dbms.security.auth_lock_time, 5 s by default), then retry with "
        + (password_hint or "the right password (KOPE_NEO4J_PASSWORD)"),
    )


@contextmanager
def translate_errors(uri: str, user: str, *, password_hint: str | None = None) -> Iterator[None]:
    """Map driver exceptions to KOPE's typed errors with one clear line."""
    try:
        yield
    except KopeError:
        raise
    except nx.AuthError as exc:
        if (exc.code or "").endswith("AuthenticationRateLimit"):
            raise _locked_out(uri, user, password_hint) from exc
        raise DatabaseAuthError(
            f"Neo4j at {uri} rejected the credentials for user {user!r}",
            hint=password_hint or "set KOPE_NEO4J_PASSWORD to the server's password",
        ) from exc
    except nx.ClientError as exc:
        code = exc.code or ""
        if code.endswith("AuthenticationRateLimit"):
            raise _locked_out(uri, user, password_hint) from exc
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
        connection_timeout: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.uri = uri
        self.user = user
        self.database = database
        self.catalog = catalog or default_catalog()
        self._password_hint = password_hint
        self._reached = False  # set once the server answered: from then on the driver's retries apply
        _quiet_driver_logs()
        self._driver = GraphDatabase.driver(
            uri,
            auth=(user, password or ""),
            connection_timeout=connection_timeout,
            max_transaction_retry_time=UNAVAILABLE_RETRY_S,
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
        self._reached = True

    def _reach(self) -> None:
        """Before the first statement: one connectivity check, no retry loop (an unreachable server fails fast)."""
        if not self._reached:
            with self._errors():
                self._driver.verify_connectivity()
            self._reached = True

    # -- statements -------------------------------------------------------------------
    def execute(self, name: str, **params: Any) -> list[dict[str, Any]]:
        """Run one named statement in its own transaction; rows as dicts."""
        statement = self.catalog.get(name)
        routing = RoutingControl.READ if statement.mode == "read" else RoutingControl.WRITE
        log.debug("cypher %s params=%s", name, sorted(params))
        self._reach()
        with self._errors():
            records, _summary, _keys = _retried(
                lambda: self._driver.execute_query(statement.text, params, routing_=routing, database_=self.database)
            )
        return [record.data() for record in records]

    def write(self, work: Callable[[Tx], T]) -> T:
        """Run ``work`` in one write transaction (retried as a whole on transient errors)."""
        self._reach()
        with self._errors(), self._driver.session(database=self.database) as session:
            return _retried(lambda: session.execute_write(lambda tx: work(Tx(tx, self.catalog))))

    def read(self, work: Callable[[Tx], T]) -> T:
        self._reach()
        with self._errors(), self._driver.session(database=self.database) as session:
            return _retried(lambda: session.execute_read(lambda tx: work(Tx(tx, self.catalog))))

    def run_script(self, name: str, skip: Callable[[Exception], bool] | None = None) -> int:
        """Run every statement of a multi-statement catalog file (e.g. the schema), each in its own
        auto-commit transaction, retried on transient errors: a schema statement and another process's
        writes can deadlock on the label's lock, and the server then aborts one of them (the driver's own
        retries only cover managed transactions; ``CALL db.awaitIndexes`` cannot run in one). A statement
        whose error ``skip`` accepts is passed over and the next one runs."""
        count = 0
        self._reach()
        retrying = _transient_retries()
        with self._errors(), self._driver.session(database=self.database) as session:
            for text in self.catalog.statements(name):
                try:
                    for attempt in retrying:
                        with attempt:
                            session.run(text).consume()
                except nx.Neo4jError as exc:
                    if skip is None or not skip(exc):
                        raise
                count += 1
        return count

    def server_info(self) -> dict[str, Any]:
        rows = self.execute("db/components")
        return rows[0] if rows else {}

    def counts(self) -> dict[str, int]:
        rows = self.execute("db/counts")
        return {"nodes": int(rows[0]["nodes"]), "relationships": int(rows[0]["relationships"])}
