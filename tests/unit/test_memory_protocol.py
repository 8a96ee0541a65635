"""ExperienceGraph is the Neo4j-backed implementation of the memory protocol everything above memory uses."""

import inspect

import pytest

from kope.memory import ContextMemory, ExperienceGraph, Memory, Retriever, StateReader

MEMBERS = sorted(
    name
    for protocol in (Memory, ContextMemory, Retriever, StateReader)
    for name, value in vars(protocol).items()
    if not name.startswith("_") or name in ("__enter__", "__exit__")
    if callable(value) or isinstance(value, property)
)


def test_the_protocol_names_the_operations_the_layers_above_need():
    for name in ("start_run", "record_attempts", "finish_run", "retrieve", "step_state", "run_state", "lineage"):
        assert name in MEMBERS
    for name in ("stats", "export_to", "import_from", "sync", "prune"):
        assert name in MEMBERS


@pytest.mark.parametrize("name", MEMBERS)
def test_experience_graph_implements_every_member_with_the_same_parameters(name):
    protocol = next(p for p in (Memory, ContextMemory, Retriever, StateReader) if name in vars(p))
    wanted = vars(protocol)[name]
    if isinstance(wanted, property):
        assert name in vars(ExperienceGraph) or name in inspect.signature(ExperienceGraph.__init__).parameters
        return
    got = getattr(ExperienceGraph, name)
    assert list(inspect.signature(got).parameters) == list(inspect.signature(wanted).parameters)
