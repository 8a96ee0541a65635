"""Export and import a namespace as JSON Lines (``kope memory export`` / ``import``).

Format ``kope.memory`` version 2, one JSON object per line, UTF-8::

    {"format": "kope.memory", "version": 2, "namespace": "default", "exported_at": "...", "kope": "0.1.0"}
    {"node": "Operator", "id": "softmax", "props": {...}}              every node, label by label, in id order
    {"rel": "FROM", "from": ["Decision", "<id>"], "to": ["Decision", "<id>"], "props": {}}
    {"end": true, "nodes": 1234, "relationships": 5678}                 trailer: detects a truncated file

Ids are namespace-local, so a file can be imported into any namespace; the
importer MERGEs on ``"<namespace>/<id>"``. Import is idempotent (importing a
file twice changes nothing) and merges: two teams importing each other's
exports end up with the union (run ids are unique per run; kernels, operators,
hardware and tasks have content-derived ids and merge). Afterwards the
namespace's insights are distilled again from the merged evidence.

What only serves people reading the graph (``kope.memory.present``: outcome-class
and other extra labels, captions, datetimes) is derived, not exported: the
importer derives it again from the imported facts.

Version 2 (issue 31) names an Outcome's measured speedup ``speedup`` (as the harness's record does) and the
usable one, the decision's ``a``, ``speedup_usable``. Version 1 files (``speedup`` = usable,
``speedup_measured`` = measured) are still read: their Outcome properties are converted on reading. A version 2
file that still holds ``speedup_measured`` is refused (its ``speedup`` could mean either number).
"""

from __future__ import annotations

import datetime as _dt
import functools
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from kope import __version__
from kope.boundary import STATUSES
from kope.db.client import GraphClient, Tx
from kope.memory import present
from kope.memory.errors import ExportFormatError, InvalidRecordError
from kope.memory.ids import check_local_id, uid

FORMAT = "kope.memory"
VERSION = 2
READS_VERSIONS = (1, 2)  # version 1: the old Outcome speedup names, converted on reading (_outcome_props)
NODE_LABELS = ("Operator", "Hardware", "Task", "Run", "Kernel", "Decision", "Outcome", "Knowledge", "Insight")
REL_SOURCES = ("Task", "Run", "Decision", "Insight")
REL_KEYS = frozenset(
    {
        ("FOR_TASK", "Run", "Task"),
        ("ON_HARDWARE", "Run", "Hardware"),
        ("INCUMBENT", "Run", "Decision"),
        ("OF_OPERATOR", "Task", "Operator"),
        ("IN_RUN", "Decision", "Run"),
        ("PRODUCED", "Decision", "Outcome"),
        ("WROTE", "Decision", "Kernel"),
        ("FROM", "Decision", "Decision"),
        ("NEXT", "Decision", "Decision"),
        ("USED", "Decision", "Decision"),
        ("USED", "Decision", "Insight"),
        ("USED", "Decision", "Knowledge"),
        ("DERIVED_FROM", "Insight", "Outcome"),
        ("ABOUT", "Insight", "Operator"),
        ("ABOUT", "Insight", "Hardware"),
    }
)
INTERNAL = frozenset({"uid", "ns", "_lock"}) | present.DERIVED_PROPERTIES
_NUMBER = (int, float)
# Properties every node of a label must hold (KOPE writes them with every node): a file without them is refused
# whole, before anything is written (an empty Decision would break every later read of the namespace).
REQUIRED: dict[str, dict[str, tuple[type, ...]]] = {
    "Decision": {"step": (int,), "title": (str,), "status": (str,), "r": _NUMBER},
    "Run": {"operator": (str,), "started_at": _NUMBER},
    "Kernel": {"source": (str,)},
}
PAGE = 2000
BATCH = 1000


@dataclass
class TransferReport:
    namespace: str
    nodes: dict[str, int] = field(default_factory=dict)
    relationships: dict[str, int] = field(default_factory=dict)

    @property
    def node_total(self) -> int:
        return sum(self.nodes.values())

    @property
    def relationship_total(self) -> int:
        return sum(self.relationships.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "nodes": self.nodes,
            "relationships": self.relationships,
            "node_total": self.node_total,
            "relationship_total": self.relationship_total,
        }


