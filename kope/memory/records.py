"""Typed records of the Experience Graph's nodes, parsed from database rows.

Each record is a frozen dataclass with ``from_record(row)``: every field
without a default must be present in the row (a ``None`` value is fine where
the type allows it); a missing one raises ``RecordShapeError`` naming the
record and the field, instead of a ``KeyError`` deep inside a formatter.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from kope.errors import KopeError
from kope.memory.params import DecisionParams

R = TypeVar("R", bound="GraphRecord")


class RecordShapeError(KopeError):
    """A database row lacks a field its record needs (a Cypher/record mismatch: a bug)."""


class GraphRecord:
    """Base of the frozen dataclass records below (the annotation tells the type checker they are dataclasses)."""

    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    @classmethod
    def from_record(cls: type[R], row: Mapping[str, Any]) -> R:
        if row is None:
            raise RecordShapeError(f"{cls.__name__}: no row")
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name in row:
                values[f.name] = row[f.name]
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise RecordShapeError(f"{cls.__name__} record lacks field {f.name!r} (got {sorted(row)})")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RunRecord(GraphRecord):
    id: str
    team: str
    task_id: str
    operator: str
    family: str
    target: str
    hw_id: str
    hw_class: str
    vendor: str
    proposer: str
    model: str | None
    context_policy: str
    memory_enabled: bool
    started_at: float
    ended_at: float | None
    status: str
    steps: int
    last_step: int | None
    prompt_tokens: int
    completion_tokens: int
    best_speedup: float | None
    incumbent_id: str | None


@dataclass(frozen=True)
class DecisionRecord(GraphRecord):
    id: str
    run_id: str
    step: int
    title: str
    layer: str
    parent_id: str | None
    status: str
    label: str
    a: float | None
    r: float
    d: float
    conf: float
    error_kind: str | None
    operator: str
    family: str
    hw_id: str
    hw_class: str
    created_at: float
    thought: str = ""
    code_hash: str | None = None
    target: str | None = None
    vendor: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    params_json: str | None = None

    @property
    def params(self) -> DecisionParams:
        return DecisionParams.from_json(self.params_json)


@dataclass(frozen=True)
class StoredCase:
    """One case of an outcome as the graph keeps it (timings as medians, in ms)."""

    name: str
    passed: bool
    speedup: float | None = None
    error: str | None = None
    ref_ms: float | None = None
    cand_ms: float | None = None
    deployed_speedup: float | None = None  # the case timed as deployed (a run's best kernel; kope.memory.deployed)
    # the rule that accepted the case's outputs where the default tolerance refused them ("float64-reference":
    # harness.record.CaseResult.tolerance); None: within the default tolerance, or recorded before it was kept
    tolerance: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredCase:
        return cls(
            name=str(data["name"]),
            passed=bool(data["passed"]),
            speedup=data.get("speedup"),
            error=data.get("error"),
            ref_ms=data.get("ref_ms"),
            cand_ms=data.get("cand_ms"),
            deployed_speedup=data.get("deployed_speedup"),
            tolerance=data.get("tolerance"),
        )

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class OutcomeNodeRecord(GraphRecord):
    id: str
    status: str
    cases_total: int
    cases_passed: int
    speedup: float | None  # measured: the harness's geometric mean over passing, timed cases (Outcome.speedup)
    speedup_usable: float | None  # the decision's ``a`` (kope/memory/scoring.py): 0 when not correct, None when unknown
    error_kind: str | None
    error_excerpt: str | None
    timings_valid: bool
    confidence: float
    r: float
    label: str
    compile_time_s: float | None = None
    threads: int | None = None
    duration_s: float | None = None
    cases_json: str | None = None  # per case: name, passed, speedup, error, ref_ms, cand_ms (medians), tolerance
    # a run's best kernel timed as deployed after the run (kope.memory.deployed): the geometric mean over its
    # cases (each case's deployed_speedup is in cases_json), why it is missing or partial, when; None: not measured
    deployed_speedup: float | None = None
    deployed_error: str | None = None
    deployed_at: float | None = None

    @property
    def cases(self) -> tuple[StoredCase, ...]:
        return tuple(StoredCase.from_json(c) for c in json.loads(self.cases_json)) if self.cases_json else ()


@dataclass(frozen=True)
class InsightRecord(GraphRecord):
    id: str
    kind: (
        str  # "rule" (repeated failures) | "pattern" (repeated effective decisions) | "effect" (a technique's speedup)
    )
    family: str
    hw_class: str
    text: str
    support: int
    confidence: float
    active: bool
    error_kind: str | None = None
    layer: str | None = None
    # effect insights (kope/memory/effects.py): knob=value vs knob=baseline on one shape class, the speedup
    # ratio's geometric mean and 95% interval over ``support`` controlled comparisons
    shape_class: str | None = None
    template: str | None = None
    knob: str | None = None
    value: str | None = None
    baseline: str | None = None
    effect: float | None = None
    low: float | None = None
    high: float | None = None
