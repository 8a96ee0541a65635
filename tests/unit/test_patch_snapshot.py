"""harness.guards.PatchSnapshot: what the candidate worker's patch check sees (in this process, no worker)."""

from __future__ import annotations

import harness.worker_timed as worker_timed
from harness.guards import PatchSnapshot
from harness.worker_timed import TimedCalls


def _other(self, tensors):
    return []


def test_an_untouched_process_shows_no_changes():
    assert PatchSnapshot().changes() == []


def test_a_replaced_method_of_a_harness_class_is_reported(monkeypatch):
    snapshot = PatchSnapshot()
    monkeypatch.setattr(TimedCalls, "remote", _other)
    assert "harness.worker_timed.TimedCalls.remote was replaced" in snapshot.changes()
    monkeypatch.undo()
    assert snapshot.changes() == []


def test_a_swapped_code_object_is_reported_although_the_function_is_the_same(monkeypatch):
    snapshot = PatchSnapshot()
    monkeypatch.setattr(TimedCalls.remote, "__code__", _other.__code__)
    assert snapshot.changes() == ["harness.worker_timed.TimedCalls.remote had its code replaced"]


def test_a_method_added_to_a_harness_class_is_reported(monkeypatch):
    snapshot = PatchSnapshot()
    monkeypatch.setattr(TimedCalls, "__getattribute__", lambda self, name: object.__getattribute__(self, name), False)
    assert snapshot.changes() == ["harness.worker_timed.TimedCalls.__getattribute__ was added"]


def test_an_instance_attribute_that_shadows_a_method_is_reported():
    timed = TimedCalls(None, None)
    snapshot = PatchSnapshot(instances=[("timed", timed)])
    timed.inputs = [[1]]  # data attributes change all the time
    assert snapshot.changes() == []
    timed.fetch = lambda: ([], [])  # type: ignore[method-assign]
    assert snapshot.changes() == ["timed.fetch shadows the method of TimedCalls"]


def test_a_replaced_module_level_name_is_still_reported(monkeypatch):
    snapshot = PatchSnapshot()
    monkeypatch.setattr(worker_timed, "make_inputs", lambda *a: [])
    assert snapshot.changes() == ["harness.worker_timed.make_inputs was replaced"]


def test_the_list_is_capped(monkeypatch):
    snapshot = PatchSnapshot()
    for name in ("prepare", "go", "fetch", "remote", "reused_buffer"):
        monkeypatch.setattr(TimedCalls, name, _other)
    assert len(snapshot.changes(limit=3)) == 3


def test_a_code_swapped_before_a_space_is_added_is_still_reported(monkeypatch):
    """``add`` (the task module, after the candidate's import and model build) must not take the state it finds as the
    baseline of the fast check: the next check is a full one against the members as first seen."""
    import types

    snapshot = PatchSnapshot()
    monkeypatch.setattr(TimedCalls.remote, "__code__", _other.__code__)
    snapshot.add("task", types.ModuleType("task"))
    assert snapshot.changes() == ["harness.worker_timed.TimedCalls.remote had its code replaced"]
    assert snapshot.changes() == ["harness.worker_timed.TimedCalls.remote had its code replaced"]


def test_benign_churn_is_not_reported_and_the_check_stays_cheap(monkeypatch):
    """A function that gains a ``__dict__`` (its referents change) sends one check the full way, which finds
    nothing; after it the cheap check holds again. Cheap: no ``__code__`` read per function, each an audit event
    in the candidate's worker (~1,500 of them a call made the patch check ~2 ms of every fetch)."""
    import sys

    snapshot = PatchSnapshot()
    monkeypatch.setattr(TimedCalls.remote, "kope_test_mark", True, raising=False)
    assert snapshot.changes() == []
    reads: list[str] = []
    counting = [True]
    sys.addaudithook(lambda event, args: reads.append(event) if counting[0] and event == "object.__getattr__" else None)
    try:
        assert snapshot.changes() == []
    finally:
        counting[0] = False
    assert len(reads) < 100, len(reads)


def test_a_name_moved_in_a_rebuilt_namespace_is_reported():
    """The cheap check compares names and values in order: a namespace rebuilt with the same values in the same
    order under another name is a change (the full check then names it)."""
    import types

    space = types.ModuleType("space")
    space.first, space.second = (lambda: 1), (lambda: 2)
    snapshot = PatchSnapshot(extra=[("space", space)])
    values = [space.first, space.second]
    del space.first, space.second
    space.other, space.second = values
    assert snapshot.changes() == ["space.first was deleted"]
