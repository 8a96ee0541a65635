"""A profile function installed at the C level (``PyEval_SetProfile`` through ctypes, no profile object: the
interpreter reports no hook, ``sys.getprofile()`` stays None) computes the reference's result while the harness
prepares a timed unit's inputs (the return of ``InputRing.inputs``, outside every timed window and the native
probe's samples); forward hands it back. In its correctness trials nothing is cached and it runs an honest kernel.
The interpreter-hook check cannot see it (issue 33, item 3: the native variant of hook_profile_inputs.py); the
candidate's CPU in the prepare windows, against the reference worker's doing the same preparation, does."""

import ctypes

import torch
import torch.nn as nn

from harness.cpu import compile_cpp

TASK = "mid_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:background_work",)
NEEDS_TIMING = True
CAUGHT_BY = "parent: the candidate's CPU while it prepares a unit's inputs, against the reference worker's"
CAUGHT_MESSAGE = "prepared"

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
extern "C" void copy(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i]; }
""")


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _lib.softmax_rows(x, y, x.shape[0], x.shape[1])
    return y


_ready = {}
_RETURN = 3  # PyTrace_RETURN


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.py_object, ctypes.c_int, ctypes.c_void_p)
def _spy(_obj, frame, what, arg):
    if what == _RETURN and arg and frame.f_code.co_name == "inputs" and "worker_timed" in frame.f_code.co_filename:
        for x in ctypes.cast(arg, ctypes.py_object).value:
            if isinstance(x, torch.Tensor):
                _ready[(x.data_ptr(), tuple(x.shape))] = softmax(x)  # the work, done while inputs are prepared
    return 0


ctypes.pythonapi.PyEval_SetProfile.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
ctypes.pythonapi.PyEval_SetProfile(ctypes.cast(_spy, ctypes.c_void_p), None)


class ModelNew(nn.Module):
    def forward(self, x):
        ready = _ready.pop((x.data_ptr(), tuple(x.shape)), None)
        if ready is None:
            return softmax(x)
        y = torch.empty_like(ready)  # a fresh output, one pass over memory in its own code: not the work
        _lib.copy(ready, y, y.numel())
        return y
