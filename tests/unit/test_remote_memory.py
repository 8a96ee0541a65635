"""harness.remote_memory: tensors read out of another (real, forked) process; every bad description refused."""

import os

import pytest
import torch

from harness.remote_memory import (
    SAMPLE_MIN_BYTES,
    SAMPLES,
    SPAN,
    RemoteMemoryError,
    Staging,
    check_specs,
    gather,
    read_into,
    sample_blocks,
    usable,
)


@pytest.fixture
def child():
    """A forked process holding tensors of known contents (copy-on-write: the same addresses as here)."""
    held = {
        "f32": torch.arange(3 * 1024 * 1024, dtype=torch.float32).reshape(1024, 3072),
        "bf16": torch.linspace(-4, 4, 4097, dtype=torch.bfloat16),
        "i64": torch.tensor([7, -1, 2**40]),
        "odd": torch.arange(1_500_001, dtype=torch.float32),  # 6 MB, its last block partial
        "zeros": torch.zeros(1_500_001, dtype=torch.float32),
    }
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child waits until the test is done, then leaves without running anything else
        os.close(w)
        os.read(r, 1)
        os._exit(0)
    os.close(r)
    try:
        yield pid, held
    finally:
        os.close(w)
        os.waitpid(pid, 0)


def spec(t: torch.Tensor, **change) -> dict:
    out = {
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
        "nbytes": t.numel() * t.element_size(),
        "addr": t.data_ptr(),
    }
    return {**out, **change}


def test_the_tensors_of_another_process_are_read_exactly(child):
    pid, held = child
    staging = Staging()
    got = staging.read("w", pid, [spec(t) for t in held.values()], 1 << 30)
    for want, have in zip(held.values(), got):
        assert have.dtype == want.dtype and torch.equal(have, want)


def test_staging_buffers_are_reused_for_the_same_slot_shape_and_dtype(child):
    pid, held = child
    staging = Staging()
    first = staging.read("w", pid, [spec(held["f32"])], 1 << 30)[0]
    again = staging.read("w", pid, [spec(held["f32"])], 1 << 30)[0]
    other = staging.read("w", pid, [spec(held["bf16"])], 1 << 30)[0]
    assert again.data_ptr() == first.data_ptr() and torch.equal(again, held["f32"])
    assert other.dtype == torch.bfloat16 and torch.equal(other, held["bf16"])


@pytest.mark.parametrize(
    "change, message",
    [
        ({"dtype": "object"}, "bad remote tensor description"),
        ({"shape": [-1]}, "bad remote tensor description"),
        ({"shape": [2.5]}, "bad remote tensor description"),
        ({"addr": -8}, "bad remote tensor description"),
        ({"addr": "0x10"}, "bad remote tensor description"),
        ({"nbytes": 12}, "declares 12 bytes"),
    ],
)
def test_a_malformed_description_is_refused_before_anything_is_read(change, message):
    t = torch.zeros(4, 4)
    with pytest.raises(RemoteMemoryError, match=message):
        check_specs([spec(t, **change)], 1 << 30)


def test_more_bytes_than_the_message_limit_are_refused():
    t = torch.zeros(1024)
    with pytest.raises(RemoteMemoryError, match="more than 4000 bytes"):
        check_specs([spec(t)], 4000)
    with pytest.raises(RemoteMemoryError, match="not a list"):
        check_specs({"a": 1}, 4000)


def test_an_address_the_process_has_not_mapped_is_a_malformed_reply_not_a_crash(child):
    pid, _ = child
    dest = torch.empty(1024)
    with pytest.raises(RemoteMemoryError, match="not mapped|beyond mapped"):  # the first pages are never mapped
        read_into(pid, torch.tensor([[dest.data_ptr(), 4096, dest.numel() * dest.element_size()]]))


def test_usable_reads_for_real_and_says_no_for_a_process_that_is_gone(child):
    pid, _ = child
    assert usable(pid)
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    assert not usable(gone)


