"""Timing: interleaved, fresh inputs every repetition, flushed before every call, by time budget."""

import time

import torch

from harness.timing import Budget, CpuTimer, measure


class FakeTimer:
    method = "fake"

    def __init__(self):
        self.flushes = 0

    def flush(self, tensors):
        self.flushes += 1

    def time(self, fn):
        start = time.perf_counter()
        out = fn()
        return (time.perf_counter() - start) * 1e3, out


def test_reference_and_candidate_alternate_on_fresh_inputs():
    calls, seen_inputs = [], []

    def ref(x):
        calls.append("ref")
        seen_inputs.append(float(x[0]))
        return x + 1

    def cand(x):
        calls.append("cand")
        return x + 1

    timer = FakeTimer()
    result = measure(
        ref,
        cand,
        lambda rep: [torch.full((4,), float(rep))],
        ([], []),
        timer,
        Budget(warmup_ms=0, rep_ms=1e-6, min_reps=4, max_reps=4),
        keep={2},
    )
    timed = calls[2:]  # after one warm-up call of each
    assert timed == ["ref", "cand", "cand", "ref", "ref", "cand", "cand", "ref"]
    assert seen_inputs[1:] == [0.0, 1.0, 2.0, 3.0]  # a new input set for every repetition
    assert len(result.ref_ms) == len(result.cand_ms) == 4
    assert timer.flushes == len(calls)  # a flush before every call
    assert set(result.kept) == {2, 3} and torch.equal(result.kept[2], torch.full((4,), 3.0))


def test_repetitions_stop_at_the_time_budget():
    def slow(x):
        time.sleep(0.002)
        return x

    result = measure(
        slow,
        slow,
        lambda rep: [torch.zeros(1)],
        ([], []),
        FakeTimer(),
        Budget(warmup_ms=0, rep_ms=20, min_reps=2, max_reps=1000),
        keep=set(),
    )
    assert 5 <= len(result.cand_ms) <= 15


def test_min_reps_are_run_even_for_slow_calls():
    def slow(x):
        time.sleep(0.02)
        return x

    result = measure(
        slow,
        slow,
        lambda rep: [torch.zeros(1)],
        ([], []),
        FakeTimer(),
        Budget(warmup_ms=0, rep_ms=1, min_reps=3, max_reps=10),
        keep=set(),
    )
    assert len(result.ref_ms) == 3


def test_cpu_timer_flushes_cache_lines_and_times_a_call():
    timer = CpuTimer(scrub_bytes=4 << 20)
    assert timer.method == "clflush+scrub"
    x = torch.randn(1 << 16)
    timer.flush([x])  # must not crash on real memory
    ms, out = timer.time(lambda: x.sum())
    assert ms > 0 and torch.is_tensor(out)
