"""harness.guards.seal (taken inside the worker's go request), unseal and sealed_mismatch (the parent's side)."""

import pytest
import torch

import harness.guards as guards
from harness.guards import SEAL_CALLS, SEAL_ELEMENTS, seal, sealed_mismatch, unseal
from harness.worker_common import encode
from harness.worker_timed import native_seal


@pytest.fixture(autouse=True, params=["python", "native"])
def reader(request, monkeypatch):
    """Every test with each of the seal's readers: Python's, and the native one a CPU target's workers load."""
    monkeypatch.setattr(guards, "_seal_native", None)
    if request.param == "native":
        native_seal()
        assert guards._seal_native is not None
    return request.param


def fetched(outputs):
    """What the parent gets for ``outputs`` (one per call): the items' descriptions and the tensors, in order."""
    tensors: list[torch.Tensor] = []
    items = [{"seed": i, "output": encode(out, tensors)} for i, out in enumerate(outputs)]
    return items, tensors


def test_the_last_call_is_always_sealed_and_at_most_seal_calls_calls_are():
    outputs = [torch.randn(100) for _ in range(50)]
    for _ in range(20):
        calls = {entry["call"] for entry in seal(outputs)}
        assert 49 in calls and len(calls) <= SEAL_CALLS


def test_an_unchanged_output_passes_and_a_change_after_the_seal_is_named():
    outputs = [(torch.randn(300), torch.arange(7, dtype=torch.int64)) for _ in range(5)]  # two tensors a call
    sealed = seal(outputs)
    items, tensors = fetched(outputs)
    decoded = unseal(sealed, items)
    assert all(len(e["at"]) == SEAL_ELEMENTS == len(e["bits"]) for e in decoded)
    assert {e["i"] for e in decoded} >= {8, 9}  # the last call's two tensors, by their index among all fetched
    assert sealed_mismatch(decoded, tensors) is None
    tensors[8].fill_(float("nan"))  # filled after the seal
    assert sealed_mismatch(decoded, tensors) == "output 8 changed after the timed call returned"


def test_strided_half_and_bool_outputs_are_sealed_without_a_copy_in_logical_order():
    base = torch.randn(64, 48)
    outputs = [base.t(), base.to(torch.bfloat16)[:, ::2], torch.rand(33) > 0.5, torch.zeros(0)]
    sealed = seal([outputs])
    items, tensors = fetched([outputs])
    decoded = unseal(sealed, items)
    assert [len(e["at"]) for e in decoded] == [SEAL_ELEMENTS, SEAL_ELEMENTS, SEAL_ELEMENTS, 0]
    assert sealed_mismatch(decoded, [t.contiguous() for t in tensors]) is None  # what the parent reads
    moved = tensors[0].contiguous()
    moved.view(-1)[decoded[0]["at"]] += 1
    assert sealed_mismatch(decoded, [moved, *tensors[1:]]) == "output 0 changed after the timed call returned"


def test_a_malformed_or_missing_seal_is_named():
    outputs = [torch.randn(10)]
    items, tensors = fetched(outputs)
    assert sealed_mismatch(unseal([], items), tensors) == "the worker sealed none of its outputs"
    bad = unseal([{"call": 3, "k": 0, "at": "00", "bits": "00"}], items)  # no such call
    assert "malformed" in sealed_mismatch(bad, tensors)
    assert "malformed" in sealed_mismatch(unseal([{"call": 0, "k": 0, "at": "zz", "bits": ""}], items), tensors)


def test_sealing_cpu_outputs_runs_no_torch_op():
    """The seal runs inside the timed `go` request, where the native probe counts time in libtorch's or numpy's
    compute code as the reference's work: with numpy and torch ops there, an honest kernel whose own native time is
    small (tests/fixtures/deployed/relu_needs_passive.py) was flagged reference_call under load (5 Dec)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    outputs = [(torch.randn(300), torch.randn(64, 48).t(), torch.rand(33) > 0.5) for _ in range(8)]
    with Ops() as ops:
        sealed = seal(outputs)
    assert ops.seen == [] and len(sealed) >= 3


def test_the_native_reader_draws_fresh_positions_and_reads_what_lies_there(monkeypatch):
    """The reader a CPU worker loads (``native_seal``; with either fixture setting): positions below each tensor's
    size, fresh on every seal, the raw bytes at them for every element size, and no element read in Python."""
    native_seal()
    monkeypatch.setattr(guards, "_read_in_place", lambda t, at: pytest.fail("a contiguous output read in Python"))
    outputs = [[torch.randn(1000), torch.arange(777, dtype=torch.int64), torch.randn(50).half(), torch.rand(9) > 0.5]]
    first, second = seal(outputs), seal(outputs)
    items, tensors = fetched(outputs)
    for sealed in (first, second):
        decoded = unseal(sealed, items)
        for entry, t in zip(decoded, tensors):
            assert len(entry["at"]) == SEAL_ELEMENTS and all(0 <= i < t.numel() for i in entry["at"])
        assert sealed_mismatch(decoded, tensors) is None
    assert [e["at"] for e in first] != [e["at"] for e in second]
    tensors[1][unseal(first, items)[1]["at"][0]] = -1  # an arange holds no -1
    assert sealed_mismatch(unseal(first, items), tensors) == "output 1 changed after the timed call returned"


def test_a_reader_that_cannot_be_built_is_named(monkeypatch):
    from harness import cpu
    from harness.errors import CompileError

    def no_compiler(source, **kwargs):
        raise CompileError("no C++ compiler found (set CXX or install g++)")

    monkeypatch.setattr(guards, "_seal_native", None)
    monkeypatch.setattr(cpu, "compile_cpp", no_compiler)
    with pytest.raises(CompileError, match="seal reader could not be built: no C.. compiler found"):
        native_seal()
    assert guards._seal_native is None


def test_a_candidate_that_swaps_the_native_reader_is_named_by_the_patch_check():
    """The reader is a module-level callable set before the candidate's code is imported (TimedCalls), so the
    worker's PatchSnapshot watches it like any harness function."""
    from harness.guards import PatchSnapshot

    native_seal()
    snapshot = PatchSnapshot()
    assert snapshot.changes() == []
    guards._seal_native = lambda *args: 0  # what a candidate's forward could do (monkeypatch restores it)
    assert "harness.guards._seal_native was replaced" in snapshot.changes()
