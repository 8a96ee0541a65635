"""The as-deployed figures of a run's best kernel, written onto its Outcome after the run.

The loop records every attempt as it is evaluated; only once the run has ended does it time its best kernel
as deployed (``best.py`` in plain processes under the user's own settings: ``kope.boundary.measure_deployed``).
``write_deployed`` adds that measurement (``DeployedFigures``) to the Outcome of the decision that produced the
kernel, in one write transaction: ``deployed_speedup``, ``deployed_error``, ``deployed_at`` and each case's
``deployed_speedup`` inside ``cases_json``, then the decision's presentation again (its caption and the
outcome's ``case_speedups`` name the as-deployed figure). Both stores journal it first (kind ``deployed``);
``kope memory sync`` replays a journaled measurement the graph lacks (``deployed/present``). An Outcome without
these properties (every other attempt, and graphs recorded before them) reads as "not measured as deployed".
"""

from __future__ import annotations

import json
from typing import Any

from kope.db.client import Tx
from kope.memory import present
from kope.memory.errors import InvalidRecordError, UnknownDecisionError
from kope.memory.ids import uid
from kope.memory.specs import DeployedFigures


def merged_cases(cases_json: str | None, figures: DeployedFigures) -> str | None:
    """``cases_json`` with each case's as-deployed speedup (``deployed_speedup``; None where that case was not
    timed as deployed); a case the measurement does not name keeps no such key."""
    if not cases_json:
        return cases_json
    cases: list[dict[str, Any]] = json.loads(cases_json)
    for case in cases:
        case.pop("deployed_speedup", None)  # an earlier measurement's
        if case.get("name") in figures.cases:
            case["deployed_speedup"] = figures.cases[case["name"]]
    return json.dumps(cases, separators=(",", ":"))


def write_deployed(tx: Tx, ns: str, figures: DeployedFigures) -> str:
    """Add ``figures`` to the outcome of its decision (``UnknownDecisionError`` when the graph lacks it); returns
    the decision id. Idempotent: the same figures written twice leave the same properties."""
    key = uid(ns, figures.decision_id)
    rows = tx.run("memory/deployed/cases", uid=key)
    if not rows:
        raise UnknownDecisionError(
            f"decision {figures.decision_id} is not in the graph (namespace {ns}): "
            "its as-deployed figures have no outcome to go to",
            hint=f"`kope memory sync --namespace {ns}` if the run is journaled",
        )
    if rows[0]["run_id"] != figures.run_id:
        raise InvalidRecordError(
            f"decision {figures.decision_id} belongs to run {rows[0]['run_id']}, not to run {figures.run_id}: "
            "its as-deployed figures are refused"
        )
    tx.run(
        "memory/deployed/set",
        uid=key,
        speedup=figures.speedup,
        error=figures.error,
        measured_at=figures.measured_at,
        cases_json=merged_cases(rows[0]["cases_json"], figures),
    )
    facts = [present.DecisionFacts.from_row(row) for row in tx.run("memory/present/decision_facts_of", uids=[key])]
    tx.run("memory/present/decisions", rows=[present.decision_row(f) for f in facts])
    return figures.decision_id
