"""The server's registry: teams, namespaces (owner + read ACL), keys and the audit log, in SQLite.

Why a SQLite file next to the server and not Neo4j: Neo4j Community has no roles, so anyone
given Bolt or Browser access to the experience graph (people are, to read it) could read or
add keys there; the registry stays where only the server's operator reaches it. It also keeps
authentication and the audit write of every request off the graph's transaction path (the
latency goal of the memory API), and ``kope serve keys ...`` works while Neo4j is down. WAL mode
lets the running server and the admin commands use the file at the same time; a revoked key
is refused on its next request, because every request reads its key row.

Tables::

    teams       name, home namespace, created_at
    namespaces  name, owner team, visibility (private | shared | public), created_at, created_by
    shares      namespace, team            (read access for "shared" namespaces)
    keys        id, team, scopes, argon2 hash of the secret, label, created_at, revoked_at
    audit       ts, key id, team, method, path, namespace, action, status, detail, client
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kope.server.errors import RegistryError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
TEAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")  # no '.': "<team>." is the team's own namespace prefix
RESERVED = frozenset({"default"})  # the graph's namespace of direct (Bolt) users: never a registry name
SCOPES = ("read", "write", "admin")
VISIBILITIES = ("private", "shared", "public")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS teams (
    name TEXT PRIMARY KEY,
    home TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS namespaces (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL REFERENCES teams(name),
    visibility TEXT NOT NULL CHECK (visibility IN ('private', 'shared', 'public')),
    created_at REAL NOT NULL,
    created_by TEXT
);
CREATE TABLE IF NOT EXISTS shares (
    namespace TEXT NOT NULL REFERENCES namespaces(name) ON DELETE CASCADE,
    team TEXT NOT NULL REFERENCES teams(name),
    PRIMARY KEY (namespace, team)
);
CREATE TABLE IF NOT EXISTS keys (
    id TEXT PRIMARY KEY,
    team TEXT NOT NULL REFERENCES teams(name),
    scopes TEXT NOT NULL,
    hash TEXT NOT NULL,
    label TEXT,
    created_at REAL NOT NULL,
    revoked_at REAL
);
CREATE TABLE IF NOT EXISTS audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    key_id TEXT,
    team TEXT,
    method TEXT NOT NULL,
    path TEXT NOT NULL,
    namespace TEXT,
    action TEXT,
    status INTEGER NOT NULL,
    detail TEXT,
    client TEXT
);
CREATE INDEX IF NOT EXISTS audit_team_ts ON audit (team, ts);
CREATE INDEX IF NOT EXISTS audit_ns_ts ON audit (namespace, ts);
"""


def check_name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise RegistryError(f"{what} must be 1-64 letters, digits, '_', '.', '-' (got {value!r})")
    return value


def check_team_name(value: Any) -> str:
    """A new team's name: a namespace name without '.' (so no team name is inside another team's prefix)."""
    check_name(value, "team")
    if not TEAM.match(value):
        raise RegistryError(f"a team name has no '.' (got {value!r}): '<team>.' is the prefix of its namespaces")
    if value.lower() in RESERVED:
        raise RegistryError(f"{value!r} is reserved (the graph's own namespace of direct users)")
    return str(value)


def team_prefix(team: str) -> str:
    """Names a team may create namespaces under by itself (with an admin key): ``<team>.<anything>``."""
    return f"{team}."


def parse_scopes(value: str | Iterable[str]) -> tuple[str, ...]:
    items = [s.strip() for s in (value.split(",") if isinstance(value, str) else value) if s.strip()]
    unknown = sorted(set(items) - set(SCOPES))
    if unknown or not items:
        raise RegistryError(f"scopes must be a comma-separated subset of {','.join(SCOPES)} (got {value!r})")
    return tuple(s for s in SCOPES if s in items)


@dataclass(frozen=True)
class Team:
    name: str
    home: str
    created_at: float


@dataclass(frozen=True)
class Namespace:
    name: str
    owner: str
    visibility: str
    shared_with: tuple[str, ...]
    created_at: float
    created_by: str | None = None

    def readable_by(self, team: str) -> bool:
        return team == self.owner or self.visibility == "public" or team in self.shared_with

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "owner": self.owner,
            "visibility": self.visibility,
            "shared_with": list(self.shared_with),
            "created_at": self.created_at,
        }


@dataclass(frozen=True)
class KeyRecord:
    id: str
    team: str
    scopes: tuple[str, ...]
    hash: str
    label: str | None
    created_at: float
    revoked_at: float | None

    def to_dict(self) -> dict[str, Any]:
        """What ``keys list`` shows (never the hash)."""
        return {
            "id": self.id,
            "team": self.team,
            "scopes": list(self.scopes),
            "label": self.label,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }


