"""Computes honestly, but a native thread started at import wakes when a unit's calls are over (no call began for
400 us after one ended, longer than the gaps between a unit's calls: its `go` has returned) and computes for 0.8 ms of its own CPU while the worker waits for its next request. In every
other unit the order puts the reference's timed unit right there, so the burst takes a core from it (a "speedup" for
free); in the others it falls in the fetch window. Under the idle check's allowance in each of the reference's units
and over all of them (5 ms plus a quarter of the reference's CPU), and in no more than half of the fetch windows
(the lower median decides there), so the checks before issue 33's round 5 accepted it; the candidate's CPU in every
stretch it waits, against the reference worker's, does not. The burst stops as soon as a call begins again, so it
does not run on beside the candidate's next timed calls (where the per-unit thread check would name it)."""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
# the wait bound nearly always: with the 400 us quiet wait the burst seldom runs beside a unit's calls (5 Dec, 18:15-18:37
# UTC: the per-unit thread check named it in none of ~40 runs at 0-4 busy loops, the wait bound in all the others;
# with the 50 us wait of the first version the thread check had named it in 1 run in 3), but it still can: in the
# lead's whole-suite run of 5 Dec 23:04-23:30 UTC (the test alone, machine otherwise idle) the per-unit CPU bound named
# it (71.6 ms of CPU in a 51.7 ms unit: bursts in the gaps between a unit's calls, each call's inputs being fresh and
# flushed). Two layers race legitimately, as for lazy_fill_short_delay.py. Under load it is accepted (2 of 6 runs
# beside 4 busy loops; once at load 3.4-3.9 with none): its burst then used 0-0.2 ms in the waits over 5 units, in
# the fetch window instead (docs/harness-workers.md, "Known limits")
EXPECT_RUNTIME = ("cheat_detected:background_work", "cheat_detected:thread_count")
NEEDS_TIMING = True
# races the harness's scheduling (caught every time on an idle machine, sometimes accepted beside a whole suite's other
# pytest worker): its tests run alone (tests/support/alone.py)
RUN_ALONE = True
CAUGHT_BY = "parent: the candidate's CPU while it waits for its next request, against the reference worker's"
CAUGHT_MESSAGE = "waited for their next requests"

_lib = compile_cpp(r"""
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <thread>
static std::mutex mu;
static std::condition_variable cv;
static uint64_t calls = 0;
static volatile uint64_t sink = 0;
static std::atomic<uint64_t> begun{0};  // calls begun: the burst gives way to the next unit's first call
static int64_t thread_ns() {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}
extern "C" void start_helper(int64_t quiet_us, int64_t burst_us) {
    std::thread([=] {
        std::unique_lock<std::mutex> lock(mu);
        uint64_t seen = 0;
        for (;;) {
            cv.wait(lock, [&] { return calls != seen; });  // a call ended ...
            seen = calls;
            const uint64_t at = begun.load();
            // ... and the unit's calls are over once no other call began within quiet_us
            if (cv.wait_for(lock, std::chrono::microseconds(quiet_us), [&] { return begun.load() != at; })) continue;
            lock.unlock();
            for (int64_t end = thread_ns() + burst_us * 1000; thread_ns() < end && begun.load() == at;) sink = sink + 1;
            lock.lock();
        }
    }).detach();
}
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t n) {
    { std::lock_guard<std::mutex> guard(mu); begun.fetch_add(1); }
    cv.notify_one();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float m = xr[0];
        for (int64_t i = 1; i < n; ++i) m = xr[i] > m ? xr[i] : m;
        double s = 0;
        for (int64_t i = 0; i < n; ++i) { yr[i] = std::exp(xr[i] - m); s += yr[i]; }
        for (int64_t i = 0; i < n; ++i) yr[i] = float(yr[i] / s);
    }
    { std::lock_guard<std::mutex> guard(mu); ++calls; }
    cv.notify_one();
}
""")
_lib.start_helper(400, 800)  # longer than the gaps between a unit's calls (each call gets fresh inputs and a cache flush)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.softmax_rows(x, y, x.shape[0], x.shape[1])
        return y
