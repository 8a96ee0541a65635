"""Cold-tier knowledge documents: load, validate and select them.

The documents live in ``kope/knowledge/*.md`` (shipped in the wheel). Each
starts with YAML front-matter between two ``---`` lines::

    ---
    id: K-cpu-openmp
    title: OpenMP parallelization for CPU kernels
    targets: [cpu]
    families: [all]
    layers: [parallelization]
    hardware: [x86_64, aarch64]      # optional; prefixes of hardware classes
    ---
    body in Markdown ...

``load_knowledge()`` parses and validates every file (a bad one raises
``KnowledgeError`` naming the file and the field) into a
``kope.memory.KnowledgeDoc``, the one definition: the loop hands the same
objects to the memory, which stores them as Knowledge nodes. ``select_knowledge()``
returns the documents that apply to a target, family and hardware class,
ranked by a deterministic relevance score.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from kope.boundary import FAMILIES, LAYERS, TARGETS, UNKNOWN_FAMILY
from kope.errors import KopeError
from kope.memory.specs import KnowledgeDoc

ALL_FAMILIES = "all"

# Relevance score parts. An exact-family document always outranks an 'all'
# document: the bonuses together (0.75) stay below the family gap (1.0).
SCORE_EXACT_FAMILY = 2.0
SCORE_ALL_FAMILIES = 1.0
SCORE_LAYER = 0.5
SCORE_HARDWARE = 0.25

DEFAULT_FOLDER = Path(__file__).resolve().parents[1] / "knowledge"

_REQUIRED = ("id", "title", "targets", "families", "layers")
_OPTIONAL = ("hardware",)
_ID = re.compile(r"^K-[a-z0-9][a-z0-9-]*$")
_HARDWARE = re.compile(r"^[a-z0-9_]+(-[a-z0-9_]+)*$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)


class KnowledgeError(KopeError):
    """A knowledge document (or a selection request) is malformed."""

    exit_code = 2


# folder -> (signature of its *.md files, the parsed documents). The context
# is assembled before every attempt; re-parsing unchanged files would cost
# ~10 ms each time. Any added, removed or edited file changes the signature.
_CACHE: dict[Path, tuple[tuple[tuple[str, int, int], ...], tuple[KnowledgeDoc, ...]]] = {}


def load_knowledge(folder: str | Path | None = None) -> list[KnowledgeDoc]:
    """Parse and validate every ``*.md`` in ``folder`` (default: the shipped documents).

    Returns the documents sorted by id. Raises ``KnowledgeError`` for a missing
    or empty folder, a malformed file, or two files with the same id. Results
    are reused while no file in the folder changes (name, size, mtime).
    """
    root = Path(folder) if folder is not None else DEFAULT_FOLDER
    if not root.is_dir():
        raise KnowledgeError(f"knowledge folder not found: {root}")
    files = sorted(root.glob("*.md"))
    if not files:
        raise KnowledgeError(f"no knowledge documents (*.md) in {root}")
    signature = tuple((p.name, st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()])
    key = root.resolve()
    cached = _CACHE.get(key)
    if cached is not None and cached[0] == signature:
        return list(cached[1])
    docs = _parse_folder(files)
    _CACHE[key] = (signature, tuple(docs))
    return docs


def _parse_folder(files: list[Path]) -> list[KnowledgeDoc]:
    seen: dict[str, Path] = {}
    docs = []
    for path in files:
        doc = parse_knowledge_file(path)
        if doc.id in seen:
            raise KnowledgeError(f"{path}: field 'id': duplicate id {doc.id!r} (also in {seen[doc.id]})")
        seen[doc.id] = path
        docs.append(doc)
    return sorted(docs, key=lambda d: d.id)


def parse_knowledge_file(path: Path) -> KnowledgeDoc:
    """Read and validate one knowledge document."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KnowledgeError(f"{path}: cannot read: {exc}") from None
    match = _FRONT_MATTER.match(text)
    if not match:
        raise KnowledgeError(f"{path}: no front-matter (the file must start with '---', the YAML fields, then '---')")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())
        raise KnowledgeError(f"{path}: front-matter is not valid YAML: {detail}") from None
    if not isinstance(meta, dict):
        raise KnowledgeError(f"{path}: front-matter must be a mapping of fields, got {type(meta).__name__}")
    unknown = sorted(str(k) for k in meta if k not in _REQUIRED + _OPTIONAL)
    if unknown:
        raise KnowledgeError(
            f"{path}: field {unknown[0]!r}: unknown field (allowed: {', '.join(_REQUIRED + _OPTIONAL)})"
        )
    for name in _REQUIRED:
        if meta.get(name) in (None, "", []):
            raise KnowledgeError(f"{path}: field {name!r}: missing or empty")

    doc_id = meta["id"]
    if not isinstance(doc_id, str) or not _ID.match(doc_id):
        raise KnowledgeError(f"{path}: field 'id': {doc_id!r} must look like 'K-lowercase-words'")
    title = meta["title"]
    if not isinstance(title, str) or not title.strip():
        raise KnowledgeError(f"{path}: field 'title': must be a non-empty string")
    targets = _names(path, "targets", meta["targets"], TARGETS)
    families = _families(path, meta["families"])
    layers = _names(path, "layers", meta["layers"], LAYERS)
    hardware = _hardware(path, meta.get("hardware"))
    body = match.group(2).strip()
    if not body:
        raise KnowledgeError(f"{path}: field 'body': the document has no text after the front-matter")
    return KnowledgeDoc(
        id=doc_id,
        title=title.strip(),
        text=body,
        targets=targets,
        families=families,
        layers=layers,
        hardware=hardware,
        path=path,
    )


