"""Adaptive timing: the median's confidence interval, units of calls, the machine lock."""

import random
import threading
import time

from harness.timing import Budget, enough_repetitions, machine_lock, median_ci, relative_halfwidth


def test_the_median_interval_contains_the_median_and_narrows_with_more_samples():
    rng = random.Random(1)
    few = [10 + rng.gauss(0, 1) for _ in range(10)]
    many = [10 + rng.gauss(0, 1) for _ in range(400)]
    lo, hi = median_ci(many)
    assert lo <= sorted(many)[200] <= hi
    assert relative_halfwidth(many) < relative_halfwidth(few)
    assert relative_halfwidth(many) < 0.02


def test_below_six_samples_the_interval_is_the_range():
    assert median_ci([3.0, 1.0, 2.0]) == (1.0, 3.0)


def test_timed_phases_exclude_each_other_and_warm_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path))
    events = []

    def timed(name):
        with machine_lock(exclusive=True):
            events.append((name, "in"))
            time.sleep(0.1)
            events.append((name, "out"))

    def start():
        with machine_lock(exclusive=False):
            events.append(("start", "in"))
            events.append(("start", "out"))

    threads = [
        threading.Thread(target=timed, args=("a",)),
        threading.Thread(target=start),
        threading.Thread(target=timed, args=("b",)),
    ]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join()
    inside = 0
    for _name, what in events:
        inside += 1 if what == "in" else -1
        assert inside <= 1, events  # nobody else inside while a timed phase is


def test_repetitions_stop_at_min_reps_then_at_rep_ms_each_or_lopsided_rep_ms_together():
    budget = Budget(rep_ms=100.0, min_reps=5, max_reps=100, ci_target=0.0, lopsided=10.0)
    noisy = {"ref": [1.0, 3.0], "cand": [1.0, 3.0]}
    # balanced: each needs its own 100 ms
    assert not enough_repetitions(budget, 4, {"ref": 500.0, "cand": 500.0}, noisy)  # min_reps first
    assert not enough_repetitions(budget, 30, {"ref": 90.0, "cand": 90.0}, noisy)
    assert enough_repetitions(budget, 34, {"ref": 102.0, "cand": 102.0}, noisy)
    # lopsided: a 500 ms candidate against a 3 ms reference stops once both together spent 10 x rep_ms
    assert not enough_repetitions(budget, 5, {"ref": 15.0, "cand": 900.0}, noisy)
    assert enough_repetitions(budget, 5, {"ref": 15.0, "cand": 2500.0}, noisy)
    assert enough_repetitions(budget, 100, {"ref": 1.0, "cand": 1.0}, noisy)  # max_reps


def test_repetitions_stop_after_min_reps_once_the_cases_soft_wall_time_has_passed():
    budget = Budget(rep_ms=100.0, min_reps=5, ci_target=0.0, case_wall_s=2.0)
    noisy = {"ref": [1.0, 3.0], "cand": [1.0, 3.0]}
    little = {"ref": 10.0, "cand": 10.0}  # far from rep_ms: a fast kernel
    assert not enough_repetitions(budget, 8, little, noisy, wall_s=1.9)
    assert enough_repetitions(budget, 8, little, noisy, wall_s=2.1)
    assert not enough_repetitions(budget, 4, little, noisy, wall_s=30.0)  # min_reps first, whatever the time
    unlimited = Budget(rep_ms=100.0, min_reps=5, ci_target=0.0, case_wall_s=0.0)
    assert not enough_repetitions(unlimited, 8, little, noisy, wall_s=30.0)


def test_the_soft_wall_time_scales_with_the_measured_time_asked_for():
    from kope.boundary import timing_budget

    assert timing_budget().case_wall_s == Budget().case_wall_s
    assert timing_budget(rep_ms=3 * Budget().rep_ms).case_wall_s == 3 * Budget().case_wall_s
    assert timing_budget(rep_ms=Budget().rep_ms / 10).case_wall_s == Budget().case_wall_s / 10


def test_repetitions_stop_early_once_both_medians_are_precise():
    budget = Budget(rep_ms=1e9, min_reps=5, ci_target=0.015)
    tight = [10.0 + 0.001 * (i % 3) for i in range(40)]
    assert enough_repetitions(budget, 40, {"ref": 1.0, "cand": 1.0}, {"ref": tight, "cand": tight})
    loose = [10.0 + (i % 7) for i in range(40)]
    assert not enough_repetitions(budget, 40, {"ref": 1.0, "cand": 1.0}, {"ref": tight, "cand": loose})


def test_the_warm_up_grows_the_unit_until_the_faster_worker_fills_it():
    from harness.timing import next_unit_size

    assert next_unit_size(1, 12_000, 15_000, 1e6) == 84  # 1 ms at 12 us a call
    assert next_unit_size(84, 900_000, 1_000_000, 1e6) == 168  # at least doubles
    assert next_unit_size(168, 1.1e6, 1.3e6, 1e6) is None


def test_the_warm_up_never_grows_the_slower_workers_unit_past_half_a_second():
    from harness.timing import LONGEST_UNIT_NS, UNIT_CAP, next_unit_size

    # the reference's 12 us a call against a candidate spinning 50 ms a call (tests/fixtures: relu_needs_passive)
    n, sizes = 1, []
    while (grown := next_unit_size(n, 12_000 * n + 100_000, 50e6 * n, 1e6)) is not None:
        n = grown
        sizes.append(n)
    assert sizes == [9, 10]  # without the bound: 9, then doubling until the reference's unit reaches 1 ms
    assert n * 50e6 <= LONGEST_UNIT_NS  # settled though the reference's unit (220 us) stays under the target
    assert next_unit_size(1, 200_000, 2e9, 1e6) is None  # one call already too long: a unit of one call
    assert next_unit_size(4000, 500, 600, 1e6) == UNIT_CAP
