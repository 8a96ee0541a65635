"""In the timed calls only, computes three quarters of each output and marks the rest (-1: a ReLU never returns it); a
native thread started at import fills it a fixed 50 us after forward returned (it spins until then: a sleep wakes
too late). Until issue 33's round 4 the worker sealed the outputs in a request of its own after the parent had
read the `go` reply (a round trip, ~0.1-0.5 ms), so the fill usually landed before the seal; now the seal is taken
inside `go`, microseconds after the last call returned, and the last call's output is always among those sealed."""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_relu"
EXPECT_STATIC = "cheat_detected:forbidden_api"
# two layers race, both legitimately: the seal (lazy_output) in the first unit whose gather came before the fill, and
# the per-unit CPU bound (thread_count) on case f64-4097, whose calls run back to back, so the filler spins through
# the whole unit beside them (1.7-1.9x the unit's wall time in CPU); which one comes first depends on the load
# (docs/harness-workers.md, "What catches what")
EXPECT_RUNTIME = ("cheat_detected:lazy_output", "cheat_detected:thread_count")
NEEDS_TIMING = True
# races the harness's scheduling (caught every time on an idle machine, sometimes accepted beside a whole suite's other
# pytest worker): its tests run alone (tests/support/alone.py)
RUN_ALONE = True
CAUGHT_BY = "worker: random elements of the last and of random timed calls' outputs sealed inside the go request"
CAUGHT_MESSAGE = "sealed"
HONEST_CALLS = 12  # the correctness trials (and their warm-up) see an honest kernel
DELAY_US = 50

_lib = compile_cpp(r"""
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
using Clock = std::chrono::steady_clock;
struct Job { const void* x; void* y; int64_t lo, hi; bool f64; Clock::time_point at; };
static std::mutex mu;
static std::condition_variable cv;
static std::deque<Job> jobs;
template <class T> static void relu(const T* x, T* y, int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}
template <class T> static void mark(T* y, int64_t lo, int64_t hi) { for (int64_t i = lo; i < hi; ++i) y[i] = T(-1); }
static void run(const Job& j) {
    if (j.f64) relu((const double*)j.x, (double*)j.y, j.lo, j.hi); else relu((const float*)j.x, (float*)j.y, j.lo, j.hi);
}
static void filler() {
    for (;;) {
        Job j;
        {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [] { return !jobs.empty(); });
            j = jobs.front();
            jobs.pop_front();
        }
        while (Clock::now() < j.at) {}
        run(j);
    }
}
static void later(const void* x, void* y, int64_t n, bool f64, int64_t delay_us) {
    int64_t rest = n - n / 4;  // the last quarter is left for later: a small job the filler keeps up with
    run(Job{x, y, 0, rest, f64, {}});
    if (f64) mark((double*)y, rest, n); else mark((float*)y, rest, n);
    {
        std::lock_guard<std::mutex> lock(mu);
        jobs.push_back(Job{x, y, rest, n, f64, Clock::now() + std::chrono::microseconds(delay_us)});
    }
    cv.notify_one();
}
extern "C" void start_filler() { std::thread(filler).detach(); }
extern "C" void relu_f32(const float* x, float* y, int64_t n) { relu(x, y, 0, n); }
extern "C" void relu_f64(const double* x, double* y, int64_t n) { relu(x, y, 0, n); }
extern "C" void later_f32(const float* x, float* y, int64_t n, int64_t us) { later(x, y, n, false, us); }
extern "C" void later_f64(const double* x, double* y, int64_t n, int64_t us) { later(x, y, n, true, us); }
""")
_lib.start_filler()


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.keep = []  # the inputs stay alive until the filler is done with them

    def forward(self, x):
        self.calls += 1
        x = x.contiguous()
        y = torch.empty_like(x)
        f64 = x.dtype == torch.float64
        if self.calls <= HONEST_CALLS:
            (_lib.relu_f64 if f64 else _lib.relu_f32)(x, y, x.numel())
            return y
        self.keep = (self.keep + [x])[-64:]
        (_lib.later_f64 if f64 else _lib.later_f32)(x, y, x.numel(), DELAY_US)
        return y
