"""The memory's results as JSON, and back: the wire format of the memory server.

``kope serve`` (``kope/server``) sends these records and ``RemoteMemory``
(``kope/memory/remote.py``) reads them; both use the one adapter per type
below, built by pydantic from the records' own dataclass definitions, so the
server and the client cannot drift apart: a field added to a record travels
without a second definition. ``load`` fails with ``WireFormatError`` (one
line) on a response that does not have the record's shape.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError

from kope.errors import KopeError
from kope.memory.insights import DistillReport
from kope.memory.inspect import LineageTree, MemoryStats, UsedInsight
from kope.memory.prune import PruneReport
from kope.memory.recorder import RecordResult, RunResult
from kope.memory.records import DecisionRecord, OutcomeNodeRecord, RunRecord
from kope.memory.retrieval import RetrievalQuery, RetrievalResult
from kope.memory.schema import SchemaReport
from kope.memory.state import RunState, StepState
from kope.memory.sync import SyncReport
from kope.memory.transfer import TransferReport
from kope.memory.tuning import TuningData, TuningQuery

T = TypeVar("T")

# Every record type that crosses the wire (the server's responses, the client's requests).
TYPES: tuple[type, ...] = (
    RecordResult,
    RunResult,
    RunRecord,
    DecisionRecord,
    RunState,
    StepState,
    OutcomeNodeRecord,
    RetrievalQuery,
    RetrievalResult,
    MemoryStats,
    LineageTree,
    TransferReport,
    PruneReport,
    DistillReport,
    SchemaReport,
    SyncReport,
    TuningQuery,
    TuningData,
    UsedInsight,
)


class WireFormatError(KopeError):
    """A memory server's response does not have the shape of the record it should hold."""

    exit_code = 16


@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def _adapter_for(kind: Any) -> TypeAdapter[Any]:
    return _adapter(kind)


def dump(value: Any, kind: Any = None) -> Any:
    """A record (or a list of records, or ``None``) as JSON-ready data."""
    chosen: Any = kind if kind is not None else type(value)
    return _adapter(chosen).dump_python(value, mode="json")


def dump_json(value: Any, kind: Any = None) -> bytes:
    """``dump`` as JSON bytes in one step (what the server sends)."""
    chosen: Any = kind if kind is not None else type(value)
    return _adapter(chosen).dump_json(value)


def load_json(kind: type[T], raw: bytes) -> T:
    """``load`` from JSON bytes in one step (what the client receives)."""
    try:
        value: T = _adapter_for(kind).validate_json(raw)
        return value
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        name = getattr(kind, "__name__", str(kind))
        raise WireFormatError(f"the memory server sent a malformed {name}: {where}: {first['msg']}") from None


def load(kind: type[T], data: Any) -> T:
    """The record ``kind`` from JSON data; ``WireFormatError`` names the first bad field."""
    try:
        value: T = _adapter_for(kind).validate_python(data)
        return value
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        name = getattr(kind, "__name__", str(kind))
        raise WireFormatError(f"the memory server sent a malformed {name}: {where}: {first['msg']}") from None
