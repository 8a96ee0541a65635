"""The reference cache checks each entry's SHA-256 once per process and file, and never uses an edited entry."""

from __future__ import annotations

import os
import time

import pytest
import torch

from harness import reference_cache


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path / "cache"))
    reference_cache.forget_all()
    yield
    reference_cache.forget_all()


def entry(name: str = "a") -> tuple[str, dict, list[torch.Tensor]]:
    key = reference_cache.entry_key({"task": name}, {"index": 0}, 1, 2, 3)
    tensors = [torch.randn(257, 33), torch.arange(10, dtype=torch.int64), torch.randn(5).double(), torch.empty(0, 3)]
    trial = {"seed": 2, "output": {"t": 0}, "digest": "x"}
    reference_cache.store(key, trial, tensors)
    return key, trial, tensors


def same(got: list[torch.Tensor], want: list[torch.Tensor]) -> bool:
    return len(got) == len(want) and all(
        g.dtype == w.dtype and g.shape == w.shape and torch.equal(g, w) for g, w in zip(got, want)
    )


def rewrite(key: str, change) -> None:
    """Rewrites an entry's file in place (its change time moves on: the clock's granularity is waited out)."""
    path = reference_cache._path(key)
    data = bytearray(path.read_bytes())
    change(data)
    time.sleep(0.02)
    path.write_bytes(bytes(data))


def test_an_unchanged_entry_is_read_and_checked_once_per_process():
    key, trial, tensors = entry()
    before = reference_cache.verified_reads
    for _ in range(3):
        got = reference_cache.load(key)
        assert got is not None and got[0] == trial and same(got[1], tensors)
    assert reference_cache.verified_reads == before + 1


def test_the_trial_handed_out_is_a_copy():
    key, trial, _ = entry()
    first = reference_cache.load(key)
    assert first is not None
    first[0]["seed"] = 99
    again = reference_cache.load(key)
    assert again is not None and again[0] == trial


def test_an_entry_tampered_with_after_it_was_checked_is_refused():
    key, _, _ = entry()
    assert reference_cache.load(key) is not None
    before = reference_cache.verified_reads

    def flip(data: bytearray) -> None:
        data[-1] ^= 0xFF  # one bit of the last tensor's bytes, size unchanged

    rewrite(key, flip)
    assert reference_cache.load(key) is None
    assert reference_cache.verified_reads == before + 1  # read and checked again, not served from memory
    assert reference_cache.load(key) is None  # and not remembered as good


def test_an_entry_whose_header_and_hash_were_both_rewritten_is_read_again():
    key, trial, tensors = entry()
    assert reference_cache.load(key) is not None
    other, _, other_tensors = entry("b")
    # a well-formed entry of another key moved over this one: read again, its header names the other key
    time.sleep(0.02)
    os.replace(reference_cache._path(other), reference_cache._path(key))
    assert reference_cache.load(key) is None
    # the entry rewritten with the right key and new bytes and hash: the new bytes are what is used
    changed = [t + 1 if t.is_floating_point() else t for t in tensors]
    time.sleep(0.02)
    reference_cache.store(key, trial, changed)
    got = reference_cache.load(key)
    assert got is not None and same(got[1], changed)


def test_a_deleted_entry_is_a_miss_even_after_it_was_checked():
    key, _, _ = entry()
    assert reference_cache.load(key) is not None
    reference_cache._path(key).unlink()
    assert reference_cache.load(key) is None


def test_a_touched_entry_is_checked_again():
    key, _, tensors = entry()
    assert reference_cache.load(key) is not None
    before = reference_cache.verified_reads
    time.sleep(0.02)
    os.utime(reference_cache._path(key))
    got = reference_cache.load(key)
    assert got is not None and same(got[1], tensors)
    assert reference_cache.verified_reads == before + 1


def test_a_truncated_entry_is_refused():
    key, _, _ = entry()
    path = reference_cache._path(key)
    path.write_bytes(path.read_bytes()[:-7])
    assert reference_cache.load(key) is None


def test_memory_kept_is_capped(monkeypatch):
    monkeypatch.setattr(reference_cache, "MEMO_BYTES", 60_000)
    keys = [entry(str(i))[0] for i in range(4)]  # ~34 KB each
    for key in keys:
        assert reference_cache.load(key) is not None
    assert reference_cache._memo_bytes <= 60_000 and len(reference_cache._memo) == 1
    before = reference_cache.verified_reads
    assert reference_cache.load(keys[0]) is not None  # dropped from memory: read and checked again
    assert reference_cache.verified_reads == before + 1
