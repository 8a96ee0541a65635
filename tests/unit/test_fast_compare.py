"""harness.fast_compare: the one-pass native check gives compare_outputs's verdict, whatever the outputs."""

import pytest
import torch

from harness.compare import compare_outputs, tolerance
from harness.fast_compare import _library, _tensor_passes, compare_fast

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]

pytestmark = pytest.mark.skipif(_library() is None, reason="no C++ compiler: every comparison takes the full path")


def variants(ref: torch.Tensor) -> dict[str, torch.Tensor]:
    """Candidate outputs around the tolerance rule's edges, for one reference."""
    rtol, atol = tolerance(ref.dtype)
    rms = ref.double().pow(2).mean().sqrt().item()
    g = torch.Generator().manual_seed(1)
    out = {"equal": ref.clone()}
    noise = (torch.rand(ref.shape, generator=g, dtype=torch.float64) - 0.5) * 2
    out["inside"] = (ref.double() + noise * 0.4 * (atol * rms + rtol * ref.double().abs())).to(ref.dtype)
    near = ref.clone().double()
    i = ref.numel() // 2
    near.view(-1)[i] += 3 * (atol * rms + rtol * abs(near.view(-1)[i].item()))
    out["three_tolerances_off"] = near.to(ref.dtype)
    far = ref.clone()
    far.view(-1)[ref.numel() // 3] += 50 * (atol * rms + 1)
    out["one_far"] = far
    for name, value in (("nan", float("nan")), ("inf", float("inf")), ("-inf", float("-inf"))):
        bad = ref.clone()
        bad.view(-1)[-1] = value
        out[name] = bad
    out["all_wrong"] = -ref - 1
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7,), (33, 129), (4, 5, 6001)], ids=str)
def test_the_fast_verdict_is_the_full_comparisons_verdict(dtype, shape):
    ref = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    for name, cand in variants(ref).items():
        full = compare_outputs(cand, ref)
        assert compare_fast(cand, ref).ok == full.ok, (name, full.message)
        if not full.ok:  # anything the fast check does not pass goes to the full path, so the message is its own
            assert compare_fast(cand, ref).message == full.message


def test_a_reference_that_is_not_finite_is_left_to_the_full_path():
    ref = torch.randn(100)
    ref[3] = float("inf")
    assert not _tensor_passes(ref.clone(), ref)  # not "pass": compare_outputs decides (inf == inf there)
    assert compare_fast(ref.clone(), ref).ok == compare_outputs(ref.clone(), ref).ok


def test_other_dtypes_shapes_and_structures_take_the_full_path():
    ref = torch.arange(10).to(torch.complex64)
    assert compare_fast(ref.clone(), ref).ok and not _tensor_passes(ref.clone(), ref)
    assert not compare_fast(torch.zeros(3, 4), torch.zeros(4, 3)).ok
    assert not compare_fast(torch.zeros(4, dtype=torch.float64), torch.zeros(4)).ok
    pair = (torch.ones(3), torch.zeros(2))
    assert compare_fast(tuple(t.clone() for t in pair), pair).ok
    assert not compare_fast((pair[0],), pair).ok


EXACT = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", EXACT, ids=str)
@pytest.mark.parametrize("shape", [(1,), (33, 129), (3, 70001)], ids=str)
def test_integer_and_boolean_outputs_are_checked_natively_element_for_element(dtype, shape):
    g = torch.Generator().manual_seed(2)
    ref = torch.randint(0, 2 if dtype == torch.bool else 100, shape, generator=g).to(dtype)
    assert _tensor_passes(ref.clone(), ref)  # equal: decided in the native pass
    assert compare_fast(ref.clone(), ref).ok
    for at in (0, ref.numel() // 2, ref.numel() - 1):  # one element off, in the first, a middle or the last block
        cand = ref.clone()
        cand.view(-1)[at] = (~cand.view(-1)[at]) if dtype == torch.bool else cand.view(-1)[at] + 1
        assert not _tensor_passes(cand, ref)
        verdict = compare_fast(cand, ref)
        assert not verdict.ok and verdict.message == compare_outputs(cand, ref).message
        assert "1/" in verdict.message  # one element outside (exact equality)


def test_a_non_contiguous_exact_output_is_compared_by_value_not_by_its_storage():
    ref = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    cand = torch.arange(12, dtype=torch.int32).reshape(4, 3).t().contiguous().t().t()  # the same values, strided
    assert _tensor_passes(ref.t(), ref.t().contiguous())
    assert not _tensor_passes(cand.t(), ref)  # other shape
    assert _tensor_passes(ref.t().contiguous().t(), ref)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_a_complex_output_is_compared_on_both_parts(dtype):
    ref = torch.randn(50, dtype=dtype, generator=torch.Generator().manual_seed(3))
    assert compare_fast(ref.clone(), ref).ok
    wrong = ref.clone()
    wrong.imag[7] += 1.0  # the imaginary part only: casting to a real dtype would hide it
    verdict = compare_fast(wrong, ref)
    assert not verdict.ok and verdict.kind == "incorrect:mismatch" and "[7, 1]" in verdict.message


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_bad_element_anywhere_in_a_vector_lane_is_not_passed(dtype):
    # the check's reductions are vectorised: a NaN or an error in any lane of any vector must still count
    ref = torch.randn(4099, generator=torch.Generator().manual_seed(4)).to(dtype)
    rtol, atol = tolerance(dtype)
    for at in (0, 1, 2, 3, 5, 7, 8, 15, 16, 31, 2048, 4097, 4098):
        for value in (float("nan"), float("inf"), None):
            cand = ref.clone()
            if value is None:
                cand[at] = cand[at].double() + 10 * (atol * 2 + rtol * abs(float(cand[at])))
            else:
                cand[at] = value
            assert not _tensor_passes(cand, ref), (at, value)
            assert not compare_fast(cand, ref).ok


def test_a_sampled_comparison_judges_the_drawn_blocks_values_and_the_whole_tensors_layout():
    """Timed outputs checked by sampled blocks (harness.remote_memory.sample_blocks): the values compared are the
    gathered blocks' (an element outside them is not seen), the strides those of the whole output."""
    from harness.fast_compare import compare_encoded
    from harness.remote_memory import gather, sample_blocks

    ref = torch.randn(2048, 1031, generator=torch.Generator().manual_seed(0))
    blocks = sample_blocks(ref.numel(), 4, torch.Generator().manual_seed(1))
    assert blocks is not None
    seen = torch.zeros(ref.numel(), dtype=torch.bool)
    seen[gather(torch.arange(ref.numel()), blocks)] = True
    outside, inside = int((~seen).nonzero()[0]), int(seen.nonzero()[1])

    def verdict(cand: torch.Tensor, stride: list[int]):
        desc = {"t": 0, "device": "cpu", "stride": stride}
        item = {"seed": 1, "output": {"t": 0, "device": "cpu", "stride": [1031, 1]}}
        sampled = [gather(cand, blocks)], [gather(ref, blocks)]
        return compare_encoded(desc, [cand], item, [ref], "cpu", sampled)

    off_outside, off_inside = ref.clone(), ref.clone()
    off_outside.view(-1)[outside] += 100
    off_inside.view(-1)[inside] += 100
    assert verdict(ref.clone(), [1031, 1]).ok and verdict(off_outside, [1031, 1]).ok
    assert verdict(off_inside, [1031, 1]).kind == "incorrect:mismatch"
    assert verdict(ref.clone(), [1, 2048]).kind == "incorrect:stride"
