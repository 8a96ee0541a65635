"""Errors of the memory server, each with its HTTP status and a short code for clients.

Every error response of ``kope serve`` is ``{"error": "<one line>", "code": "<code>"}``
(plus ``"hint"`` when there is one); ``RemoteMemory`` maps the code back to the
same ``KopeError`` subclass the direct (Bolt) memory raises.
"""

from __future__ import annotations

from kope.errors import DatabaseUnavailableError, KopeError, QueryError, UsageError
from kope.memory.errors import (
    ExportFormatError,
    InvalidRecordError,
    PruneRefusedError,
    RecordConflictError,
    UnknownDecisionError,
    UnknownRunError,
)


class ServerError(KopeError):
    """An error the server answers with ``status`` and ``code``."""

    status = 400
    code = "bad_request"


class AuthenticationError(ServerError):
    """No key, a malformed key, an unknown or revoked key (401)."""

    status = 401
    code = "unauthorized"
    exit_code = 15


class ForbiddenError(ServerError):
    """The key is valid but its team or scopes do not allow this (403)."""

    status = 403
    code = "forbidden"
    exit_code = 15


class NamespaceNotFoundError(ServerError):
    """No such namespace, or one the caller may not read (404: existence is not revealed)."""

    status = 404
    code = "unknown_namespace"
    exit_code = 2


class RegistryError(UsageError):
    """A bad team, namespace or key operation on the server's registry (``kope serve keys ...``)."""


class ServeError(KopeError):
    """``kope serve`` could not start (busy port, unreachable Neo4j, bad TLS files)."""

    exit_code = 6


# KopeError subclasses raised by the memory -> (HTTP status, code); the first match wins.
STATUS_OF: tuple[tuple[type[KopeError], int, str], ...] = (
    (UnknownRunError, 404, "unknown_run"),
    (UnknownDecisionError, 404, "unknown_decision"),
    (RecordConflictError, 409, "record_conflict"),
    (PruneRefusedError, 409, "prune_refused"),
    (InvalidRecordError, 422, "invalid_record"),
    (ExportFormatError, 422, "export_format"),
    (UsageError, 400, "bad_request"),
    (DatabaseUnavailableError, 503, "graph_unavailable"),
    (QueryError, 500, "internal"),
)


def status_of(exc: KopeError) -> tuple[int, str]:
    if isinstance(exc, ServerError):
        return exc.status, exc.code
    for kind, status, code in STATUS_OF:
        if isinstance(exc, kind):
            return status, code
    return 500, "internal"
