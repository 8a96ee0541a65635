"""Validating ``kope.outcome/1`` records on their way into the memory.

The record is ``harness.record.Outcome`` (and its parts): defined there once,
produced by the harness, stored by KOPE. Here it is only validated, so that a
malformed record (from a journal, an import, a remote evaluator, a test) is one
clear ``InvalidRecordError`` instead of a half-written attempt:

1. a pydantic model *generated* from each dataclass (same fields, same types,
   same defaults; unknown fields rejected; ``class_`` read as ``class``) checks
   shape and types and names the first bad field;
2. ``Outcome.violations()`` checks the rules below the types (counts, positive
   speedups, lengths).

A new field added to the dataclass is validated here without any change.
``OutcomeField`` and ``HardwareField`` are the pydantic field types of the
memory's input specs (``kope.memory.specs``): they accept JSON text, a dict or
the typed record, hold the typed record, and serialise to the record's JSON.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import operator
import types
import typing
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    InstanceOf,
    PlainSerializer,
    ValidationError,
    create_model,
)

from kope.boundary import CaseResult, GpuInfo, Hardware, Outcome, TimingStats
from kope.memory.errors import InvalidRecordError

RECORD_TYPES: tuple[type, ...] = (Outcome, CaseResult, TimingStats, Hardware, GpuInfo)


def _names(name: str) -> tuple[str, str | None]:
    """(model field name, JSON alias). A dataclass field named after a Python keyword carries a trailing
    underscore (``class_``) that its JSON name lacks; one that would shadow a pydantic attribute
    (``schema``) gets the underscore in the model."""
    if name.endswith("_"):
        return name, name[:-1]
    if hasattr(BaseModel, name):
        return name + "_", name
    return name, None


def _translate(annotation: Any) -> Any:
    """The annotation with every record dataclass in it replaced by its generated model."""
    if isinstance(annotation, type) and annotation in RECORD_TYPES:
        return _model(annotation)
    origin = typing.get_origin(annotation)
    if origin is None:
        return annotation
    args = tuple(_translate(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return functools.reduce(operator.or_, args)
    return origin[args]


@functools.cache
def _model(cls: type) -> type[BaseModel]:
    hints = typing.get_type_hints(cls)
    definitions: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        name, alias = _names(f.name)
        if f.default_factory is not dataclasses.MISSING:
            spec: Any = Field(default_factory=f.default_factory, alias=alias)
        else:
            spec = Field(... if f.default is dataclasses.MISSING else f.default, alias=alias)
        definitions[name] = (_translate(hints[f.name]), spec)
    return create_model(
        f"{cls.__name__}Record",
        __config__=ConfigDict(extra="forbid", populate_by_name=True),
        **definitions,
    )


def _as_dict(value: Any, what: str) -> Any:
    if isinstance(value, (str, bytes)):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidRecordError(f"{what} is not valid JSON: {exc}") from None
    if isinstance(value, dict):
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    raise InvalidRecordError(f"{what} must be a dict, JSON text or a typed record, not {type(value).__name__}")


def _validated(cls: type, value: Any, what: str) -> dict[str, Any]:
    try:
        model = _model(cls).model_validate(_as_dict(value, what))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "record"
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise InvalidRecordError(f"invalid {what}: {where}: {first['msg']}{more}") from None
    return model.model_dump(by_alias=True)


def parse_outcome(value: Any) -> Outcome:
    """Validate an outcome record (JSON text, a dict, or anything with ``to_dict()``); raise
    ``InvalidRecordError`` naming the first bad field. The typed record is validated too (its JSON is)."""
    data = _validated(Outcome, value, "outcome record")
    try:
        outcome = Outcome.from_dict(data)
    except ValueError as exc:
        raise InvalidRecordError(f"invalid outcome record: {exc}") from None
    problems = outcome.violations()
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        raise InvalidRecordError(f"invalid outcome record: {problems[0]}{more}")
    return outcome


def parse_hardware(value: Any) -> Hardware:
    """Validate a hardware fingerprint (the ``hardware`` of an outcome record)."""
    hardware = Hardware.from_dict(_validated(Hardware, value, "hardware"))
    problems = hardware.violations()
    if problems:
        raise InvalidRecordError(f"invalid hardware: {problems[0]}")
    return hardware


def _outcome_json(outcome: Outcome) -> dict[str, Any]:
    return outcome.to_dict()


def _hardware_json(hardware: Hardware) -> dict[str, Any]:
    return hardware.to_dict()


OutcomeField = Annotated[
    InstanceOf[Outcome], BeforeValidator(parse_outcome), PlainSerializer(_outcome_json, return_type=dict)
]
HardwareField = Annotated[
    InstanceOf[Hardware], BeforeValidator(parse_hardware), PlainSerializer(_hardware_json, return_type=dict)
]