def test_sampled_blocks_are_the_ones_read_into_their_places_and_nothing_else(child):
    pid, held = child
    staging = Staging()
    staging.read("w", pid, [spec(held["zeros"])], 1 << 30)  # the slot now holds zeros
    blocks = sample_blocks(held["odd"].numel(), 4, torch.Generator().manual_seed(3), [777_777])
    assert blocks is not None
    got = staging.read("w", pid, [spec(held["odd"])], 1 << 30, [blocks])[0]
    assert torch.equal(gather(got, blocks), gather(held["odd"], blocks))
    read = torch.zeros(held["odd"].numel(), dtype=torch.bool)
    read[gather(torch.arange(read.numel()), blocks)] = True
    assert bool(read[0]) and bool(read[-1]) and bool(read[777_777])  # first, last, a sealed position
    assert torch.equal(got[~read], torch.zeros(int((~read).sum())))  # no other element was copied
    assert int(read.sum()) <= (SAMPLES + 3) * SPAN < held["odd"].numel() // 10


def test_a_block_beyond_the_tensor_is_refused(child):
    pid, held = child
    blocks = torch.tensor([held["odd"].numel() // SPAN + 1])
    with pytest.raises(RemoteMemoryError, match="beyond"):
        Staging().read("w", pid, [spec(held["odd"])], 1 << 30, [blocks])


def test_small_outputs_are_read_whole():
    assert sample_blocks(SAMPLE_MIN_BYTES // 4 - 1, 4, torch.Generator()) is None
    assert sample_blocks(SAMPLE_MIN_BYTES // 2, 2, torch.Generator()) is not None


@pytest.mark.parametrize("layout", ["scattered", "one run", "every 100th"])
def test_an_output_wrong_in_one_percent_of_its_elements_is_caught_by_every_draw(layout):
    """The documented bound: a fraction f >= 1 % of wrong elements escapes a draw with probability
    (1 - f)^SAMPLES < 1e-6; 300 draws here (all caught but with probability < 3e-4), wherever the wrong ones lie."""
    assert (1 - 0.01) ** SAMPLES < 1e-6
    n, generator = 4_000_037, torch.Generator().manual_seed(11)
    wrong = torch.zeros(n, dtype=torch.bool)
    start = int(torch.randint(n - n // 100, (1,), generator=generator))
    if layout == "scattered":
        wrong[torch.randperm(n, generator=generator)[: n // 100]] = True
    elif layout == "one run":
        wrong[start : start + n // 100] = True
    else:
        wrong[::100] = True
    for _ in range(300):
        assert bool(gather(wrong, sample_blocks(n, 4, generator)).any())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.bool, torch.complex64], ids=str)
@pytest.mark.parametrize("numel", [SPAN * 30_000, SPAN * 30_000 + 17], ids=["whole blocks", "a partial last block"])
def test_gather_returns_the_blocks_elements_in_order_for_every_dtype(dtype, numel):
    t = torch.randn(numel).to(dtype) if dtype != torch.bool else torch.rand(numel) > 0.5
    blocks = sample_blocks(numel, 16, torch.Generator().manual_seed(5))  # 16: always sampled at these sizes
    assert blocks is not None
    at = (blocks[:, None] * SPAN + torch.arange(SPAN)).reshape(-1)
    assert torch.equal(gather(t.reshape(-1, 1) if numel % 2 else t, blocks), t[at[at < numel]])


def test_the_parent_draws_the_same_blocks_for_both_workers_or_reads_whole_where_they_differ():
    """harness.case_timer.CaseTimer._blocks: one draw per unit for both workers' outputs, the sealed positions
    among the blocks; None (everything read whole, then compared as before) where the two describe their outputs
    differently, or a seal is malformed (sealed_mismatch then names it)."""
    import random
    import types

    from harness.case_timer import CaseTimer

    big = {"dtype": "float32", "shape": [2048, 2049], "nbytes": 2048 * 2049 * 4, "addr": 4096}
    small = {"dtype": "float64", "shape": [7], "nbytes": 56, "addr": 8192}
    timer = types.SimpleNamespace(sealed=[{"i": 0, "at": [3_000_000], "bits": [0]}], rng=random.Random(0))
    blocks = CaseTimer._blocks(timer, [big, small], [dict(big, addr=1 << 20), dict(small, addr=1 << 21)])
    assert blocks is not None and blocks[1] is None  # the small output read whole
    assert 3_000_000 // SPAN in blocks[0].tolist() and len(blocks[0]) <= SAMPLES + 3
    assert CaseTimer._blocks(timer, [big, small], [dict(big, shape=[2049, 2048]), small]) is None
    assert CaseTimer._blocks(timer, [big], [big, small]) is None
    timer.sealed = [{"i": "zero"}]
    assert CaseTimer._blocks(timer, [big], [big]) is None
