"""Comparison outside the candidate: structure, shape, dtype, device, non-finite, values; tolerances by dtype."""

import pytest
import torch

from harness.compare import TOLERANCES, compare_outputs, degenerate_reason


def softmax_output():
    return torch.softmax(torch.randn(16, 16384, generator=torch.Generator().manual_seed(0)), -1)


def test_identical_outputs_pass():
    ref = torch.randn(100, 100)
    assert compare_outputs(ref.clone(), ref).ok


def test_all_zeros_fails_even_when_values_are_tiny():
    ref = softmax_output()  # values near 6e-5: a fixed atol of 1e-4 would accept zeros
    verdict = compare_outputs(torch.zeros_like(ref), ref)
    assert not verdict.ok and verdict.kind == "incorrect:mismatch"


@pytest.mark.parametrize("factor", [1.001, 0.999, 1.0005])
def test_float32_off_by_a_twentieth_of_a_percent_fails(factor):
    ref = torch.randn(64, 1000)
    assert compare_outputs(ref * factor, ref).kind == "incorrect:mismatch"


def test_float32_rounding_noise_passes():
    ref = torch.randn(64, 1000, dtype=torch.float64)
    assert compare_outputs((ref.float() + 1e-7 * torch.randn(64, 1000)), ref.float()).ok


def test_float64_catches_a_float32_computation():
    ref = torch.randn(64, 1000, dtype=torch.float64).exp()
    cand = ref.float().double()
    assert compare_outputs(cand, ref).kind == "incorrect:mismatch"


def test_one_wrong_element_fails_and_is_located():
    ref = torch.randn(10, 20)
    cand = ref.clone()
    cand[3, 7] += 0.5
    verdict = compare_outputs(cand, ref)
    assert verdict.kind == "incorrect:mismatch" and "1/200" in verdict.message and "[3, 7]" in verdict.message


def test_nan_where_the_reference_is_finite_fails():
    ref = torch.randn(10, 10)
    cand = ref.clone()
    cand[2, 2] = float("inf")
    assert compare_outputs(cand, ref).kind == "incorrect:nonfinite"


def test_matching_non_finite_values_pass_and_others_fail():
    ref = torch.tensor([1.0, float("inf"), float("nan"), 2.0])
    assert compare_outputs(ref.clone(), ref).ok
    assert compare_outputs(torch.tensor([1.0, 0.0, float("nan"), 2.0]), ref).kind == "incorrect:mismatch"


def test_shape_dtype_structure_and_device_are_checked_before_values():
    ref = torch.randn(4, 5)
    assert compare_outputs(ref[:3], ref).kind == "incorrect:shape"
    assert compare_outputs(ref.double(), ref).kind == "incorrect:dtype"
    assert compare_outputs((ref, ref), ref).kind == "incorrect:structure"
    assert compare_outputs(3.0, ref).kind == "incorrect:structure"
    assert compare_outputs(ref, ref, device="cuda", cand_devices=["cpu"]).kind == "incorrect:device"


def test_integer_outputs_must_be_exact():
    ref = torch.arange(10)
    assert compare_outputs(ref.clone(), ref).ok
    cand = ref.clone()
    cand[9] = 10
    assert compare_outputs(cand, ref).kind == "incorrect:mismatch"


def test_tuples_compare_element_by_element():
    a, b = torch.randn(3), torch.randn(4)
    assert compare_outputs((a.clone(), b.clone()), (a, b)).ok
    assert "output[1]" in compare_outputs((a.clone(), b * 2), (a, b)).message


def test_half_precision_tolerances_are_looser_than_float32():
    assert (
        TOLERANCES[torch.bfloat16][0]
        > TOLERANCES[torch.float16][0]
        > TOLERANCES[torch.float32][0]
        > TOLERANCES[torch.float64][0]
    )
    ref = torch.randn(1000).to(torch.bfloat16)
    assert compare_outputs((ref.float() * 1.004).to(torch.bfloat16), ref).ok


def test_degenerate_reference_outputs_are_recognised():
    assert degenerate_reason(torch.zeros(10)) == "output[0] is constant (0.0)"
    assert "constant" in degenerate_reason(torch.full((3, 3), 2.0))
    assert "NaN/Inf" in degenerate_reason(torch.tensor([1.0, float("nan")]))
    assert degenerate_reason(torch.randn(10)) is None
    assert degenerate_reason(torch.tensor([0.0])) == "output[0] is all zeros"
