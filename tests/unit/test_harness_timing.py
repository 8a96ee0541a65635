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


US = 1_000


def test_the_wait_bound_judges_the_sum_over_all_units_and_names_the_stretch():
    from harness.timing import wait_overrun

    honest = [[(40 * US, 50 * US), (30 * US, 30 * US), (20 * US, 25 * US)]] * 10
    assert wait_overrun(honest) is None and wait_overrun([]) is None
    # work spread thinly over every stretch (no lump): the sum over all units, twice the reference's plus 0.2 ms a unit
    at = [[(100 * US, 300 * US), (0, 100 * US), (0, 0)]] * 4
    assert wait_overrun(at) is None
    found = wait_overrun(at[:3] + [[(100 * US, 300 * US), (0, 100 * US + 1), (0, 0)]])
    assert found is not None and "1.60 ms of CPU against the reference worker's 0.40 ms over 4 units" in found
    assert "1.20 ms of it between the prepare reply and its go request (the reference worker's 0.40 ms)" in found
    # ... and thread: a team's threads going to sleep after each unit
    assert wait_overrun([[(100 * US, 400 * US), (0, 200 * US), (0, 0)]] * 4, threads=2) is None


def test_the_wait_bound_names_a_lump_of_work_in_one_wait_which_a_replys_tail_never_is():
    """0.5 ms of work after the candidate's unit, in the reference's unit in every other unit (the order alternates)
    and in the fetch window in the rest: a median would not move; a stretch holds at most a reply's tail."""
    from harness.timing import wait_overrun

    burst = [
        [(40 * US, 50 * US), (30 * US, 30 * US + (500 * US if i % 2 else 0)), (20 * US, 25 * US)] for i in range(9)
    ]
    found = wait_overrun(burst)
    assert found is not None and "0.53 ms of CPU between its go reply and the fetch request in unit 2 of 9" in found
    assert "4 such lumps" in found
    assert wait_overrun([[(0, 0), (0, 0), (0, 0)]] * 8 + [[(0, 0), (0, 200 * US), (0, 0)]]) is None
    # one lump is enough: a stretch over twice the reference worker's plus a tail (0.25 ms) ...
    one = [[(0, 0), (0, 0), (0, 0)]] * 8 + [[(0, 0), (0, 250 * US + 1), (0, 0)]]
    assert wait_overrun(one) is not None and wait_overrun(one[:-1] + [[(0, 0), (0, 250 * US), (0, 0)]]) is None
    # ... measured against twice the reference worker's CPU in the same stretch, and per timing thread
    assert wait_overrun(one[:-1] + [[(0, 0), (100 * US, 450 * US), (0, 0)]]) is None
    assert wait_overrun(one, threads=2) is None


def test_untimed_cpu_splits_a_units_stretches_between_the_readings():
    from harness.timing import UntimedCpu

    cpu = UntimedCpu()
    cpu.open_prepare((0, 0))  # before the first measured unit: no unit to end
    cpu.close_prepare((10, 20))
    cpu.wait(0, 0, 11)  # the reference's go: 1 ns since the prepare reply
    cpu.last[0] = 100  # its unit's calls
    cpu.wait(0, 1, 25)  # the candidate's go, after the reference's unit: 5 ns
    cpu.last[1] = 200
    cpu.open_fetch((103, 207))  # 3 and 7 ns between their go replies and the fetch request
    cpu.close_fetch((103, 207), (110, 220))
    cpu.open_prepare((111, 222))  # the next unit's prepare
    cpu.close_prepare((150, 260))
    cpu.wait(0, 0, 150)
    assert cpu.prepared == [(10, 20), (39, 38)] and cpu.fetches == [(7, 13)]
    assert cpu.waits == [[[1, 5], [3, 7], [1, 2]]]
    assert cpu.overrun() is None and cpu.waits[1] == [[0, 0], [0, 0], [0, 0]]  # the last unit ended too


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
