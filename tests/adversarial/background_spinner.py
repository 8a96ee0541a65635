"""Computes honestly, but a native thread started at import keeps spinning while the harness waits:
the reference, timed on the same cores, gets less of them and looks slower (a "speedup" for free)."""

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:background_work", "cheat_detected:thread_count")
NEEDS_TIMING = True
CAUGHT_BY = "parent: the candidate's CPU time (/proc/PID/task/*/schedstat) while the reference's unit is timed"

_lib = compile_cpp(r"""
#include <atomic>
#include <cmath>
#include <cstdint>
#include <thread>
static std::atomic<uint64_t> sink{0};
extern "C" void start_spinner() {
    std::thread([] { for (uint64_t i = 0;; ++i) sink.store(i, std::memory_order_relaxed); }).detach();
}
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float m = xr[0];
        for (int64_t i = 1; i < n; ++i) m = xr[i] > m ? xr[i] : m;
        double s = 0;
        for (int64_t i = 0; i < n; ++i) { yr[i] = std::exp(xr[i] - m); s += yr[i]; }
        for (int64_t i = 0; i < n; ++i) yr[i] = float(yr[i] / s);
    }
}
""")
_lib.start_spinner()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.softmax_rows(x, y, x.shape[0], x.shape[1])
        return y
