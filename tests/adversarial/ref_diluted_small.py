"""ref_diluted_share.py on a small reference: tiny_softmax's 64x1000 case spends 45-60 us a call in libtorch, where
an honest kernel's own dispatch (torch.empty_like for its output) is no longer negligible. The budget allows half of
the reference's libtorch time plus the dispatch an honest kernel's call cannot avoid, calibrated on this machine in
the reference worker (harness.dispatch_allowance); until that allowance the budget applied only from 50 us a call
and this cheat was caught on one run and not on the next (issue 33). Like ref_diluted_share.py it is honest in its
correctness trials, where the op observer watches."""

import time

import torch
import torch.nn as nn
from torch.utils._python_dispatch import _disable_current_modes

from harness.cpu import compile_cpp

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:reference_call",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: the native probe's budget of libtorch samples (against the reference's own plus the calibrated dispatch allowance)"
CAUGHT_MESSAGE = "calibrated on this machine"

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
