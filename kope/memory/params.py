"""Structured facts about a decision: what the loop knows, plus the proposer's own extension.

A decision's parameters are stored as one JSON object (the Decision's
``params_json``, and ``params`` in the journal). Two keys belong to the loop:

- ``backtracked``: the step started from an earlier state than the incumbent
  (after ``patience`` steps without improvement);
- ``cited``: the evidence ids the proposer said it relied on.

Every other key belongs to the proposer that made the decision (its
``extension``): the offline proposer stores its template, knob settings and
the one-knob change (``kope.agent.offline.TemplateChoice`` reads and writes
them); an LLM proposer stores none. The memory keeps the extension as given
and never interprets it, so a new proposer adds its own facts without a
change here. The JSON layout is flat (loop keys next to the extension's), as
in every graph and journal written so far.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

LOOP_KEYS = ("backtracked", "cited")


@dataclass(frozen=True)
class DecisionParams:
    backtracked: bool = False
    cited: tuple[str, ...] = ()
    extension: Mapping[str, Any] = field(default_factory=dict)  # the proposer's own JSON facts

    def __post_init__(self) -> None:
        clash = sorted(set(self.extension) & set(LOOP_KEYS))
        if clash:
            raise ValueError(f"a proposer's parameters cannot use the loop's keys {clash}")

    @property
    def empty(self) -> bool:
        return not (self.backtracked or self.cited or self.extension)

    def to_json(self) -> dict[str, Any] | None:
        """The flat JSON object stored with the decision (None when there is nothing to store)."""
        if self.empty:
            return None
        data = dict(self.extension)
        if self.backtracked:
            data["backtracked"] = True
        if self.cited:
            data["cited"] = list(self.cited)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | None) -> DecisionParams:
        """From the stored object (or its JSON text); a missing one is empty."""
        if isinstance(data, str):
            data = json.loads(data)
        if not data:
            return cls()
        if not isinstance(data, Mapping):
            raise ValueError(f"decision parameters must be a JSON object, not {type(data).__name__}")
        cited = data.get("cited") or ()
        if isinstance(cited, str) or not all(isinstance(c, str) for c in cited):
            raise ValueError("decision parameters: 'cited' must be a list of evidence ids")
        return cls(
            backtracked=bool(data.get("backtracked", False)),
            cited=tuple(cited),
            extension={k: v for k, v in data.items() if k not in LOOP_KEYS},
        )
