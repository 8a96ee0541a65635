"""What an identity may do in a namespace. The server decides; nothing the client sends counts.

=========  ==========================================================================
read       the key has ``read`` and its team owns the namespace, is one it is shared
           with, or the namespace is public
write      the key has ``write`` and its team owns the namespace (attempts, runs,
           import; every write is stamped with the key's team)
admin      the key has ``admin`` and its team owns the namespace (prune, sharing);
           an ``admin`` key may also create namespaces for its team inside the team's
           prefix (``<team>.<name>``), explicitly or by its first write, and never over
           data the graph holds already under that name (the operator creates the rest)
=========  ==========================================================================

A namespace the caller may not read answers 404 whether it exists or not, for every
action (its name and contents are not revealed); one it may read but not write (or
administer) answers 403.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kope.server.auth import Identity
from kope.server.errors import ForbiddenError, NamespaceNotFoundError
from kope.server.registry import Namespace, Registry, check_name, team_prefix

ACTIONS = ("read", "write", "admin")


def may_create(who: Identity, namespace: str) -> bool:
    """Whether ``who`` may create ``namespace`` itself: an admin key, a name inside its team's prefix."""
    prefix = team_prefix(who.team)
    return who.has("admin") and namespace.startswith(prefix) and len(namespace) > len(prefix)


def create_for_team(
    registry: Registry,
    who: Identity,
    namespace: str,
    holds_data: Callable[[str], bool],
    visibility: str = "private",
    shared_with: Sequence[str] = (),
) -> Namespace:
    """Create ``namespace`` for ``who``'s team, or ``ForbiddenError`` (outside its prefix, or data there)."""
    if not may_create(who, namespace):
        raise ForbiddenError(
            f"team {who.team!r} may create namespaces only inside its prefix {team_prefix(who.team)!r} "
            "(with an admin key); the server's operator creates the others"
        )
    if holds_data(namespace):
        raise ForbiddenError(
            f"the graph already holds data under {namespace!r} that this server did not write; "
            "only the server's operator can decide who owns it"
        )
    return registry.create_namespace(namespace, who.team, visibility=visibility, shared_with=shared_with, by=who.key_id)


def _not_found(who: Identity, namespace: str) -> NamespaceNotFoundError:
    return NamespaceNotFoundError(
        f"no namespace {namespace!r} readable by team {who.team!r}",
        hint=f"an admin key creates names inside its team's prefix ({team_prefix(who.team)}...) by its first "
        "write; the server's operator creates the others",
    )


def authorize(
    registry: Registry,
    who: Identity,
    namespace: str,
    action: str,
    holds_data: Callable[[str], bool] | None = None,
) -> Namespace:
    """The namespace if ``who`` may ``action`` it; else ``ForbiddenError`` / ``NamespaceNotFoundError``.
    ``holds_data`` (whether the graph has data under a name) allows a write to create a namespace."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    check_name(namespace, "namespace")
    ns = registry.namespace(namespace)
    if ns is None:
        if action != "read" and holds_data is not None and may_create(who, namespace):
            return create_for_team(registry, who, namespace, holds_data)
        raise _not_found(who, namespace)
    if not ns.readable_by(who.team):  # the same answer as a missing namespace, for every action
        raise _not_found(who, namespace)
    if action == "read":
        if not who.has("read"):
            raise ForbiddenError(f"key {who.key_id} has no read scope")
        return ns
    if ns.owner != who.team:
        raise ForbiddenError(
            f"namespace {namespace!r} is not team {who.team!r}'s: only its owner team may "
            + ("write to it" if action == "write" else "prune it or change its sharing")
        )
    if not who.has(action):
        raise ForbiddenError(f"key {who.key_id} has no {action} scope")
    return ns


def readable(registry: Registry, who: Identity) -> list[Namespace]:
    if not who.has("read"):
        return []
    return [ns for ns in registry.namespaces() if ns.readable_by(who.team)]
