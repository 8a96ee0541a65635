"""The native probe's budget rule (harness.case_timer.budget_applies, libtorch_budget): which candidates are judged
against the reference's own libtorch samples, and with what budget (docs/harness-workers.md, "Reference calls below
Python"). The figures are the samples of 6 Dec 2026's measurements on tiny_softmax and tiny_relu."""

from harness.case_timer import PROBE_MIN_SAMPLES, budget_applies, libtorch_budget


def _caught(used: int, share_of_all: float, ref_used: int, allowance: float) -> bool:
    return budget_applies(used, share_of_all, ref_used) and used > libtorch_budget(ref_used, allowance)


def test_a_cheat_diluted_30x_is_judged_by_the_budget_and_caught():
    """The reference op called, then ~30x as long in its own code: ~3 % of its samples in libtorch. Under the 5 %
    floor of 5 Dec the budget was not applied to it (the dilution fixtures fell there under load, 6 Dec)."""
    assert _caught(used=300, share_of_all=0.03, ref_used=290, allowance=30)
    assert _caught(used=300, share_of_all=0.17, ref_used=290, allowance=30)  # the fixtures' 3x dilution


def test_an_honest_slow_kernels_trickle_is_not_judged_by_the_budget():
    """The relu that spins 0.5 ms a call in Python: 0.4-0.5 % of its samples in libtorch (and 10 ms a call gathers
    twenty times the samples at the same share): below the floor, whatever the reference's own count."""
    assert not budget_applies(used=1_400, share_of_all=0.005, ref_used=237)


def test_honest_kernels_above_the_floor_stay_inside_the_budget():
    """The suite's relu and softmax: 2.3-3.9 % of their samples in libtorch, but few of them."""
    assert not _caught(used=30, share_of_all=0.03, ref_used=461, allowance=598)  # relu, f64-4097
    assert not _caught(used=23, share_of_all=0.039, ref_used=264, allowance=144)  # softmax, odd-33x257


def test_too_few_samples_or_no_reference_sampler_decide_nothing():
    assert not budget_applies(used=PROBE_MIN_SAMPLES - 1, share_of_all=0.5, ref_used=10)
    assert not budget_applies(used=500, share_of_all=0.5, ref_used=None)


def test_the_budget_is_half_the_reference_plus_the_allowance_with_a_floor_on_the_reference():
    assert libtorch_budget(300, 20.0) == 170.0
    assert libtorch_budget(0, 20.0) == 0.5 * PROBE_MIN_SAMPLES + 20.0
