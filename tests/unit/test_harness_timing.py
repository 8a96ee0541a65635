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
