"""Tuning records: what a cost model trains on, read from the Experience Graph.

A tuning record is one recorded attempt with settings of a kernel template (its
Decision carries ``template``, set by the recorder from the attempt's params):
the settings, the outcome's status and per-case speedups with each case's
shape/dtype key, and the hardware it ran on. ``fetch_tuning`` returns a
bounded, ranked sample (``memory/retrieve/tuning_records``) plus the
fingerprints of the hardware involved (``memory/retrieve/hardware``).

Ranking rules of the sample (the Cypher statement applies them, in this order):

1. **this run's own attempts first**: they are the most specific evidence and
   must never be cut by the bound;
2. **same operator** before other operators of the template;
3. **hardware**: same machine, then same hardware class, then same vendor,
   then other (speed evidence transfers by hardware similarity; the cost model
   also weights it that way, while failures count at full weight there);
4. **shapes**: same case-set signature, then same shape class, then others
   (``kope.memory.shapes``);
5. newest first, then the decision id (deterministic).

``run_only`` restricts the sample to the run itself (``--no-memory``: the model
sees only the current run).

**Related templates.** When the sample holds no attempt of the template from
another run (the first operator of its template in this memory) and the query
names the operator's ``family``, the rest of the bound is filled with attempts
of the family's other templates (``memory/retrieve/tuning_related``, ranked by
hardware, shapes and recency as above; each record's ``template`` says which).
The tuner reads them through the knobs the two templates share
(``Tuner._readable``): ``row_logsumexp``'s first operator learns what
``lanes`` and ``vector_width`` did on ``axis_reduce``; the trust rule judges
them like any other memory operator. The bound (``limit``) keeps a proposal fast however
large the memory grows: the sort runs over the template's attempts in one
index seek, the outcomes are read only for the rows kept.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kope.boundary import Hardware
from kope.db.client import GraphClient, Tx
from kope.memory.ids import uid

DEFAULT_LIMIT = 400


@dataclass(frozen=True)
class TuningQuery:
    template: str
    run_id: str
    operator: str
    hardware_id: str | None = None
    hardware_class: str | None = None
    vendor: str | None = None
    shape_sig: str | None = None
    shape_class: str | None = None
    run_only: bool = False
    limit: int = DEFAULT_LIMIT
    family: str | None = None  # the operator's family: related templates fill an empty sample (None: never)

    def params(self, ns: str) -> dict[str, Any]:
        return {
            "ns": ns,
            "template": self.template,
            "run_id": self.run_id,
            "operator": self.operator,
            "hardware_id": self.hardware_id,
            "hardware_class": self.hardware_class,
            "vendor": self.vendor,
            "shape_sig": self.shape_sig,
            "shape_class": self.shape_class,
            "run_only": self.run_only,
            "limit": self.limit,
        }

    def related_params(self, ns: str, limit: int) -> dict[str, Any]:
        """``memory/retrieve/tuning_related``'s parameters: the family's other templates, at most ``limit``."""
        return {**self.params(ns), "family": self.family, "limit": limit}


def served_operator(params: Mapping[str, Any], task_operator: str) -> str:
    """The template operator an attempt rendered: its structure match's (a KernelBench ``19_ReLU.py`` is
    ``relu`` to the template), else the task's own (native matches, attempts recorded before matching)."""
    structure = params.get("structure")
    if isinstance(structure, Mapping) and structure.get("matched") and isinstance(structure.get("operator"), str):
        return str(structure["operator"])
    return task_operator


@dataclass(frozen=True)
class CaseSpeed:
    name: str
    shape: str | None  # CaseShape.key, None for attempts recorded before shapes were
    passed: bool
    speedup: float | None


