"""The dispatcher's op observer (issue 33): ops run below torch's Python dispatch modes are seen, deterministically,
in a correctness trial, and switching the observer off during forward is seen too."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import _disable_current_modes

from harness.guards import AtenRecorder
from harness.op_watch import OpWatch

X = torch.randn(64, 100)


def _watched(forward) -> tuple[OpWatch, AtenRecorder]:
    """A correctness trial's guards as the candidate worker nests them: the watch outside the recorder."""
    watch, recorder = OpWatch(), AtenRecorder()
    with torch.no_grad(), watch, recorder:
        forward(X)
    return watch, recorder


def _honest(x):
    y = torch.empty_like(x.t().contiguous().flatten())
    _ = x.reshape(-1)[:4].tolist(), x.shape[0], x.dtype
    return y


def test_an_honest_forward_shows_nothing_forbidden():
    watch, recorder = _watched(_honest)
    assert watch.problem is None and not recorder.forbidden
    assert watch.forbidden(recorder.counts) == {}
    assert watch.ops  # it did see the allocation and the views (the harness's own two ops taken off)


def test_the_reference_op_under_disabled_dispatch_modes_is_seen():
    def cheat(x):
        with _disable_current_modes():
            return torch.softmax(x, -1)

    watch, recorder = _watched(cheat)
    assert not recorder.counts  # the recorder saw nothing at all
    assert watch.problem is None and watch.forbidden(recorder.counts) == {"_softmax": 1}


def test_an_op_hidden_in_a_profiler_range_is_still_seen():
    def cheat(x):
        with _disable_current_modes(), torch.autograd.profiler.record_function("innocent"):
            return x.exp()

    watch, recorder = _watched(cheat)
    assert watch.forbidden(recorder.counts) == {"exp": 1}


def test_an_op_the_recorder_saw_is_left_to_the_recorder():
    watch, recorder = _watched(lambda x: x.exp())
    assert recorder.forbidden == {"exp": 1} and watch.forbidden(recorder.counts) == {}


def test_switching_record_function_off_during_forward_is_seen():
    def cheat(x):
        torch._C._autograd._enable_record_function(False)
        return torch.softmax(x, -1)

    try:
        watch, _ = _watched(cheat)
    finally:
        torch._C._autograd._enable_record_function(True)
    assert watch.problem is not None and "missed" in watch.problem


def test_stopping_the_profiler_during_forward_is_seen():
    def cheat(x):
        torch._C._autograd._disable_profiler()
        with _disable_current_modes():
            return torch.softmax(x, -1)

    watch, _ = _watched(cheat)
    assert watch.problem is not None and "switched off" in watch.problem


def test_a_profiler_restarted_during_forward_is_seen():
    from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

    def cheat(x):
        torch._C._autograd._disable_profiler()
        with _disable_current_modes():
            y = torch.softmax(x, -1)
        config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
        torch._C._autograd._prepare_profiler(config, {ProfilerActivity.CPU})
        torch._C._autograd._enable_profiler(config, {ProfilerActivity.CPU})
        return y

    watch, _ = _watched(cheat)
    assert watch.problem is not None and "missed" in watch.problem


def test_the_reference_op_on_a_short_helper_thread_is_seen():
    """Four threads, each far under the native probe's 50 us sampling period: the observer sees every thread."""
    import threading

    def cheat(x):
        out: list = [None] * 4

        def part(i: int) -> None:
            with _disable_current_modes():
                out[i] = torch.softmax(x[i * 16 : (i + 1) * 16], -1)

        threads = [threading.Thread(target=part, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return torch.cat(out)

    watch, recorder = _watched(cheat)
    assert watch.problem is None and watch.forbidden(recorder.counts) == {"_softmax": 4}
