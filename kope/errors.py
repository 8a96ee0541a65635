"""KOPE's error hierarchy.

Every error a user can cause or meet in normal operation is a ``KopeError``
subclass with a one-line, actionable message. The CLI prints ``str(error)``
and exits with ``error.exit_code``; anything that is not a ``KopeError`` is a
bug and keeps its traceback.
"""

from __future__ import annotations


class KopeError(Exception):
    """Base class for expected errors: clear message, non-zero exit, no traceback."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(KopeError):
    """Invalid or missing configuration (kope.toml, KOPE_* variables, options)."""

    exit_code = 2


class UsageError(KopeError):
    """A bad argument or input that the CLI could not catch by itself."""

    exit_code = 2


class ToolMissingError(KopeError):
    """A program KOPE needs (Java, Maven, Docker engine, compiler) is absent or too old."""

    exit_code = 3


class ProvisionError(KopeError):
    """Neo4j artifacts could not be fetched or laid out."""

    exit_code = 4


class PortInUseError(KopeError):
    """A port the local Neo4j server needs is taken by another process."""

    exit_code = 5


class ServerStartError(KopeError):
    """The local Neo4j server did not come up."""

    exit_code = 6


class DatabaseUnavailableError(KopeError):
    """No Neo4j server answers at the configured URI."""

    exit_code = 7


class DatabaseAuthError(KopeError):
    """The Neo4j server rejected the configured credentials."""

    exit_code = 8


class QueryError(KopeError):
    """A Cypher statement failed (bad parameters, constraint violation, ...)."""

    exit_code = 9


class CatalogError(KopeError):
    """A named Cypher statement does not exist in cypher/."""

    exit_code = 9


class InfrastructureError(KopeError):
    """An evaluation could not be done because of the evaluation infrastructure (workers unreachable, killed or
    quarantined, a cluster fault), after retrying elsewhere: never the candidate's failure, never recorded as one.
    ``kind`` is one of ``harness.vocabulary.INFRASTRUCTURE_KINDS``."""

    exit_code = 13

    def __init__(self, message: str, *, kind: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind


class EvaluatorAuthError(ConfigError):
    """A worker rejected the key (HTTP 401): KOPE_WORKER_KEY is missing or not the worker's key."""


class NothingAttemptedError(KopeError):
    """A run or bench ended without a single attempt for any selected operator (no template, no candidate)."""

    exit_code = 12