def _public(props: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in sorted(props.items()) if k not in INTERNAL}


def _pages(client: GraphClient, statement: str, prefix: str, **params: Any) -> Iterator[dict[str, Any]]:
    after = ""
    while True:
        rows = client.execute(statement, prefix=prefix, after=after, limit=PAGE, **params)
        yield from rows
        if len(rows) < PAGE:
            return
        after = rows[-1]["uid"]


def export_namespace(client: GraphClient, ns: str, out: IO[str]) -> TransferReport:
    report = TransferReport(ns)
    prefix = f"{ns}/"
    header = {
        "format": FORMAT,
        "version": VERSION,
        "namespace": ns,
        "kope": __version__,
        "exported_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    out.write(json.dumps(header) + "\n")

    def dumps(obj: dict[str, Any]) -> str:
        return json.dumps(obj, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"

    for label in NODE_LABELS:
        for row in _pages(client, f"memory/transfer/nodes_{label.lower()}", prefix):
            out.write(dumps({"node": label, "id": row["uid"][len(prefix) :], "props": _public(row["props"])}))
            report.nodes[label] = report.nodes.get(label, 0) + 1
    for label in REL_SOURCES:
        for row in _pages(client, f"memory/transfer/rels_{label.lower()}", prefix, labels=list(NODE_LABELS)):
            source = row["uid"][len(prefix) :]
            for rel in row["rels"]:
                out.write(
                    dumps(
                        {
                            "rel": rel["type"],
                            "from": [label, source],
                            "to": [rel["to_label"], rel["to"]],
                            "props": _public(rel["props"]),
                        }
                    )
                )
                report.relationships[rel["type"]] = report.relationships.get(rel["type"], 0) + 1
    out.write(json.dumps({"end": True, "nodes": report.node_total, "relationships": report.relationship_total}) + "\n")
    return report


def _check_id(value: Any, where: str) -> None:
    """Ids in a file must use the documented id alphabet (``kope.memory.ids``), like every id KOPE writes."""
    try:
        check_local_id(value, where)
    except InvalidRecordError as exc:
        raise ExportFormatError(exc.message) from None


def _check_required(obj: dict[str, Any], where: str) -> None:
    label, props = obj["node"], obj["props"]
    for key, kinds in REQUIRED.get(label, {}).items():
        value = props.get(key)
        if not isinstance(value, kinds) or isinstance(value, bool):
            raise ExportFormatError(
                f"{where}: {label} {obj['id']!r} lacks {key!r} (or it has the wrong type): "
                f"every {label} of an export holds {', '.join(REQUIRED[label])}"
            )
    if label == "Decision" and props["status"] not in STATUSES:
        raise ExportFormatError(f"{where}: Decision {obj['id']!r} has status {props['status']!r}, not a harness status")


def _outcome_props(props: dict[str, Any], version: Any, where: str) -> dict[str, Any]:
    """An Outcome's properties under the current names: a version 1 file's ``speedup`` is the usable speedup and
    its ``speedup_measured`` the measured one; a version 2 file must not use the old name."""
    if version != 1:
        if "speedup_measured" in props:
            raise ExportFormatError(
                f"{where} holds speedup_measured, the version 1 name, in a version {version} file: "
                "its speedup could mean either number",
                hint="export it again with this KOPE, or give the file version 1 if it was written before issue 31",
            )
        return props
    props = dict(props)
    usable, measured = props.pop("speedup", None), props.pop("speedup_measured", None)
    if usable is not None:
        props["speedup_usable"] = usable
    if measured is not None:
        props["speedup"] = measured
    return props


def _check_value(value: Any, where: str) -> None:
    scalar = (str, int, float, bool, type(None))
    if isinstance(value, scalar):
        return
    if isinstance(value, list) and all(isinstance(v, scalar) and v is not None for v in value):
        return
    raise ExportFormatError(f"{where}: property values must be strings, numbers, booleans or lists of them")


# First bytes of files people mistake for an export: compressed or archived ones.
MAGIC = {
    b"\x1f\x8b": ("gzip-compressed", "gunzip -c FILE | kope memory import -"),
    b"BZh": ("bzip2-compressed", "bunzip2 -c FILE | kope memory import -"),
    b"\xfd7zXZ\x00": ("xz-compressed", "xz -dc FILE | kope memory import -"),
    b"\x28\xb5\x2f\xfd": ("zstd-compressed", "zstd -dc FILE | kope memory import -"),
    b"PK\x03\x04": ("a zip archive", "unzip -p FILE | kope memory import -"),
}


def binary_kind(head: bytes) -> tuple[str, str] | None:
    """(what the file is, how to read it) when its first bytes show a compressed or binary file; None for text."""
    for magic, found in MAGIC.items():
        if head.startswith(magic):
            return found
    if b"\x00" in head:
        return "a binary file", "give the JSON Lines file `kope memory export` wrote"
    return None


def _lines(stream: IO[str], source: str) -> Iterator[tuple[int, str]]:
    number = 0
    try:
        for number, line in enumerate(stream, start=1):  # number is read after the loop fails
            yield number, line
    except UnicodeDecodeError:
        raise ExportFormatError(
            f"{source}:{number + 1}: not UTF-8 text (a compressed or binary file?): a memory export is the JSON Lines "
            "file `kope memory export` writes",
            hint="decompress it first (e.g. gunzip -c FILE | kope memory import -)",
        ) from None


def _parse(
    stream: IO[str], source: str
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    header: dict[str, Any] | None = None
    version: Any = None
    trailer: dict[str, Any] | None = None
    nodes: list[dict[str, Any]] = []
    rels: list[dict[str, Any]] = []
    for number, line in _lines(stream, source):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ExportFormatError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise ExportFormatError(f"{where}: expected a JSON object")
        if header is None:
            if obj.get("format") != FORMAT:
                raise ExportFormatError(
                    f"{where}: not a KOPE memory export (the first line must name format {FORMAT!r})"
                )
            if obj.get("version") not in READS_VERSIONS:
                raise ExportFormatError(
                    f"{where}: export format version {obj.get('version')!r} is not supported "
                    f"(this KOPE reads versions {', '.join(map(str, READS_VERSIONS))})"
                )
            header, version = obj, obj["version"]
            continue
        if trailer is not None:
            raise ExportFormatError(f"{where}: content after the end marker")
        if obj.get("end") is True:
            trailer = obj
        elif "node" in obj:
            if (
                obj["node"] not in NODE_LABELS
                or not isinstance(obj.get("id"), str)
                or not isinstance(obj.get("props"), dict)
            ):
                raise ExportFormatError(
                    f"{where}: bad node line (label must be one of {', '.join(NODE_LABELS)}, with id and props)"
                )
            _check_id(obj["id"], f"{where}: {obj['node']} id")
            for key, value in obj["props"].items():
                _check_value(value, f"{where} {obj['node']}.{key}")
            _check_required(obj, where)
            if obj["node"] == "Outcome":
                obj["props"] = _outcome_props(obj["props"], version, f"{where}: Outcome {obj['id']!r}")
            nodes.append(obj)
        elif "rel" in obj:
            frm, to = obj.get("from"), obj.get("to")
            ok = (
                isinstance(frm, list)
                and isinstance(to, list)
                and len(frm) == 2
                and len(to) == 2
                and (obj["rel"], frm[0], to[0]) in REL_KEYS
                and isinstance(obj.get("props", {}), dict)
            )
            if not ok:
                raise ExportFormatError(
                    f"{where}: bad relationship line ({obj.get('rel')!r} is not an allowed type between these labels)"
                )
            assert isinstance(frm, list) and isinstance(to, list)  # ok checked them
            for end, label in ((frm, "from"), (to, "to")):
                _check_id(end[1], f"{where}: {obj['rel']} {label} id")
            for key, value in obj.get("props", {}).items():
                _check_value(value, f"{where} {obj['rel']}.{key}")
            rels.append(obj)
        else:
            raise ExportFormatError(f"{where}: a line must be a node, a relationship or the end marker")
    if header is None:
        raise ExportFormatError(f"{source}: empty file, not a KOPE memory export")
    if trailer is None:
        raise ExportFormatError(f"{source}: no end marker: the file is truncated")
    present = {(obj["node"], obj["id"]) for obj in nodes}
    for obj in rels:
        for end in (obj["from"], obj["to"]):
            if tuple(end) not in present:
                raise ExportFormatError(
                    f"{source}: a {obj['rel']} relationship points at {end[0]} {end[1]!r}, which the file does not hold"
                )
    if trailer.get("nodes") != len(nodes) or trailer.get("relationships") != len(rels):
        raise ExportFormatError(
            f"{source}: the end marker counts {trailer.get('nodes')} nodes and "
            f"{trailer.get('relationships')} relationships, the file holds {len(nodes)} and {len(rels)}"
        )
    return header, nodes, rels, trailer


def parse_export(stream: IO[str], source: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The nodes and relationships of a whole export file, validated (``ExportFormatError`` otherwise)."""
    _header, nodes, rels, _trailer = _parse(stream, source)
    return nodes, rels


def read_export(stream: IO[str], source: str = "<input>") -> str:
    """The whole text of an export (``ExportFormatError`` for a file that is not UTF-8 text, as the import says)."""
    return "".join(line for _number, line in _lines(stream, source))


def export_ids(text: str, source: str = "<input>") -> tuple[list[str], list[str]]:
    """Validate an export (as ``import_namespace`` does, raising ``ExportFormatError``); its run and decision ids
    (what the journal's ``import`` entry records, so that ``sync`` can tell whether the graph holds the import)."""
    _header, nodes, _rels, _trailer = _parse(io.StringIO(text), source)
    runs = sorted(obj["id"] for obj in nodes if obj["node"] == "Run")
    decisions = sorted(obj["id"] for obj in nodes if obj["node"] == "Decision")
    return runs, decisions


def import_namespace(client: GraphClient, ns: str, stream: IO[str], source: str = "<input>") -> TransferReport:
    """Validate the whole file first, then MERGE nodes and relationships into ``ns``
    (in batches of ``BATCH`` per transaction; an interrupted import is completed by running it again)."""
    _header, nodes, rels, _trailer = _parse(stream, source)
    report = TransferReport(ns)
    node_rows = []
    for obj in nodes:
        props = dict(obj["props"], ns=ns, id=obj["id"], uid=uid(ns, obj["id"]))
        node_rows.append({"label": obj["node"], "uid": props["uid"], "props": props})
        report.nodes[obj["node"]] = report.nodes.get(obj["node"], 0) + 1
    rel_rows = []
    for obj in rels:
        key = f"{obj['rel']}:{obj['from'][0]}:{obj['to'][0]}"
        rel_rows.append(
            {"key": key, "from": uid(ns, obj["from"][1]), "to": uid(ns, obj["to"][1]), "props": obj.get("props", {})}
        )
        report.relationships[obj["rel"]] = report.relationships.get(obj["rel"], 0) + 1

    for start in range(0, len(node_rows), BATCH):
        client.write(functools.partial(_run_rows, "memory/transfer/import_nodes", node_rows[start : start + BATCH]))
    for start in range(0, len(rel_rows), BATCH):
        batch = rel_rows[start : start + BATCH]
        linked = client.write(functools.partial(_run_rows, "memory/transfer/import_rels", batch))[0]["linked"]
        if linked != len(batch):
            raise ExportFormatError(f"{source}: {len(batch) - linked} relationships could not be linked")
    present.refresh_namespace(client, ns)
    return report


def _run_rows(statement: str, rows: list[dict[str, Any]], tx: Tx) -> list[dict[str, Any]]:
    return tx.run(statement, rows=rows)
