"""Errors of the Experience Graph memory (all ``KopeError`` subclasses)."""

from __future__ import annotations

from kope.errors import KopeError, UsageError


class InvalidRecordError(UsageError):
    """An outcome, attempt or run record does not have the required shape."""


class UnknownRunError(UsageError):
    """A run id that the graph (namespace) does not hold."""


class UnknownDecisionError(UsageError):
    """A decision id that the graph (namespace) does not hold."""


class RecordConflictError(UsageError):
    """The same id was recorded before with different content."""


class JournalError(KopeError):
    """The write-ahead log could not be written or read."""

    exit_code = 14


class ExportFormatError(UsageError):
    """A memory export file is not in the expected format."""


class PruneRefusedError(UsageError):
    """Pruning the selection would leave lineages pointing at deleted decisions."""
