"""Decisions and attempts built by hand, the way the graph returns them (``DecisionRecord`` rows wrapped in
``AttemptState``, the one Decision type that every view above the memory reads)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kope.memory.records import DecisionRecord, OutcomeNodeRecord
from kope.memory.state import AttemptState


def decision(
    id: str = "run:s0",
    step: int = 0,
    *,
    title: str = "an attempt",
    layer: str = "other",
    status: str = "correct",
    label: str = "partial",
    a: float | None = 1.0,
    params: Mapping[str, Any] | None = None,
    **fields: Any,
) -> DecisionRecord:
    """A decision record with everything not given set to a plain default."""
    values: dict[str, Any] = {
        "id": id,
        "run_id": id.split(":", 1)[0],
        "step": step,
        "title": title,
        "layer": layer,
        "parent_id": None,
        "status": status,
        "label": label,
        "a": a,
        "r": 1.0,
        "d": 0.0,
        "conf": 1.0,
        "error_kind": None,
        "operator": "op",
        "family": "elementwise",
        "hw_id": "hw",
        "hw_class": "x86_64",
        "created_at": 0.0,
        "params_json": json.dumps(dict(params)) if params else None,
    }
    values.update(fields)
    return DecisionRecord(**values)


def attempt(
    id: str = "run:s0",
    step: int = 0,
    *,
    outcome: OutcomeNodeRecord | None = None,
    code: str | None = None,
    **fields: Any,
) -> AttemptState:
    """An attempt: its decision (``decision(id, step, **fields)``), outcome and kernel."""
    return AttemptState(decision(id, step, **fields), outcome, code)