@dataclass(frozen=True)
class TuningRecord:
    id: str
    run_id: str
    step: int
    operator: str  # the template operator it rendered (its structure match's; else the task's)
    family: str
    hw_id: str
    hw_class: str
    vendor: str
    settings: Mapping[str, Any]
    status: str
    error_kind: str | None
    a: float | None
    code_hash: str | None
    shape_class: str | None
    cases: tuple[CaseSpeed, ...]
    own: bool  # from the run the sample was asked for
    hardware_tier: str  # hardware | class | vendor | other
    template: str | None = None  # another template of the family (a related record); None: the query's template

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TuningRecord:
        params = json.loads(row["params_json"]) if row["params_json"] else {}
        cases = json.loads(row["cases_json"]) if row["cases_json"] else []
        return cls(
            id=row["id"],
            run_id=row["run_id"],
            step=row["step"],
            operator=served_operator(params, row["operator"]),
            family=row["family"],
            hw_id=row["hw_id"],
            hw_class=row["hw_class"],
            vendor=row["vendor"],
            settings=dict(params.get("settings") or {}),
            status=row["status"],
            error_kind=row["error_kind"],
            a=row["a"],
            code_hash=row["code_hash"],
            shape_class=row["shape_class"],
            cases=tuple(
                CaseSpeed(str(c.get("name")), c.get("shape"), bool(c.get("passed")), c.get("speedup")) for c in cases
            ),
            own=bool(row["own"]),
            hardware_tier=("other", "vendor", "class", "hardware")[row["hardware"]],
            template=row.get("template"),
        )

    @property
    def correct(self) -> bool:
        return self.status == "correct"


@dataclass(frozen=True)
class HardwareFacts:
    id: str
    hw_class: str
    vendor: str
    arch: str | None
    cores: int | None
    isa: tuple[str, ...]
    caches: Mapping[str, int | None]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> HardwareFacts:
        return cls(
            id=row["id"],
            hw_class=row["hw_class"],
            vendor=row["vendor"],
            arch=row["arch"],
            cores=row["cores"],
            isa=tuple(row["isa"] or ()),
            caches=json.loads(row["caches_json"]) if row["caches_json"] else {},
        )

    @classmethod
    def from_fingerprint(cls, hw: Hardware | Mapping[str, Any]) -> HardwareFacts:
        """The hardware fingerprint (``Hardware``, or its dict) as the same record."""
        if isinstance(hw, Hardware):
            hw = hw.to_dict()
        return cls(
            id=str(hw.get("id")),
            hw_class=str(hw.get("class") or hw.get("hw_class") or "unknown"),
            vendor=str(hw.get("vendor") or "unknown"),
            arch=hw.get("arch"),
            cores=hw.get("cores"),
            isa=tuple(hw.get("isa") or ()),
            caches=dict(hw.get("caches") or {}),
        )


@dataclass(frozen=True)
class TuningData:
    query: TuningQuery
    records: tuple[TuningRecord, ...]
    hardware: Mapping[str, HardwareFacts] = field(default_factory=dict)
    elapsed_ms: float = 0.0


def fetch_tuning(client: GraphClient, ns: str, query: TuningQuery) -> TuningData:
    """The ranked, bounded sample of ``query`` in one read transaction."""
    if query.limit < 1:
        raise ValueError("limit must be >= 1")
    began = time.perf_counter()

    def work(tx: Tx) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        rows = tx.run("memory/retrieve/tuning_records", **query.params(ns))
        room = query.limit - len(rows)
        if query.family and not query.run_only and room > 0 and all(row["own"] for row in rows):
            # nothing of this template from another run: the family's other templates stand in
            rows = [*rows, *tx.run("memory/retrieve/tuning_related", **query.related_params(ns, room))]
        hw_ids = sorted({row["hw_id"] for row in rows})
        hardware = tx.run("memory/retrieve/hardware", uids=[uid(ns, h) for h in hw_ids]) if hw_ids else []
        return rows, hardware

    rows, hardware = client.read(work)
    return TuningData(
        query=query,
        records=tuple(TuningRecord.from_row(r) for r in rows),
        hardware={h["id"]: HardwareFacts.from_row(h) for h in hardware},
        elapsed_ms=(time.perf_counter() - began) * 1000,
    )
