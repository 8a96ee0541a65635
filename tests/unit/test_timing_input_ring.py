"""Timed calls' inputs from a ring of get_inputs sets (issue 11): deterministic in both workers, never the same
inputs twice, every element one get_inputs produced at that position."""

import types

import pytest
import torch

from harness.worker_common import make_inputs
from harness.worker_timed import RING_FLAG, RING_MIX, RING_MIX_SHARE, RING_RUN, InputRing, ring_parts, ring_seed


def module(shape=(64, 100), dtype=torch.float32):
    mod = types.ModuleType("ring_task")

    def get_inputs():
        if dtype == torch.int64:
            return [torch.randint(0, 10, shape), 3]
        return [torch.randn(shape, dtype=dtype), 3]

    mod.get_inputs = get_inputs  # type: ignore[attr-defined]
    return mod


def test_ring_seeds_round_trip_and_refuse_bad_parts():
    seed = ring_seed(5, 9, 1234)
    assert seed >= RING_FLAG and seed < 1 << 63
    assert ring_parts(seed) == (5, 9, 1234)
    assert ring_parts(12345) is None
    for bad in ((0, 1, 1), (3, 3, 1), (1 << 20, 1, 1), (1, 2, -1)):
        with pytest.raises(ValueError):
            ring_seed(*bad)


def test_a_plain_seed_is_get_inputs_under_it():
    mod = module()
    got = InputRing().inputs(mod, 77, "cpu", "c")
    assert torch.equal(got[0], make_inputs(mod, 77, "cpu", "c")[0]) and got[1] == 3


