"""The evaluation outcome record (contract section 3), as KOPE's memory reads it.

The harness produces this record; the memory validates it here so that a
malformed record is one clear error (``InvalidRecordError``) instead of a
half-written attempt. The fields are exactly the contract's ``kope.outcome/1``;
unknown fields are rejected so that drift between the harness and the memory
shows up at once. ``parse_outcome`` accepts the JSON text, a dict, or any
object with ``to_dict()`` / ``model_dump()`` (the harness's typed record).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kope.memory.errors import InvalidRecordError

OUTCOME_SCHEMA = "kope.outcome/1"
Status = Literal["correct", "incorrect", "compile_error", "runtime_error", "timeout", "cheat_detected", "format_error"]
STATUSES: tuple[str, ...] = (
    "correct",
    "incorrect",
    "compile_error",
    "runtime_error",
    "timeout",
    "cheat_detected",
    "format_error",
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class TimingStats(_Strict):
    median: float = Field(ge=0)
    iqr: float | None = Field(default=None, ge=0)
    cv: float | None = Field(default=None, ge=0)
    n: int = Field(ge=0)


class CaseResult(_Strict):
    index: int = Field(ge=0)
    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    passed: bool
    error: str | None = None
    ref_ms: TimingStats | None = None
    cand_ms: TimingStats | None = None
    speedup: float | None = Field(default=None, gt=0)


class GpuInfo(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    name: str
    compute_capability: str | None = None
    sms: int | None = None
    memory_bytes: int | None = None


class HardwareInfo(_Strict):
    """The target's fingerprint; ``id`` is stable for one machine."""

    id: str = Field(min_length=1, max_length=128)
    hw_class: str = Field(alias="class", min_length=1, max_length=64)
    vendor: str = "unknown"
    arch: str | None = None
    cpu_model: str | None = None
    cores: int | None = Field(default=None, ge=0)
    isa: tuple[str, ...] = ()
    caches: dict[str, int | None] = Field(default_factory=dict)
    gpu: GpuInfo | None = None

    def to_contract(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


class OutcomeRecord(_Strict):
    """One evaluation of one candidate on one target (``kope.outcome/1``)."""

    schema_: Literal["kope.outcome/1"] = Field(alias="schema", default="kope.outcome/1")
    status: Status
    task: str = Field(min_length=1)
    family: str | None = None
    level: int | None = None
    target: str = Field(min_length=1)
    cases_total: int = Field(ge=0)
    cases_passed: int = Field(ge=0)
    speedup: float | None = Field(default=None, gt=0)
    error_kind: str | None = None
    error_excerpt: str | None = Field(default=None, max_length=4000)
    compile_time_s: float | None = Field(default=None, ge=0)
    timings_valid: bool = True
    threads: int | None = Field(default=None, ge=0)
    duration_s: float | None = Field(default=None, ge=0)
    hardware: HardwareInfo
    cases: tuple[CaseResult, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> OutcomeRecord:
        if self.cases_passed > self.cases_total:
            raise ValueError(f"cases_passed ({self.cases_passed}) exceeds cases_total ({self.cases_total})")
        return self

    @property
    def correct(self) -> bool:
        return self.status == "correct"

    def to_contract(self) -> dict[str, Any]:
        """The record as the contract's JSON dict (``schema`` and ``class`` spelled as there)."""
        return self.model_dump(mode="json", by_alias=True)


def _as_dict(value: Any) -> Any:
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidRecordError(f"outcome record is not valid JSON: {exc}") from None
    if isinstance(value, dict):
        return value
    for method in ("to_dict", "model_dump"):
        fn = getattr(value, method, None)
        if callable(fn):
            return fn()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise InvalidRecordError(f"outcome record must be a dict, JSON text or a typed record, not {type(value).__name__}")


def parse_outcome(value: Any) -> OutcomeRecord:
    """Validate an outcome record; raise ``InvalidRecordError`` naming the first bad field."""
    if isinstance(value, OutcomeRecord):
        return value
    data = _as_dict(value)
    try:
        return OutcomeRecord.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidRecordError(f"invalid outcome record: {where}: {first['msg']}{more}") from None
