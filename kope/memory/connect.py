"""``open_memory``: the memory a command uses, chosen by the configuration.

With ``[memory] url`` (``KOPE_MEMORY_URL``) set: ``RemoteMemory``, the shared memory server
(``kope serve``) with the key in ``[memory] token`` (``KOPE_MEMORY_TOKEN``); otherwise
``ExperienceGraph``, direct to Neo4j over Bolt. Both implement ``kope.memory.protocol.Memory``
and journal locally first, so the loop, the context, the bench and ``kope memory ...`` do not
care which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kope.config import KopeConfig
    from kope.memory.protocol import Memory


def open_memory(config: KopeConfig | None = None, *, namespace: str | None = None, journal: bool = True) -> Memory:
    """The memory of ``config`` (default: ``load_config()``), journaling under ``<data dir>/memory``
    unless ``journal`` is false."""
    from kope.config import load_config

    config = config or load_config()
    if config.memory.remote:
        from kope.memory.remote import RemoteMemory

        return RemoteMemory.from_config(config, namespace=namespace, journal=journal)
    from kope.memory.graph import ExperienceGraph

    return ExperienceGraph.from_config(config, namespace=namespace, journal=journal)
