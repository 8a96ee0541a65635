"""What an identity may do in a namespace. The server decides; nothing the client sends counts.

=========  ==========================================================================
read       the key has ``read`` and its team owns the namespace, is one it is shared
           with, or the namespace is public
write      the key has ``write`` and its team owns the namespace (attempts, runs,
           import; every write is stamped with the key's team)
admin      the key has ``admin`` and its team owns the namespace (prune, sharing);
           an ``admin`` key may also create namespaces for its team, explicitly or by
           its first write into a name nobody owns
=========  ==========================================================================

A namespace the caller may not read answers 404 whether it exists or not (its name and
contents are not revealed); one it may read but not write (or administer) answers 403.
"""

from __future__ import annotations

from kope.server.auth import Identity
from kope.server.errors import ForbiddenError, NamespaceNotFoundError
from kope.server.registry import Namespace, Registry, check_name

ACTIONS = ("read", "write", "admin")


def authorize(registry: Registry, who: Identity, namespace: str, action: str) -> Namespace:
    """The namespace if ``who`` may ``action`` it; else ``ForbiddenError`` / ``NamespaceNotFoundError``."""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    check_name(namespace, "namespace")
    ns = registry.namespace(namespace)
    if ns is None:
        if action != "read" and who.has("admin"):
            return registry.create_namespace(namespace, who.team, by=who.key_id)
        if action != "read":
            raise NamespaceNotFoundError(
                f"no namespace {namespace!r} on this server",
                hint="a key with the admin scope creates it (its first write does), or ask the server's operator",
            )
        raise NamespaceNotFoundError(f"no namespace {namespace!r} readable by team {who.team!r}")
    readable = ns.readable_by(who.team)
    if action == "read":
        if not readable:
            raise NamespaceNotFoundError(f"no namespace {namespace!r} readable by team {who.team!r}")
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
