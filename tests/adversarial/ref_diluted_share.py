"""Calls the reference op below Python (dispatch modes switched off) and then spins in its own compiled code for
three times as long: the share of its native time spent in libtorch falls to about a quarter, under the old 50 %
threshold (issue 33, item 4). The absolute budget (libtorch time against what the reference's own calls spent
there) is not stretched by spinning elsewhere. In its correctness trials (the dispatch recorder on torch's mode stack)
it runs an honest kernel, so the op observer of those trials (harness.op_watch) has nothing to see: only the timed
calls call the reference. The same cheat on a small reference: ref_diluted_small.py."""

import time

import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

from harness.cpu import compile_cpp

TASK = "mid_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:reference_call",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: the native probe's budget of libtorch samples (against the reference's own), not a share"
CAUGHT_MESSAGE = "budget"

_lib = compile_cpp(r"""
#include <cmath>
#include <cstdint>
#include <ctime>
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
extern "C" int64_t spin_cpu(double seconds) {  // spins until this thread has used `seconds` more CPU time
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    const double end = t.tv_sec + t.tv_nsec * 1e-9 + seconds;
    volatile int64_t s = 0;
    for (;;) {
        for (int64_t i = 0; i < 4096; ++i) s = s + i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        if (t.tv_sec + t.tv_nsec * 1e-9 >= end) return s;
    }
}
""")

_softmax = getattr(torch, "soft" + "max")
_modes = getattr(torch._C, "_len_torch_dispatch_stack")  # the harness's dispatch recorder is a mode on this stack


class ModelNew(nn.Module):
    def forward(self, x):
        if _modes():  # a checked correctness trial (the recorder and the op observer watch it): an honest kernel
            x = x.contiguous()
            y = torch.empty_like(x)
            _lib.softmax_rows(x, y, x.shape[0], x.shape[1])
            return y
        with _disable_current_modes():  # a timed call: nobody watches the dispatcher
            t0 = time.thread_time()
            y = _softmax(x, -1)
            took = time.thread_time() - t0
        _lib.spin_cpu(3 * took)  # measured on this thread's CPU clock in every call: the dilution is 3x under any load
        return y
