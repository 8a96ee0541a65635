"""Bearer keys: ``kope_<key id>_<secret>``, stored as an argon2 hash of the secret only.

``issue_key`` makes a token (printed once by ``kope serve keys create``); ``Authenticator``
turns an ``Authorization`` header into an ``Identity`` or raises ``AuthenticationError``.
The key id is public (it names the key in ``keys list`` and the audit log); the secret is
32 random bytes. Verifying an argon2 hash takes tens of milliseconds by design, so a token
verified once is remembered (as its SHA-256, never in clear) for the life of the process;
the key row itself is read on every request, so a revoked key is refused at once.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
from dataclasses import dataclass

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from kope.server.errors import AuthenticationError
from kope.server.registry import KeyRecord, Registry, check_name, parse_scopes

TOKEN = re.compile(r"^kope_([0-9a-f]{16})_([A-Za-z0-9_\-]{43})$")
_hasher = PasswordHasher()


@dataclass(frozen=True)
class Identity:
    """Who is asking: the key's id, its team and scopes (never the token)."""

    key_id: str
    team: str
    scopes: tuple[str, ...]
    home: str

    def has(self, scope: str) -> bool:
        return scope in self.scopes


def issue_key(registry: Registry, team: str, scopes: str, label: str | None = None) -> tuple[KeyRecord, str]:
    """Create a key for ``team`` (the team, with its home namespace, on first use); returns (record, token)."""
    check_name(team, "team")  # a new team's name is checked further by the registry
    parsed = parse_scopes(scopes)
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    record = registry.add_key(key_id, team, parsed, _hasher.hash(secret), label)
    return record, f"kope_{key_id}_{secret}"


def key_id_of(token: str) -> str | None:
    """The key id of a well-formed token (for the audit log of a failed attempt), else None."""
    match = TOKEN.match(token)
    return match.group(1) if match else None


class Authenticator:
    def __init__(self, registry: Registry) -> None:
        self.registry = registry
        self._verified: dict[str, str] = {}  # key id -> sha256 of the token that verified
        self._lock = threading.Lock()

    def needs_hash_check(self, header: str | None) -> str | None:
        """The key id when ``identify`` would verify an argon2 hash (a well-formed token of a known key that was
        not seen verified), else None: a token of an unknown key id costs one indexed read, not a hash."""
        token = _bearer(header)
        match = TOKEN.match(token) if token is not None else None
        if token is None or match is None:
            return None
        key_id = match.group(1)
        if self._verified.get(key_id) == hashlib.sha256(token.encode()).hexdigest():
            return None
        return key_id if self.registry.key(key_id) is not None else None

    def identify(self, header: str | None) -> Identity:
        token = _bearer(header)
        if token is None:
            raise AuthenticationError(
                "no bearer key: send `Authorization: Bearer kope_...`",
                hint="create one on the server with `kope serve keys create --team TEAM --scopes read,write`",
            )
        match = TOKEN.match(token)
        if match is None:
            raise AuthenticationError("malformed key: a KOPE key looks like kope_<16 hex>_<43 characters>")
        key_id, secret = match.groups()
        record = self.registry.key(key_id)
        if record is None or record.revoked_at is not None:
            raise AuthenticationError("unknown or revoked key")
        digest = hashlib.sha256(token.encode()).hexdigest()
        if self._verified.get(key_id) != digest:
            try:
                _hasher.verify(record.hash, secret)
            except (VerifyMismatchError, VerificationError, InvalidHashError):
                raise AuthenticationError("unknown or revoked key") from None
            with self._lock:
                self._verified[key_id] = digest
        team = self.registry.team(record.team)
        return Identity(record.id, record.team, record.scopes, team.home if team else record.team)


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()
