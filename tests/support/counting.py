"""A real ``GraphClient`` that counts the statements it sends to Neo4j (one round trip each)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from kope.db.client import GraphClient, Tx

T = TypeVar("T")


class _CountingTx:
    """Wraps the transaction handle a unit of work receives; every ``run`` is one statement sent."""

    def __init__(self, tx: Tx, log: list[str]) -> None:
        self._tx = tx
        self._log = log

    def run(self, name: str, **params: Any) -> list[dict[str, Any]]:
        self._log.append(name)
        return self._tx.run(name, **params)

    def run_records(self, name: str, **params: Any) -> Any:
        self._log.append(name)
        return self._tx.run_records(name, **params)


class CountingClient(GraphClient):
    """The real client; ``statements`` lists the name of every statement sent, in order."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.statements: list[str] = []

    def execute(self, name: str, **params: Any) -> list[dict[str, Any]]:
        self.statements.append(name)
        return super().execute(name, **params)

    def write(self, work: Callable[[Tx], T]) -> T:
        return super().write(lambda tx: work(_CountingTx(tx, self.statements)))

    def read(self, work: Callable[[Tx], T]) -> T:
        return super().read(lambda tx: work(_CountingTx(tx, self.statements)))