class Registry:
    """The registry file; safe to use from several threads and processes at once."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as db:
            db.executescript(_SCHEMA)
        try:
            self.path.chmod(0o600)  # key hashes and the audit log: the operator's only
        except OSError:
            pass

    def _connect(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            except sqlite3.Error as exc:
                raise RegistryError(f"cannot open the server registry {self.path}: {exc}") from None
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._local.db = db
        return db

    def _tx(self) -> _Transaction:
        return _Transaction(self._connect())

    # -- teams ----------------------------------------------------------------------------------
    def team(self, name: str) -> Team | None:
        row = self._connect().execute("SELECT * FROM teams WHERE name = ?", (name,)).fetchone()
        return Team(row["name"], row["home"], row["created_at"]) if row else None

    def teams(self) -> list[Team]:
        rows = self._connect().execute("SELECT * FROM teams ORDER BY name").fetchall()
        return [Team(r["name"], r["home"], r["created_at"]) for r in rows]

    def ensure_team(self, name: str) -> Team:
        """The team, created with its private home namespace (named like the team) if new."""
        check_name(name, "team")
        with self._tx() as db:
            row = db.execute("SELECT * FROM teams WHERE name = ?", (name,)).fetchone()
            if row:
                return Team(row["name"], row["home"], row["created_at"])
            check_team_name(name)
            self._check_case(db, name)
            now = time.time()
            taken = db.execute("SELECT owner FROM namespaces WHERE name = ?", (name,)).fetchone()
            if taken:
                raise RegistryError(
                    f"namespace {name!r} already belongs to team {taken['owner']!r}; pick another team name"
                )
            db.execute("INSERT INTO teams (name, home, created_at) VALUES (?, ?, ?)", (name, name, now))
            db.execute(
                "INSERT INTO namespaces (name, owner, visibility, created_at, created_by) VALUES (?, ?, 'private', ?, ?)",
                (name, name, now, "registry"),
            )
            return Team(name, name, now)

    # -- namespaces -----------------------------------------------------------------------------
    def namespace(self, name: str) -> Namespace | None:
        db = self._connect()
        row = db.execute("SELECT * FROM namespaces WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        shared = tuple(
            r["team"] for r in db.execute("SELECT team FROM shares WHERE namespace = ? ORDER BY team", (name,))
        )
        return Namespace(row["name"], row["owner"], row["visibility"], shared, row["created_at"], row["created_by"])

    def namespaces(self) -> list[Namespace]:
        names = [r["name"] for r in self._connect().execute("SELECT name FROM namespaces ORDER BY name")]
        return [ns for ns in (self.namespace(n) for n in names) if ns is not None]

    def create_namespace(
        self, name: str, owner: str, *, visibility: str = "private", shared_with: Sequence[str] = (), by: str = ""
    ) -> Namespace:
        check_name(name, "namespace")
        self._check_visibility(visibility, shared_with)
        if "." in name and not name.startswith(team_prefix(owner)):
            raise RegistryError(
                f"namespace {name!r} is inside team {name.split('.', 1)[0]!r}'s prefix: "
                f"names with a '.' start with their owner's name and a '.' ({team_prefix(owner)}...)"
            )
        with self._tx() as db:
            if db.execute("SELECT 1 FROM teams WHERE name = ?", (owner,)).fetchone() is None:
                raise RegistryError(
                    f"no team {owner!r} (a team is created with its first key: `kope serve keys create`)"
                )
            row = db.execute("SELECT owner FROM namespaces WHERE name = ?", (name,)).fetchone()
            if row is not None:
                raise RegistryError(f"namespace {name!r} exists already (owner: team {row['owner']})")
            self._check_case(db, name)
            db.execute(
                "INSERT INTO namespaces (name, owner, visibility, created_at, created_by) VALUES (?, ?, ?, ?, ?)",
                (name, owner, visibility, time.time(), by or None),
            )
            self._set_shares(db, name, shared_with)
        return self.namespace(name)  # type: ignore[return-value]  # written in this transaction, so not None

    def set_sharing(self, name: str, visibility: str, shared_with: Sequence[str] = ()) -> Namespace:
        """Replace the namespace's read ACL: private, shared with these teams, or public."""
        self._check_visibility(visibility, shared_with)
        with self._tx() as db:
            if db.execute("SELECT 1 FROM namespaces WHERE name = ?", (name,)).fetchone() is None:
                raise RegistryError(f"no namespace {name!r}")
            db.execute("UPDATE namespaces SET visibility = ? WHERE name = ?", (visibility, name))
            db.execute("DELETE FROM shares WHERE namespace = ?", (name,))
            self._set_shares(db, name, shared_with)
        return self.namespace(name)  # type: ignore[return-value]  # written in this transaction, so not None

    @staticmethod
    def _check_case(db: sqlite3.Connection, name: str) -> None:
        """Refuse a name that differs only in case from a team's or a namespace's (or from a reserved one)."""
        if name.lower() in RESERVED and name not in RESERVED:
            raise RegistryError(f"{name!r} differs only in case from the reserved name {name.lower()!r}")
        for table in ("teams", "namespaces"):
            row = db.execute(
                f"SELECT name FROM {table} WHERE lower(name) = lower(?) AND name <> ?", (name, name)
            )  # the table name comes from the tuple above
            other = row.fetchone()
            if other is not None:
                raise RegistryError(f"{name!r} differs only in case from the existing name {other['name']!r}")

    @staticmethod
    def _check_visibility(visibility: str, shared_with: Sequence[str]) -> None:
        if visibility not in VISIBILITIES:
            raise RegistryError(f"visibility must be one of {', '.join(VISIBILITIES)} (got {visibility!r})")
        if (visibility == "shared") != bool(shared_with):
            raise RegistryError("name the teams to share with exactly when the visibility is 'shared'")
        for team in shared_with:
            check_name(team, "team")

    @staticmethod
    def _set_shares(db: sqlite3.Connection, name: str, teams: Sequence[str]) -> None:
        for team in teams:
            if db.execute("SELECT 1 FROM teams WHERE name = ?", (team,)).fetchone() is None:
                raise RegistryError(f"no team {team!r} to share with")
            db.execute("INSERT OR IGNORE INTO shares (namespace, team) VALUES (?, ?)", (name, team))

    # -- keys -----------------------------------------------------------------------------------
    def add_key(self, key_id: str, team: str, scopes: Sequence[str], secret_hash: str, label: str | None) -> KeyRecord:
        self.ensure_team(team)
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO keys (id, team, scopes, hash, label, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (key_id, team, ",".join(scopes), secret_hash, label, now),
            )
        return KeyRecord(key_id, team, tuple(scopes), secret_hash, label, now, None)

    def key(self, key_id: str) -> KeyRecord | None:
        row = self._connect().execute("SELECT * FROM keys WHERE id = ?", (key_id,)).fetchone()
        return self._key(row) if row else None

    def keys(self, team: str | None = None) -> list[KeyRecord]:
        db = self._connect()
        if team is None:
            rows = db.execute("SELECT * FROM keys ORDER BY team, created_at").fetchall()
        else:
            rows = db.execute("SELECT * FROM keys WHERE team = ? ORDER BY created_at", (team,)).fetchall()
        return [self._key(r) for r in rows]

    def revoke(self, key_id: str) -> KeyRecord:
        with self._tx() as db:
            row = db.execute("SELECT * FROM keys WHERE id = ?", (key_id,)).fetchone()
            if row is None:
                raise RegistryError(f"no key {key_id!r}")
            if row["revoked_at"] is None:
                db.execute("UPDATE keys SET revoked_at = ? WHERE id = ?", (time.time(), key_id))
        return self.key(key_id)  # type: ignore[return-value]  # checked to exist above, so not None

    @staticmethod
    def _key(row: sqlite3.Row) -> KeyRecord:
        return KeyRecord(
            row["id"],
            row["team"],
            tuple(row["scopes"].split(",")),
            row["hash"],
            row["label"],
            row["created_at"],
            row["revoked_at"],
        )

    # -- audit ----------------------------------------------------------------------------------
    def append_audit(self, rows: Sequence[dict[str, Any]]) -> None:
        if not rows:
            return
        with self._tx() as db:
            db.executemany(
                "INSERT INTO audit (ts, key_id, team, method, path, namespace, action, status, detail, client) "
                "VALUES (:ts, :key_id, :team, :method, :path, :namespace, :action, :status, :detail, :client)",
                [dict(r, detail=json.dumps(r["detail"]) if r.get("detail") is not None else None) for r in rows],
            )

    def audit(
        self,
        *,
        team: str | None = None,
        namespace: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """The newest audit rows first, filtered."""
        where: list[str] = []
        args: list[Any] = []
        for column, value in (("team", team), ("namespace", namespace)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if since is not None:
            where.append("ts >= ?")
            args.append(since)
        sql = "SELECT * FROM audit" + (" WHERE " + " AND ".join(where) if where else "")
        rows = self._connect().execute(sql + " ORDER BY id DESC LIMIT ?", (*args, limit)).fetchall()
        out = []
        for r in rows:
            item = dict(r)
            item["detail"] = json.loads(item["detail"]) if item["detail"] else None
            out.append(item)
        return out


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: object, *_rest: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
