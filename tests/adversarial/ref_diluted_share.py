"""Calls the reference op below Python (dispatch modes switched off) and then spins in its own compiled code for
three times as long: the share of its native time spent in libtorch falls to about a quarter, under the old 50 %
threshold (issue 33, item 4). The absolute budget (libtorch time against what the reference's own calls spent
there) is not stretched by spinning elsewhere. The same cheat on a small reference: ref_diluted_small.py."""

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
#include <cstdint>
extern "C" int64_t spin(int64_t n) {
    volatile int64_t s = 0;
    for (int64_t i = 0; i < n; ++i) s = s + i;
    return s;
}
""")

_softmax = getattr(torch, "soft" + "max")
_t0 = time.thread_time()
_lib.spin(20_000_000)
_PER_S = 20_000_000 / max(1e-6, time.thread_time() - _t0)  # spin iterations per second of CPU (load does not skew it)


class ModelNew(nn.Module):
    def forward(self, x):
        with _disable_current_modes():
            t0 = time.thread_time()
            y = _softmax(x, -1)
            took = time.thread_time() - t0
        _lib.spin(int(3 * took * _PER_S))
        return y
