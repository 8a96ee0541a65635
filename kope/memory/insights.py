"""Insights: deterministic distillation of repeated experience (validity rules and patterns).

* **Validity rule** (``kind="rule"``): failed attempts with the same error kind
  for one family on one hardware class, at least ``MIN_SUPPORT`` of them.
  ``support`` is how many; ``confidence`` = support / all attempts of that family
  on that class (how often an attempt there fails this way).
* **Pattern** (``kind="pattern"``): effective decisions of the same optimization
  layer for one family on one hardware class, at least ``MIN_SUPPORT``.
  ``confidence`` = support / all attempts of that layer there (its success rate).

Each insight is ``DERIVED_FROM`` every outcome it came from and ``ABOUT`` the
operators and hardware involved. The same graph always gives the same insights
(texts included): every grouping and list is ordered, and no clock is read.
Insights that lose their support are retired (deleted, or kept inactive if a
decision used them as evidence).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from kope.db.client import GraphClient, Tx
from kope.memory.ids import insight_id, uid

MIN_SUPPORT = 2


@dataclass(frozen=True)
class DistillReport:
    rules: int
    patterns: int
    retired: int
    family: str | None


def _key(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.:@#+=\-]", "_", value)


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.0f}%" if whole else "n/a"


def _first_line(text: str | None, limit: int = 160) -> str | None:
    if not text:
        return None
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def build_insights(
    ns: str, failures: list[dict[str, Any]], effective: list[dict[str, Any]], totals: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Pure: rows from the three grouping statements -> insight rows to write."""
    per_class: Counter[tuple[str, str]] = Counter()
    per_layer: Counter[tuple[str, str, str]] = Counter()
    for row in totals:
        per_class[(row["family"], row["hw_class"])] += row["attempts"]
        per_layer[(row["family"], row["hw_class"], row["layer"])] += row["attempts"]
    out: list[dict[str, Any]] = []
    for g in failures:
        support = len(g["outcomes"])
        if support < MIN_SUPPORT:
            continue
        total = per_class[(g["family"], g["hw_class"])]
        layers = sorted(Counter(g["layers"]).items(), key=lambda kv: (-kv[1], kv[0]))
        layer_text = ", ".join(f"{name} {count}" for name, count in layers[:3])
        text = (
            f"On {g['hw_class']} hardware, {g['family']} kernels failed with {g['error_kind']} in {support} of "
            f"{total} attempts ({_pct(support, total)}); layers tried: {layer_text}."
        )
        excerpt = _first_line(g["latest_excerpt"])
        if excerpt:
            text += f" Latest error: {excerpt}"
        local = insight_id("rule", g["family"], g["hw_class"], _key(g["error_kind"]))
        out.append(
            _row(
                ns,
                local,
                "rule",
                g,
                support,
                support / total if total else 1.0,
                text,
                error_kind=g["error_kind"],
                layer=None,
            )
        )
    for g in effective:
        support = len(g["outcomes"])
        if support < MIN_SUPPORT:
            continue
        total = per_layer[(g["family"], g["hw_class"], g["layer"])]
        median_r = statistics.median(g["ratios"])
        examples = "; ".join(f"'{t}'" for t in g["titles"][:3])
        text = (
            f"On {g['hw_class']} hardware, {g['layer']} decisions for {g['family']} kernels were effective "
            f"{support} of {total} times ({_pct(support, total)}), median step ratio {median_r:.2f}; "
            f"best: {examples}."
        )
        local = insight_id("pattern", g["family"], g["hw_class"], _key(g["layer"]))
        out.append(
            _row(
                ns,
                local,
                "pattern",
                g,
                support,
                support / total if total else 1.0,
                text,
                error_kind=None,
                layer=g["layer"],
            )
        )
    return out


def _row(
    ns: str,
    local: str,
    kind: str,
    g: dict[str, Any],
    support: int,
    conf: float,
    text: str,
    *,
    error_kind: str | None,
    layer: str | None,
) -> dict[str, Any]:
    return {
        "props": {
            "uid": uid(ns, local),
            "ns": ns,
            "id": local,
            "kind": kind,
            "family": g["family"],
            "hw_class": g["hw_class"],
            "error_kind": error_kind,
            "layer": layer,
            "text": text,
            "support": support,
            "confidence": round(conf, 6),
            "active": True,
            "operators": sorted(g["operators"]),
        },
        "outcomes": list(g["outcomes"]),
        "operators": [uid(ns, name) for name in sorted(g["operators"])],
        "hardware": [uid(ns, hw) for hw in sorted(g["hardware"])],
    }


def distill(client: GraphClient, ns: str, family: str | None = None) -> DistillReport:
    """Recompute the insights of one family (or the whole namespace) in one transaction."""

    def work(tx: Tx) -> DistillReport:
        failures = tx.run("memory/insights/failures", ns=ns, family=family)
        effective = tx.run("memory/insights/effective", ns=ns, family=family)
        totals = tx.run("memory/insights/totals", ns=ns, family=family)
        rows = build_insights(ns, failures, effective, totals)
        if rows:
            tx.run("memory/insights/upsert", rows=rows)
        retired = tx.run("memory/insights/retire", ns=ns, family=family, keep=[r["props"]["id"] for r in rows])
        return DistillReport(
            rules=sum(1 for r in rows if r["props"]["kind"] == "rule"),
            patterns=sum(1 for r in rows if r["props"]["kind"] == "pattern"),
            retired=retired[0]["deleted"] if retired else 0,
            family=family,
        )

    return client.write(work)
