"""Memory transfer: benches that start from different imported memories, side by side.

The paper's comparison has four rows: cold start (empty memory), memory from
other hardware, memory from the same hardware, and both. Each row is one
bench run with ``--import-memory`` (none, the other machine's export, this
machine's export, or both files); ``compare_table`` puts them side by side,
pairing every row against the first (the cold start) on the cases both timed.

On one machine, ``relabel_export`` rewrites an export as if it had been
recorded on other hardware (new hardware id, class and vendor on the Hardware
node and on every run and decision that used it), so retrieval ranks that
experience as foreign. The timings inside are still this machine's: it
simulates the shape of the comparison, not a real second machine.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kope.bench.metrics import config_metrics, pair_views, paired_views
from kope.bench.report import count, pct, times
from kope.errors import UsageError

HW_KEYS = ("hw_id", "hw_class", "vendor")


def _imports(data: Mapping[str, Any]) -> str:
    files = sorted({Path(i["file"]).name for i in data.get("imports") or []})
    return ", ".join(files) if files else "none (cold start)"


def compare_table(benches: Sequence[Mapping[str, Any]], labels: Sequence[str] | None = None) -> str:
    """One row per (bench, configuration); the paired speedup is against the first bench's same configuration."""
    labels = list(labels or [b["options"]["name"] for b in benches])
    first = benches[0]
    head = [
        "bench",
        "memory imported",
        "configuration",
        "operators passed",
        "cases passed",
        "pass rate",
        "geomean speedup",
        f"paired speedup vs {labels[0]}",
        "tokens / step",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    first_configs = {c["name"] for c in first["configurations"]}
    for label, data in zip(labels, benches):
        for config in (c["name"] for c in data["configurations"]):
            m = config_metrics(data, config)
            if data is first:
                paired = "(reference)"
            elif config not in first_configs:
                paired = f"- ({config} not in {labels[0]})"
            else:
                p = paired_views(pair_views(data, config), pair_views(first, config), labels[0])
                paired = f"{times(p.speedup)} (n={p.n})" if p.n else "- (no common timed case)"
            lines.append(
                "| "
                + " | ".join(
                    [
                        label,
                        _imports(data),
                        config,
                        f"{m.operators_passed}/{m.operators}",
                        f"{m.cases_passed}/{m.cases}",
                        pct(m.pass_rate),
                        times(m.geomean_speedup),
                        paired,
                        count(m.tokens_per_step),
                    ]
                )
                + " |"
            )
    return "\n".join(lines)


def relabel_export(source: Path, target: Path, *, hw_class: str, vendor: str) -> dict[str, int]:
    """Copy a ``kope memory export`` file to ``target`` with its hardware relabelled.

    Every Hardware node gets a new id (``sim-<hash>``), ``hw_class`` and ``vendor``; runs and
    decisions on it carry the new values; ON_HARDWARE and ABOUT edges follow. Insights are
    left out (they are derived: the import distils them again from the relabelled evidence)."""
    if Path(target).resolve() == Path(source).resolve():
        raise UsageError("write the relabelled export to another file than its source")
    lines = [json.loads(line) for line in Path(source).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines or lines[0].get("format") != "kope.memory":
        raise UsageError(f"{source} is not a KOPE memory export (`kope memory export -o FILE`)")
    if not lines[-1].get("end"):
        raise UsageError(f"{source} has no end marker: the export is truncated")
    mapping: dict[str, str] = {}
    for obj in lines:
        if obj.get("node") == "Hardware":
            digest = hashlib.sha256(f"{obj['id']}|{hw_class}|{vendor}".encode()).hexdigest()[:8]
            mapping[obj["id"]] = f"sim-{digest}"
    header, body = dict(lines[0]), []
    header["relabelled"] = {"hw_class": hw_class, "vendor": vendor, "from": sorted(mapping)}
    rewritten = 0
    for obj in lines[1:-1]:
        if obj.get("node") == "Insight" or (obj.get("rel") and "Insight" in (obj["from"][0], obj["to"][0])):
            continue
        if "node" in obj:
            props = dict(obj["props"])
            if obj["node"] == "Hardware":
                old = obj["id"]
                obj = {**obj, "id": mapping[old]}
                props.update(
                    id=mapping[old],
                    hw_class=hw_class,
                    vendor=vendor,
                    cpu_model=f"simulated {hw_class} (relabelled {old})",
                )
                rewritten += 1
            elif props.get("hw_id") in mapping:
                props.update(hw_id=mapping[props["hw_id"]], hw_class=hw_class, vendor=vendor)
                rewritten += 1
            obj = {**obj, "props": props}
        elif "rel" in obj:
            obj = {**obj, "from": _remap(obj["from"], mapping), "to": _remap(obj["to"], mapping)}
        body.append(obj)
    nodes = sum(1 for o in body if "node" in o)
    rels = sum(1 for o in body if "rel" in o)
    with open(target, "w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        for obj in body:
            out.write(json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n")
        out.write(json.dumps({"end": True, "nodes": nodes, "relationships": rels}) + "\n")
    return {"hardware": len(mapping), "nodes": rewritten}


def _remap(end: list[Any], mapping: Mapping[str, str]) -> list[Any]:
    return [end[0], mapping.get(end[1], end[1])] if end[0] == "Hardware" else end
