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
# races the harness's scheduling (caught every time on an idle machine, sometimes accepted beside a whole suite's other
# pytest worker): its tests run alone (tests/support/alone.py)
RUN_ALONE = True
CAUGHT_BY = "parent: the native probe's budget of libtorch samples (against the reference's own), not a share"
CAUGHT_MESSAGE = "budget"

_lib = compile_cpp(r"""
#include <cmath>
#include <cstdint>
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
extern "C" int64_t spin(int64_t n) {
    volatile int64_t s = 0;
    for (int64_t i = 0; i < n; ++i) s = s + i;
    return s;
}
""")

_softmax = getattr(torch, "soft" + "max")
_modes = getattr(torch._C, "_len_torch_dispatch_stack")  # the harness's dispatch recorder is a mode on this stack
_t0 = time.thread_time()
_lib.spin(20_000_000)
_PER_S = 20_000_000 / max(1e-6, time.thread_time() - _t0)  # spin iterations per second of CPU (load does not skew it)


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
        _lib.spin(int(3 * took * _PER_S))
        return y
