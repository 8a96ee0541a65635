"""The tolerance rule of a low-precision output that misses the default one: judged against the reference
recomputed in float64, by the reference's own accuracy (harness.compare.precise_verdict; docs/harness.md,
"The reference's own accuracy")."""

import pytest
import torch

from harness.compare import PRECISE_FACTOR, PRECISE_RULE, compare_outputs, compare_tensor
from harness.fast_compare import compare_fast

# matvec's case 1x8388608 as seen: torch's float32 result 87.9678, off the float64 result by 0.028
EXACT = torch.tensor([88.0 - 0.004], dtype=torch.float64)
REF = torch.tensor([87.9678], dtype=torch.float32)


def own_error() -> float:
    return abs(float(REF.double()) - float(EXACT))


def allowed() -> float:
    """The rule's allowance for REF's one element: the default tolerance plus PRECISE_FACTOR x the reference's own
    error (rtol |r| + atol RMS(r), both 1e-4, for float32)."""
    r = abs(float(REF))
    return 1e-4 * r + 1e-4 * r + PRECISE_FACTOR * own_error()


def never() -> list:
    raise AssertionError("the float64 reference was asked for where the default rule decides")


def test_an_honest_long_reduction_refused_by_the_default_rule_is_accepted_by_the_references_accuracy():
    cand = torch.tensor([87.9967], dtype=torch.float32)  # the gemm template's defaults, as seen
    assert not compare_outputs(cand, REF).ok  # the default rule alone refuses it
    verdict = compare_outputs(cand, REF, precise=lambda: [EXACT])
    assert verdict.ok and verdict.rule == PRECISE_RULE


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_the_reference_perturbed_beyond_its_own_accuracy_is_refused(sign):
    # |c - p| = |r - p| + d on the far side; d past the allowance less the reference's own error: refused
    d = allowed() - own_error()
    side = 1.0 if float(REF.double()) > float(EXACT) else -1.0
    beyond = REF.double() + side * (d * 1.05)
    within = REF.double() + side * (d * 0.9)
    verdict = compare_outputs(beyond.float(), REF, precise=lambda: [EXACT])
    assert not verdict.ok and verdict.kind == "incorrect:mismatch"
    assert "outside the reference's own accuracy" in verdict.message and "float64" in verdict.message
    assert compare_outputs(within.float(), REF, precise=lambda: [EXACT]).ok
    # on the near side the reference's error helps nobody: the same distance from the float64 result is refused
    near = EXACT - side * (allowed() * 1.05)
    assert not compare_outputs(near.float(), REF, precise=lambda: [EXACT]).ok
    del sign


def test_a_wrong_kernel_is_refused_whatever_the_float64_result():
    ref = torch.randn(4096, generator=torch.Generator().manual_seed(1))
    exact = ref.double() + 1e-7 * torch.randn(4096, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for wrong in (torch.zeros_like(ref), ref * 1.01, ref + 1e-3, ref.flip(0)):
        verdict = compare_outputs(wrong, ref, precise=lambda: [exact])
        assert not verdict.ok and verdict.kind == "incorrect:mismatch"


def test_every_element_is_judged_not_only_the_worst_of_the_default_rule():
    ref = torch.full((1000,), 1.0)
    exact = ref.double().clone()
    exact[0] = 1.01  # the reference is off at one element only (RMS of its error ~3e-4)
    cand = ref.clone()
    cand[0] = 1.01  # right where the reference is wrong: within its accuracy
    assert compare_outputs(cand, ref, precise=lambda: [exact]).rule == PRECISE_RULE
    cand[500] = 1.01  # wrong where the reference is right (1e-2 > 2 x RMS + default): refused
    verdict = compare_outputs(cand, ref, precise=lambda: [exact])
    assert not verdict.ok and "[500]" in verdict.message


def test_the_float64_reference_is_not_asked_for_where_the_default_rule_decides():
    ref = torch.randn(64, 100)
    assert compare_outputs(ref.clone(), ref, precise=never) == compare_outputs(ref.clone(), ref)
    assert compare_outputs(ref.clone(), ref, precise=never).rule is None
    ref64 = ref.double()
    verdict = compare_outputs(ref64 * 1.01, ref64, precise=never)  # float64 outputs: the default rule only
    assert verdict.kind == "incorrect:mismatch"
    ints = torch.arange(10)
    assert compare_outputs(ints + 1, ints, precise=never).kind == "incorrect:mismatch"


def test_without_a_usable_float64_result_the_default_verdict_stands():
    cand = torch.tensor([87.9967], dtype=torch.float32)
    default = compare_outputs(cand, REF)
    for unusable in ([], [None], [torch.zeros(2, dtype=torch.float64)], [torch.tensor([float("nan")])]):
        verdict = compare_outputs(cand, REF, precise=lambda u=unusable: u)
        assert not verdict.ok and verdict.message == default.message


def test_a_non_finite_candidate_is_refused_by_the_float64_rule_too():
    ref = torch.tensor([1.0, 2.0])
    cand = torch.tensor([1.5, float("nan")])
    assert not compare_tensor(cand, ref, precise=lambda: ref.double()).ok


def test_float16_and_bfloat16_use_the_rule_too():
    for dtype in (torch.float16, torch.bfloat16):
        ref = torch.tensor([100.0], dtype=dtype)
        exact = torch.tensor([float(ref) + 8.0], dtype=torch.float64)  # the reference off by 8
        cand = torch.tensor([float(ref) + 8.0], dtype=dtype)
        assert not compare_outputs(cand, ref).ok
        assert compare_outputs(cand, ref, precise=lambda e=exact: [e]).rule == PRECISE_RULE


def test_the_rule_is_reported_through_the_native_fast_path_and_for_nested_outputs():
    cand = torch.tensor([87.9967], dtype=torch.float32)
    other = torch.randn(10)
    verdict = compare_fast((other.clone(), cand), (other, REF), precise=lambda: [other.double(), EXACT])
    assert verdict.ok and verdict.rule == PRECISE_RULE
    assert compare_fast((other.clone(), REF.clone()), (other, REF), precise=never).rule is None


def test_a_real_long_dot_product_its_best_float32_answer_passes_and_a_perturbed_one_fails():
    k = 1 << 23
    g = torch.Generator().manual_seed(0)
    a, x = torch.randn(1, k, generator=g), torch.randn(k, generator=g)
    ref = torch.mv(a, x)
    exact = torch.mv(a.double(), x.double())
    best = exact.float()  # the float32 value nearest the exact result
    assert compare_outputs(best, ref, precise=lambda: [exact]).ok
    err = float((ref.double() - exact).abs())
    tol = 2e-4 * float(ref.abs())
    side = 1.0 if float(ref) > float(exact) else -1.0
    perturbed = ref.double() + side * (PRECISE_FACTOR * err + tol + max(err, 1e-3))
    assert not compare_outputs(perturbed.float(), ref, precise=lambda: [exact]).ok
