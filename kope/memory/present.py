"""How the Experience Graph reads to a person: outcome classes, captions, datetimes.

Everything here is *derived* from the recorded facts, the same way on every
write path (the recorder, journal replay through the recorder, ``kope memory
import`` and ``kope memory init`` for graphs recorded before these existed), so
a replayed or imported memory reads exactly like the original:

* the **outcome class**, a label on the Decision and on its Outcome
  (``:Effective :Partial :Ineffective :Negative :Failed``): ``failed`` for any
  attempt that is not correct; otherwise the step label's thresholds
  (``kope.memory.scoring``) applied to the speedup over the baseline, the
  PyTorch reference: the absolute speedup a. So colour says how fast a kernel
  is: a lineage 4x slower than PyTorch is ``:Negative`` at every step, however
  much each step gained on its parent. The step ratio r (against the parent)
  is the secondary mark, in the caption (``↑1.69`` / ``↓0.80``); the ``label``
  property keeps the step label the ranking uses;
* ``:Root`` (no parent), ``:Backtrack`` (the loop went back to an earlier state
  for this attempt), ``:Incumbent`` (some run's current best; moved in the
  transaction that changes the incumbent, ``memory/present/incumbents``), on
  the Decision and on its Outcome;
* a short ``caption`` on Decision, Outcome (the same text, the speed first so
  that a drawing that cuts a caption never cuts it: ``2.36× ↑1.69 · s3 unroll
  2→1``; a root's names its operator: ``0.71× · relu · s0 baseline``), Run and
  Kernel nodes;
* ``(:Outcome)-[:FROM]->(:Outcome)``, the decision lineage mirrored on the
  outcomes: Browser's "Connect result nodes" draws every relationship between
  the nodes of a result, and between decisions there are NEXT and USED edges
  too; between outcomes there is nothing else, so a lineage of outcomes draws
  as a clean chain;
* the per-case results of an Outcome as three lists of strings a Browser table
  can show (``case_names``, ``case_results``, ``case_speedups``; the facts stay in
  ``cases_json``);
* Neo4j datetimes ``created`` (Decision, Outcome), ``started`` / ``ended`` (Run)
  next to the epoch seconds ``created_at`` / ``started_at`` / ``ended_at`` the
  code compares (those stay the exact values the journal holds).

Derived properties are left out of exports (``DERIVED_PROPERTIES``) and
computed again on import.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kope.db.client import GraphClient, Tx
from kope.memory import scoring

CLASSES: tuple[str, ...] = ("effective", "partial", "ineffective", "negative", "failed")
CLASS_LABELS: dict[str, str] = {c: c.capitalize() for c in CLASSES}
DERIVED_PROPERTIES = frozenset(
    {"caption", "created", "started", "ended", "case_names", "case_results", "case_speedups"}
)
TITLE_CHARS = 20


def outcome_class(correct: bool, a: float | None) -> str:
    """The class of one attempt: by its speedup over PyTorch (see the module docstring); a correct attempt whose
    speed was not measured is ``partial``."""
    if not correct:
        return "failed"
    return scoring.label_for(a if a is not None else 1.0, True)


def step_mark(correct: bool, r: float, has_parent: bool, parent_a: float | None) -> str | None:
    """The step ratio against the parent (``↑1.69``, ``↓0.80``): None for a failure, a root, or a parent with no
    speed to compare with."""
    if not correct or not has_parent or parent_a is None or parent_a <= 0:
        return None
    return f"{'↑' if r >= 1 else '↓'}{r:.2f}"


def short_title(title: str, params: Mapping[str, Any] | None = None) -> str:
    """What was tried, in a few words: the knob change when the proposer recorded one."""
    change = (params or {}).get("change")
    if isinstance(change, Mapping) and {"knob", "from", "to"} <= set(change):
        return f"{change['knob']} {change['from']}→{change['to']}"
    text = re.sub(r"\s*->\s*", "→", title.strip())
    text = re.sub(r"\btemplate\s+", "", text)  # "baseline: template pointwise" -> "baseline pointwise"
    text = re.sub(r"\s+", " ", text.replace(":", " ")).strip()
    if len(text) <= TITLE_CHARS:
        return text
    cut = text[:TITLE_CHARS].rsplit(" ", 1)[0] if " " in text[:TITLE_CHARS] else text[:TITLE_CHARS]
    return cut.rstrip(" ,;(") + "…"


def speed(a: float | None, status: str) -> str:
    if status != "correct":
        return status.replace("_", " ")
    return f"{a:.2f}×" if a is not None else "speed ?"


def decision_caption(
    step: int,
    title: str,
    params: Mapping[str, Any] | None,
    status: str,
    a: float | None,
    root_of: str | None = None,
    mark: str | None = None,
    deployed: float | None = None,
) -> str:
    """``2.36× ↑1.69 · s3 unroll 2→1``: the speed (or the failure) first, then the step mark (``step_mark``), what
    was tried; a root (``root_of``: its operator) names the operator its lineage belongs to. A run's best kernel
    timed as deployed (``deployed``: its as-deployed speedup) says so after the speed:
    ``2.36× ↑1.69 · deployed 0.93× · s3 unroll 2→1``."""
    head = f"{speed(a, status)} {mark}" if mark else speed(a, status)
    if deployed is not None:
        head = f"{head} · deployed {deployed:.2f}×"
    what = f"s{step} {short_title(title, params)}"
    return f"{head} · {root_of} · {what}" if root_of else f"{head} · {what}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g} ms"


def case_columns(cases: list[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Per-case results (the dicts stored in ``cases_json``) as display columns."""
    names, results, speedups = [], [], []
    for case in cases:
        names.append(str(case.get("name")))
        if case.get("passed"):
            rule = f" · tolerance {case['tolerance']}" if case.get("tolerance") else ""
            results.append(f"passed · PyTorch {_ms(case.get('ref_ms'))}, kernel {_ms(case.get('cand_ms'))}{rule}")
        else:
            error = (case.get("error") or "not run").strip().splitlines()
            results.append("failed: " + (error[0][:100] if error else "not run"))
        value = case.get("speedup")
        shown = f"{value:.2f}×" if isinstance(value, int | float) and case.get("passed") else "-"
        if "deployed_speedup" in case:  # the run's best kernel, timed as deployed too
            mine = case["deployed_speedup"]
            shown += f" · deployed {mine:.2f}×" if isinstance(mine, int | float) else " · deployed -"
        speedups.append(shown)
    return {"case_names": names, "case_results": results, "case_speedups": speedups}


