"""The Cypher catalog: every statement KOPE runs lives in ``cypher/`` as a file.

A statement's name is its path below ``cypher/`` without the ``.cypher``
suffix, e.g. ``memory/record_attempt``. A file holds one parameterised
statement; an optional first line ``// mode: read`` routes it to readers
(default: write). ``schema.cypher``-style files with several statements
separated by ``;`` are read with :meth:`CypherCatalog.statements`.

Values are never formatted into Cypher. Where a label or relationship type
must vary, it is checked against an allow-list with :func:`check_identifier`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from kope._resources import resource_dir
from kope.errors import CatalogError

Mode = Literal["read", "write"]
_MODE_LINE = re.compile(r"^\s*//\s*mode:\s*(read|write)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Statement:
    name: str
    text: str
    mode: Mode


def cypher_root() -> Path:
    """The folder holding the shipped .cypher files (the repository's cypher/)."""
    return resource_dir("cypher")


def _strip_comments(text: str) -> str:
    lines = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("//"):
            continue
        lines.append(line)
    return "\n".join(lines).strip()


class CypherCatalog:
    """Loads every ``.cypher`` file once; raises on an unknown name."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cypher_root()
        self._statements: dict[str, Statement] = {}
        self._raw: dict[str, str] = {}
        for path in sorted(self.root.rglob("*.cypher")):
            name = path.relative_to(self.root).with_suffix("").as_posix()
            raw = path.read_text(encoding="utf-8")
            self._raw[name] = raw
            first = raw.splitlines()[0] if raw.strip() else ""
            match = _MODE_LINE.match(first)
            mode: Mode = "read" if match and match.group(1).lower() == "read" else "write"
            self._statements[name] = Statement(name, _strip_comments(raw), mode)

    def names(self) -> list[str]:
        return sorted(self._statements)

    def get(self, name: str) -> Statement:
        try:
            return self._statements[name]
        except KeyError:
            raise CatalogError(
                f"no Cypher statement named {name!r} in {self.root}",
                hint="statement names are paths below cypher/ without .cypher",
            ) from None

    def statements(self, name: str) -> list[str]:
        """Split a multi-statement file (such as the schema) on ``;``."""
        self.get(name)
        body = _strip_comments(self._raw[name])
        return [part.strip() for part in body.split(";") if part.strip()]


@lru_cache(maxsize=1)
def default_catalog() -> CypherCatalog:
    return CypherCatalog()


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_identifier(value: str, allowed: Iterable[str], what: str = "label") -> str:
    """Allow-list check for a label or relationship type that must vary in a query."""
    allowed_set = set(allowed)
    if value not in allowed_set or not _IDENT.match(value):
        raise CatalogError(f"{what} {value!r} is not allowed here (allowed: {', '.join(sorted(allowed_set))})")
    return value
