"""The server's registry, keys and ACL as a library (no server, no Neo4j)."""

from __future__ import annotations

import pytest

from kope.server import acl
from kope.server.auth import Authenticator, issue_key
from kope.server.errors import AuthenticationError, ForbiddenError, NamespaceNotFoundError, RegistryError
from kope.server.registry import Registry


@pytest.fixture
def registry(tmp_path):
    return Registry(tmp_path / "registry.sqlite3")


def who(registry, team, scopes="read,write"):
    return Authenticator(registry).identify("Bearer " + issue_key(registry, team, scopes)[1])


def test_a_new_teams_first_key_creates_the_team_and_its_private_home_namespace(registry):
    identity = who(registry, "alpha")
    assert (identity.team, identity.home, identity.scopes) == ("alpha", "alpha", ("read", "write"))
    ns = registry.namespace("alpha")
    assert (ns.owner, ns.visibility, ns.shared_with) == ("alpha", "private", ())


def test_a_verified_token_is_remembered_only_as_a_digest_and_revocation_applies_at_once(registry):
    record, token = issue_key(registry, "alpha", "read")
    auth = Authenticator(registry)
    assert auth.needs_hash_check("Bearer " + token)
    auth.identify("Bearer " + token)
    assert not auth.needs_hash_check("Bearer " + token)
    assert token not in repr(auth.__dict__)
    registry.revoke(record.id)
    with pytest.raises(AuthenticationError, match="unknown or revoked"):
        auth.identify("Bearer " + token)


def test_read_access_follows_owner_sharing_and_public(registry):
    a, b, c = who(registry, "alpha"), who(registry, "beta"), who(registry, "gamma")
    with pytest.raises(NamespaceNotFoundError):
        acl.authorize(registry, b, "alpha", "read")
    registry.set_sharing("alpha", "shared", ["beta"])
    assert acl.authorize(registry, b, "alpha", "read").owner == "alpha"
    with pytest.raises(NamespaceNotFoundError):
        acl.authorize(registry, c, "alpha", "read")
    registry.set_sharing("alpha", "public")
    assert acl.authorize(registry, c, "alpha", "read").name == "alpha"
    assert [n.name for n in acl.readable(registry, c)] == ["alpha", "gamma"]
    assert acl.authorize(registry, a, "alpha", "write").name == "alpha"


def test_only_the_owner_team_writes_and_only_its_admin_keys_prune_or_create(registry):
    b_writer, b_admin = who(registry, "beta"), who(registry, "beta", "read,write,admin")
    who(registry, "alpha")
    registry.set_sharing("alpha", "public")
    for identity in (b_writer, b_admin):
        for action in ("write", "admin"):
            with pytest.raises(ForbiddenError, match="not team 'beta'"):
                acl.authorize(registry, identity, "alpha", action)
    with pytest.raises(ForbiddenError, match="no admin scope"):
        acl.authorize(registry, b_writer, "beta", "admin")
    with pytest.raises(NamespaceNotFoundError, match="inside its team's prefix"):
        acl.authorize(registry, b_writer, "beta.new", "write", lambda ns: False)
    for outside in ("beta-new", "gamma", "default", "beta."):  # only "beta.<name>" is the team's to create
        with pytest.raises(NamespaceNotFoundError):
            acl.authorize(registry, b_admin, outside, "write", lambda ns: False)
    with pytest.raises(ForbiddenError, match="already holds data"):
        acl.authorize(registry, b_admin, "beta.bolt", "write", lambda ns: True)
    created = acl.authorize(registry, b_admin, "beta.new", "write", lambda ns: False)
    assert (created.owner, created.visibility) == ("beta", "private")


def test_bad_names_and_acls_are_refused(registry):
    who(registry, "alpha")
    for bad in ("", "a/b", "x' OR 1=1", "-lead", "a" * 65):
        with pytest.raises(RegistryError):
            registry.create_namespace(bad, "alpha")
    with pytest.raises(RegistryError, match="exists already"):
        registry.create_namespace("alpha", "alpha")
    with pytest.raises(RegistryError, match="exactly when"):
        registry.set_sharing("alpha", "shared", [])
    with pytest.raises(RegistryError, match="no team 'nobody'"):
        registry.set_sharing("alpha", "shared", ["nobody"])
    with pytest.raises(RegistryError, match="already belongs"):
        registry.create_namespace("omega", "alpha")
        registry.ensure_team("omega")


def test_the_audit_log_is_filtered_and_newest_first(registry):
    rows = [
        {"ts": float(i), "key_id": "k", "team": team, "method": "GET", "path": "/x", "namespace": ns,
         "action": "stats", "status": 200, "detail": {"i": i}, "client": "127.0.0.1"}
        for i, (team, ns) in enumerate([("alpha", "alpha"), ("beta", "alpha"), ("alpha", "beta")])
    ]  # fmt: skip
    registry.append_audit(rows)
    assert [r["detail"]["i"] for r in registry.audit()] == [2, 1, 0]
    assert [r["detail"]["i"] for r in registry.audit(team="alpha")] == [2, 0]
    assert [r["detail"]["i"] for r in registry.audit(namespace="alpha", since=1.0)] == [1]