def _utc(epoch_s: float) -> str:
    return _dt.datetime.fromtimestamp(epoch_s, _dt.UTC).strftime("%Y-%m-%d %H:%M")


def run_caption(operator: str, started_at: float) -> str:
    return f"{operator} · {_utc(started_at)}"


def kernel_caption(kernel_id: str, template: str | None) -> str:
    return f"{template or 'kernel'} · {kernel_id[:7]}"


@dataclass(frozen=True)
class DecisionFacts:
    """What the presentation of one decision is derived from."""

    uid: str
    operator: str
    step: int
    title: str
    status: str
    a: float | None
    r: float
    has_parent: bool
    parent_a: float | None
    params: Mapping[str, Any] | None
    cases: tuple[Mapping[str, Any], ...] = ()
    deployed: float | None = None  # the outcome's as-deployed speedup (a run's best kernel, timed as deployed)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> DecisionFacts:
        params = json.loads(row["params_json"]) if row.get("params_json") else None
        return cls(
            row["uid"],
            row["operator"],
            row["step"],
            row["title"],
            row["status"],
            row["a"],
            row["r"],
            row["parent_id"] is not None,
            row["parent_a"],
            params,
            tuple(json.loads(row["cases_json"])) if row.get("cases_json") else (),
            row.get("deployed_speedup"),
        )


def decision_row(f: DecisionFacts) -> dict[str, Any]:
    """Parameters of ``memory/present/decisions`` for one decision."""
    correct = f.status == "correct"
    mark = step_mark(correct, f.r, f.has_parent, f.parent_a)
    return {
        "uid": f.uid,
        "class": outcome_class(correct, f.a),
        "root": not f.has_parent,
        "backtrack": bool((f.params or {}).get("backtracked")),
        "caption": decision_caption(
            f.step, f.title, f.params, f.status, f.a, None if f.has_parent else f.operator, mark, f.deployed
        ),
        **case_columns(list(f.cases)),
    }


PAGE = 2000


def _pages(client: GraphClient, statement: str, prefix: str) -> Iterator[list[dict[str, Any]]]:
    after = ""
    while True:
        rows = client.execute(statement, prefix=prefix, after=after, limit=PAGE)
        yield rows
        if len(rows) < PAGE:
            return
        after = rows[-1]["uid"]


def _write_rows(
    client: GraphClient, statement: str, rows: list[dict[str, Any]], run_uids: list[str] | None = None
) -> int:
    def work(tx: Tx) -> int:
        count = int(tx.run(statement, rows=rows)[0]["presented"])
        if run_uids is not None:  # runs: their incumbents' labels too
            tx.run("memory/present/incumbents", run_uids=run_uids)
        return count

    return client.write(work) if rows else 0


def refresh_namespace(client: GraphClient, ns: str) -> dict[str, int]:
    """Derive the presentation of every decision, outcome, run and kernel of ``ns``
    again from its facts (after an import, and for graphs recorded before KOPE wrote
    it); idempotent. Returns how many nodes of each kind were written."""
    prefix = f"{ns}/"
    done = {"Decision": 0, "Run": 0, "Kernel": 0}
    for rows in _pages(client, "memory/present/decision_facts", prefix):
        batch = [decision_row(DecisionFacts.from_row(row)) for row in rows]
        done["Decision"] += _write_rows(client, "memory/present/decisions", batch)
    for rows in _pages(client, "memory/present/run_facts", prefix):
        batch = [{"uid": r["uid"], "caption": run_caption(r["operator"], r["started_at"])} for r in rows]
        done["Run"] += _write_rows(client, "memory/present/runs", batch, [r["uid"] for r in batch])
    for rows in _pages(client, "memory/present/kernel_facts", prefix):
        batch = [{"uid": r["uid"], "caption": kernel_caption(r["id"], r["template"])} for r in rows]
        done["Kernel"] += _write_rows(client, "memory/present/kernels", batch)
    return done
