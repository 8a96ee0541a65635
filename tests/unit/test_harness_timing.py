"""The CPU timer: cache lines flushed before a call, the call timed."""

import torch

from harness.timing import CpuTimer


def test_cpu_timer_flushes_cache_lines_and_times_a_call():
    timer = CpuTimer(scrub_bytes=4 << 20)
    assert timer.method == "clflush+scrub"
    x = torch.randn(1 << 16)
    timer.flush([x])  # must not crash on real memory
    ms, out = timer.time(lambda: x.sum())
    assert ms > 0 and torch.is_tensor(out)


MS = 1_000_000


def test_the_prepare_bound_judges_the_lower_median_window():
    from harness.timing import prepare_overrun

    # the four honest runs the first version flagged had two windows, the larger one over twice the reference's
    assert prepare_overrun([(24.24 * MS, 15.51 * MS), (14.32 * MS, 36.56 * MS)]) is None
    # a precomputed result in most units: 10.4 ms against 2.0 ms (tests/adversarial/hook_c_profile_prepare.py)
    found = prepare_overrun([(2.0 * MS, 10.4 * MS)] * 3 + [(2.0 * MS, 2.1 * MS)] * 2)
    assert found is not None and "10.40 ms of CPU against the reference worker's 2.00 ms" in found
    assert "median of 5 units" in found
    # in two units of five only: the median unit has none
    assert prepare_overrun([(2.0 * MS, 10.4 * MS)] * 2 + [(2.0 * MS, 2.1 * MS)] * 3) is None
    # the bound itself: three times the reference's plus 0.5 ms
    assert prepare_overrun([(2.0 * MS, 6.5 * MS)]) is None
    assert prepare_overrun([(2.0 * MS, 6.6 * MS)]) is not None
    assert prepare_overrun([]) is None


def test_the_fetch_bound_judges_the_lower_median_window_at_twice_the_reference_workers():
    from harness.timing import fetch_overrun

    # honest: the reference worker runs the candidate worker's fetch checks, 0.9-1.0x measured (suite relu, 9 cases)
    assert fetch_overrun([(2.09 * MS, 2.16 * MS), (1.49 * MS, 1.38 * MS), (1.74 * MS, 1.70 * MS)]) is None
    # outputs computed while they are described: 10.34 ms against 2.14 ms (tests/adversarial/hook_c_profile_fetch.py)
    found = fetch_overrun([(2.14 * MS, 10.34 * MS)] * 3 + [(2.1 * MS, 2.0 * MS)] * 2)
    assert found is not None and "10.34 ms of CPU against the reference worker's 2.14 ms" in found
    assert "median of 5 units" in found
    # an odd unit, or the larger of two, does not decide
    assert fetch_overrun([(2.0 * MS, 10.4 * MS)] * 2 + [(2.0 * MS, 2.1 * MS)] * 3) is None
    assert fetch_overrun([(2.0 * MS, 2.1 * MS), (2.0 * MS, 30 * MS)]) is None
    # the bound itself: twice the reference's plus 0.5 ms
    assert fetch_overrun([(2.0 * MS, 4.5 * MS)]) is None
    assert fetch_overrun([(2.0 * MS, 4.6 * MS)]) is not None
    assert fetch_overrun([]) is None


def test_timed_calls_leave_one_core_to_the_parent_and_the_os():
    from harness.timing import timing_threads

    # the default: every usable core but one, where there is more than one
    assert timing_threads(None, 1) == 1
    assert timing_threads(None, 2) == 1
    assert timing_threads(None, 16) == 15
    # a requested count is honoured where it fits, capped where it does not
    assert timing_threads(1, 2) == 1
    assert timing_threads(4, 8) == 4
    assert timing_threads(7, 8) == 7
    assert timing_threads(8, 8) == 7
    assert timing_threads(2, 2) == 1
    assert timing_threads(3, 1) == 1  # one core: nothing to leave, one thread