def select_knowledge(
    docs: Iterable[KnowledgeDoc],
    target: str,
    family: str,
    layer: str | None = None,
    hardware_class: str | None = None,
) -> list[tuple[KnowledgeDoc, float]]:
    """The documents that apply, best first, with their relevance score.

    A document applies when it names ``target``, names ``family`` (or 'all'),
    and either has no hardware restriction, or ``hardware_class`` is None, or
    one of its hardware prefixes matches the class (``x86_64`` matches
    ``x86_64-avx512``). Score: exact family 2.0 / 'all' 1.0, plus 0.5 when
    ``layer`` is among its layers, plus 0.25 when its hardware matches. Ties
    are broken by id, so the same inputs always give the same order.
    """
    if target not in TARGETS:
        raise KnowledgeError(f"unknown target {target!r} (expected one of {', '.join(TARGETS)})")
    if family not in FAMILIES and family != UNKNOWN_FAMILY:
        raise KnowledgeError(f"unknown family {family!r} (expected one of {', '.join(FAMILIES + (UNKNOWN_FAMILY,))})")
    if layer is not None and layer not in LAYERS:
        raise KnowledgeError(f"unknown layer {layer!r} (expected one of {', '.join(LAYERS)})")
    hw = hardware_class.strip().lower() if hardware_class else None

    ranked = []
    for doc in docs:
        if target not in doc.targets:
            continue
        if family in doc.families:
            score = SCORE_EXACT_FAMILY
        elif ALL_FAMILIES in doc.families:
            score = SCORE_ALL_FAMILIES
        else:
            continue
        if doc.hardware and hw is not None:
            if not doc.matches_hardware(hw):
                continue
            score += SCORE_HARDWARE
        if layer is not None and layer in doc.layers:
            score += SCORE_LAYER
        ranked.append((doc, score))
    ranked.sort(key=lambda pair: (-pair[1], pair[0].id))
    return ranked


def _string_list(path: Path, field: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise KnowledgeError(f"{path}: field {field!r}: must be a list of strings, e.g. [a, b]")
    if len(set(value)) != len(value):
        raise KnowledgeError(f"{path}: field {field!r}: repeated entries in {value}")
    return value


def _names(path: Path, field: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    names = _string_list(path, field, value)
    for name in names:
        if name not in allowed:
            raise KnowledgeError(
                f"{path}: field {field!r}: unknown value {name!r} (expected any of {', '.join(allowed)})"
            )
    return tuple(names)


def _families(path: Path, value: Any) -> tuple[str, ...]:
    names = _string_list(path, "families", value)
    if ALL_FAMILIES in names:
        if len(names) > 1:
            raise KnowledgeError(f"{path}: field 'families': 'all' cannot be combined with other families")
        return (ALL_FAMILIES,)
    return _names(path, "families", names, FAMILIES)


def _hardware(path: Path, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    names = _string_list(path, "hardware", value)
    if not names:
        raise KnowledgeError(f"{path}: field 'hardware': empty list (omit the field to mean any hardware)")
    for name in names:
        if not _HARDWARE.match(name):
            raise KnowledgeError(
                f"{path}: field 'hardware': {name!r} is not a hardware-class prefix such as x86_64 or nvidia-sm90"
            )
    return tuple(names)