def test_mixed_inputs_are_the_same_in_two_workers_and_differ_from_both_sets():
    mod = module()
    seed = ring_seed(11, 22, 5)
    a, b = InputRing().inputs(mod, seed, "cpu", "c"), InputRing().inputs(mod, seed, "cpu", "c")
    assert torch.equal(a[0], b[0]) and a[1] == 3
    first, second = make_inputs(mod, 11, "cpu", "c")[0], make_inputs(mod, 22, "cpu", "c")[0]
    from_first, from_second = a[0] == first, a[0] == second
    assert bool((from_first | from_second).all())  # every element is one a get_inputs set holds at that position
    assert 0 < int((~from_first).sum()) <= max(RING_MIX, 6400 // RING_MIX_SHARE)  # some come from the second set
    big = types.ModuleType("big_task")
    big.get_inputs = lambda: [torch.randn(256, 1024)]  # type: ignore[attr-defined]
    mixed = InputRing().inputs(big, seed, "cpu", "c")[0]
    changed = int((mixed != make_inputs(big, 11, "cpu", "c")[0]).sum())
    assert RING_MIX < changed <= 256 * 1024 // RING_MIX_SHARE  # one in RING_MIX_SHARE (drawn with replacement)
    assert changed > 0.9 * 256 * 1024 / RING_MIX_SHARE
    assert not torch.equal(a[0], first) and not torch.equal(a[0], second)


def test_every_call_gets_its_own_tensor_and_different_seeds_give_different_inputs():
    mod, ring = module(), InputRing()
    x = ring.inputs(mod, ring_seed(1, 2, 1), "cpu", "c")[0]
    y = ring.inputs(mod, ring_seed(1, 2, 2), "cpu", "c")[0]
    z = ring.inputs(mod, ring_seed(2, 1, 1), "cpu", "c")[0]
    assert x.data_ptr() != y.data_ptr() and x.data_ptr() != ring.sets[1][0].data_ptr()
    assert not torch.equal(x, y) and not torch.equal(x, z)
    before = x.clone()
    x.add_(1)  # a candidate that writes into its inputs does not change the ring
    assert torch.equal(ring.inputs(mod, ring_seed(1, 2, 1), "cpu", "c")[0], before)


def test_integer_inputs_keep_their_range_and_a_new_case_starts_a_new_ring():
    ints, ring = module(dtype=torch.int64), InputRing()
    got = ring.inputs(ints, ring_seed(3, 4, 9), "cpu", "ints")[0]
    assert got.dtype == torch.int64 and int(got.min()) >= 0 and int(got.max()) < 10
    ring.inputs(module(), ring_seed(3, 4, 9), "cpu", "floats")
    assert all(s[0].dtype == torch.float32 for s in ring.sets.values())


def test_the_ring_keeps_at_most_its_byte_limit_but_always_the_two_sets_in_use():
    mod = module(shape=(256, 256))  # 256 KiB a set
    ring = InputRing(limit_bytes=600 << 10)
    for k in range(1, 8):
        ring.inputs(mod, ring_seed(k, k + 1, 0), "cpu", "c")
        assert len(ring.sets) <= 2 or sum(s[0].numel() * 4 for s in ring.sets.values()) <= 600 << 10
    assert {7, 8} <= set(ring.sets)
    again = ring.inputs(mod, ring_seed(1, 2, 0), "cpu", "c")[0]  # evicted sets are rebuilt, the same
    assert torch.equal(again, InputRing().inputs(mod, ring_seed(1, 2, 0), "cpu", "c")[0])


def test_the_parent_never_sends_the_same_ring_seed_twice_in_a_case():
    import random

    from harness.case_timer import RING_SIZE, CaseTimer

    rng = random.Random(1)
    timer = types.SimpleNamespace(rng=rng, ring_keys=rng.sample(range(1, 1 << 20), RING_SIZE), used_seeds=set())
    seeds = [s for _ in range(50) for s in CaseTimer._fresh_seeds(timer, 64)]  # type: ignore[arg-type]
    assert len(set(seeds)) == len(seeds) == 3200
    parts = [ring_parts(s) for s in seeds]
    assert all(p is not None and p[0] in timer.ring_keys and p[1] in timer.ring_keys for p in parts)
    assert len({p[0] for p in parts if p}) == RING_SIZE  # every set of the ring is used, in a random order
    plain = types.SimpleNamespace(rng=rng, ring_keys=[], used_seeds=set())
    assert all(s < 1 << 31 for s in CaseTimer._fresh_seeds(plain, 10))  # type: ignore[arg-type]


def test_sets_that_cannot_be_mixed_get_fresh_inputs_as_before():
    nested = types.ModuleType("nested_task")
    nested.get_inputs = lambda: [[torch.randn(4, 4), torch.randn(4)], torch.randn(8)]  # type: ignore[attr-defined]
    seed = ring_seed(5, 6, 7)
    got = InputRing().inputs(nested, seed, "cpu", "c")
    want = make_inputs(nested, seed & (RING_FLAG - 1), "cpu", "c")
    assert torch.equal(got[0][0], want[0][0]) and torch.equal(got[1], want[1])
    again = InputRing().inputs(nested, seed, "cpu", "c")
    assert again[0] is not got[0]  # a list of its own per call


def test_an_input_that_requires_grad_still_does():
    mod = types.ModuleType("grad_task")
    mod.get_inputs = lambda: [torch.randn(16, 16, requires_grad=True)]  # type: ignore[attr-defined]
    got = InputRing().inputs(mod, ring_seed(1, 2, 3), "cpu", "c")[0]
    assert got.requires_grad and got.is_leaf


def test_a_transposed_input_keeps_its_strides_and_is_mixed_alike():
    mod = types.ModuleType("t_task")
    mod.get_inputs = lambda: [torch.randn(300, 200).t()]  # type: ignore[attr-defined]
    seed = ring_seed(8, 9, 10)
    got = InputRing().inputs(mod, seed, "cpu", "c")[0]
    assert got.stride() == (1, 200) and not got.is_contiguous()
    first, second = make_inputs(mod, 8, "cpu", "c")[0], make_inputs(mod, 9, "cpu", "c")[0]
    assert bool(((got == first) | (got == second)).all()) and not torch.equal(got, first)


def test_recycled_copies_are_rewritten_whole_and_give_the_same_inputs_as_fresh_ones():
    mod, ring = module(shape=(128, 96)), InputRing()
    first = [ring.inputs(mod, ring_seed(1, 2, m), "cpu", "c")[0] for m in (1, 2)]
    first[0].mul_(-3)  # a kernel that wrote into its inputs (any way: the copy rewrites every element)
    first[1].view(-1)[:100] = float("nan")
    ring.recycle()
    for m in (3, 4):  # the other set first: a recycled copy holds nothing of the set it was made from
        got = ring.inputs(mod, ring_seed(2, 1, m), "cpu", "c")[0]
        assert got.data_ptr() in {t.data_ptr() for t in first}  # written into the last unit's memory
        assert torch.equal(got, InputRing().inputs(mod, ring_seed(2, 1, m), "cpu", "c")[0])
    third = ring.inputs(mod, ring_seed(1, 2, 5), "cpu", "c")[0]  # more calls than spare copies: a new tensor
    assert third.data_ptr() not in {t.data_ptr() for t in first}


def test_a_copy_whose_layout_changed_is_not_recycled():
    mod, ring = module(shape=(64, 64)), InputRing()
    x = ring.inputs(mod, ring_seed(1, 2, 1), "cpu", "c")[0]
    x.t_()  # a candidate transposed its input in place: another layout, never written into
    ring.recycle()
    got = ring.inputs(mod, ring_seed(1, 2, 2), "cpu", "c")[0]
    assert got.is_contiguous() and got.data_ptr() != x.data_ptr()
    assert torch.equal(got, InputRing().inputs(mod, ring_seed(1, 2, 2), "cpu", "c")[0])


def test_large_tensors_are_mixed_in_runs_of_consecutive_elements_small_ones_per_element():
    big = types.ModuleType("big_task")
    big.get_inputs = lambda: [torch.randn(1000, 1001)]  # type: ignore[attr-defined]  # not a multiple of a run
    mixed = InputRing().inputs(big, ring_seed(3, 4, 5), "cpu", "c")[0].view(-1)
    first, second = (make_inputs(big, k, "cpu", "c")[0].view(-1) for k in (3, 4))
    taken = (mixed != first).nonzero().view(-1)
    assert bool((mixed[taken] == second[taken]).all()) and torch.equal(mixed[-(1001000 % RING_RUN) :], first[-8:])
    runs = taken.div(RING_RUN, rounding_mode="floor").unique()
    assert 0.9 * 1001000 / RING_MIX_SHARE / RING_RUN < len(runs) <= 1001000 // RING_MIX_SHARE // RING_RUN
    assert len(taken) > 0.9 * len(runs) * RING_RUN  # whole runs (an element equal in both sets aside)
    small = InputRing().inputs(module(), ring_seed(3, 4, 5), "cpu", "c")[0].view(-1)  # 6400 elements
    taken = (small != make_inputs(module(), 3, "cpu", "c")[0].view(-1)).nonzero().view(-1)
    assert len(taken.div(RING_RUN, rounding_mode="floor").unique()) > 0.8 * len(taken)  # scattered, one by one


def test_a_copy_from_the_same_set_gets_only_its_mixed_runs_rewritten_unless_it_changed():
    big = types.ModuleType("big_task")
    big.get_inputs = lambda: [torch.randn(1000, 1001)]  # type: ignore[attr-defined]  # a tail of 8 past the last run
    ring = InputRing()
    a, b = (ring.inputs(big, ring_seed(1, 2, m), "cpu", "c")[0] for m in (1, 2))
    a.data.view(-1)[-1] = 1e9  # unseen by the version counter, outside every run: stays (docs: the ring's limits)
    b.view(-1)[-1] = 1e9  # through torch (the version counter): the copy is rewritten whole
    ring.recycle()
    for m in (3, 4):
        got = ring.inputs(big, ring_seed(1, 2, m), "cpu", "c")[0]
        want = InputRing().inputs(big, ring_seed(1, 2, m), "cpu", "c")[0]
        assert got.data_ptr() in (a.data_ptr(), b.data_ptr())
        if got.data_ptr() == a.data_ptr():
            assert float(got.view(-1)[-1]) == 1e9 and torch.equal(got.view(-1)[:-8], want.view(-1)[:-8])
        else:
            assert torch.equal(got, want)
    ring.recycle()
    a.data.view(-1)[: 1000 * 1001 // 2].zero_()  # a wide change the version counter misses: the sampled runs see it
    assert torch.equal(
        ring.inputs(big, ring_seed(1, 2, 5), "cpu", "c")[0], InputRing().inputs(big, ring_seed(1, 2, 5), "cpu", "c")[0]
    )


def test_each_ring_set_is_first_in_an_even_share_of_a_units_calls():
    import random
    from collections import Counter

    from harness.case_timer import RING_SIZE, CaseTimer

    rng = random.Random(2)
    timer = types.SimpleNamespace(rng=rng, ring_keys=rng.sample(range(1, 1 << 20), RING_SIZE), used_seeds=set())
    for n in (1, 2, 5, 64):
        counts = Counter(ring_parts(s)[0] for s in CaseTimer._fresh_seeds(timer, n))  # type: ignore[arg-type,index]
        assert max(counts.values()) - (min(counts.values()) if len(counts) == RING_SIZE else 0) <= 1


def test_each_prepare_makes_a_units_inputs_in_the_last_units_copies():
    from harness.worker_timed import TimedCalls

    class Target:
        device = "cpu"

        def synchronize(self) -> None:
            pass

        def timer(self, hardware):
            return types.SimpleNamespace(flush=lambda tensors: None)

    big, timed = module(shape=(300, 400)), TimedCalls(Target(), None)  # 120,000 elements: mixed in runs

    def seeds(m):
        return [ring_seed(1, 2, m), ring_seed(2, 1, m), ring_seed(1, 2, m + 100)]

    timed.prepare(big, [], seeds(1), "c")
    before = {inputs[0].data_ptr() for inputs in timed.inputs}
    timed.prepare(big, [], seeds(2), "c")
    assert {inputs[0].data_ptr() for inputs in timed.inputs} == before
    for seed, got in zip(seeds(2), timed.inputs):
        assert torch.equal(got[0], InputRing().inputs(big, seed, "cpu", "c")[0])
