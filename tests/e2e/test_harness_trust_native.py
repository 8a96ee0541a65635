"""Reference work below Python (issue 33, item 4): the native probe samples threads started after it opened and
judges libtorch time against an absolute budget, and the dispatch recorder cannot be switched off through the classes
it inherits from. Each cheat is caught by the layer named; each honest control is accepted."""

import math
import os
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness import case_timer, native_probe
from harness.evaluate import EvalOptions, evaluate
from harness.guards import AtenRecorder, PatchSnapshot, dispatch_depth
from harness.timing import Budget
from harness.worker_pool import Limits

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("harness_trace")  # its trace printed when a verdict is wrong
SOFTMAX = ROOT / "fixtures" / "tasks" / "tiny_softmax.py"
# the dilution cheat's task: a reference that spends 0.2-0.5 ms a call in libtorch (ref_diluted_small: tiny_softmax)
MID_SOFTMAX = ROOT / "fixtures" / "tasks" / "mid_softmax.py"
OPTIONS = EvalOptions(
    static_checks=False,
    budget=Budget(warmup_ms=5, rep_ms=20),
    limits=Limits(memory_bytes=2 << 30),
    case_timeout_s=60,
)

needs_perf = pytest.mark.skipif(not native_probe.available(), reason="perf events unavailable here")


def _caught(name: str, **overrides):
    from tests.e2e.test_harness_adversarial import constants

    path = ROOT / "adversarial" / f"{name}.py"
    spec = constants(path)
    task = ROOT / "fixtures" / "tasks" / f"{spec['TASK']}.py"
    outcome = evaluate(task, path, OPTIONS, timing=bool(spec.get("NEEDS_TIMING")), **overrides)
    assert outcome.error_kind in spec["EXPECT_RUNTIME"], outcome.error_excerpt
    assert spec["CAUGHT_MESSAGE"] in (outcome.error_excerpt or ""), outcome.error_excerpt  # the layer that caught it
    assert outcome.cases_passed == 0 and outcome.speedup is None
    return outcome


@needs_perf
@pytest.mark.slow
def test_the_reference_on_a_fresh_helper_thread_is_caught_by_the_inherited_perf_events():
    _caught("ref_fresh_thread")


@needs_perf
@pytest.mark.slow
def test_without_inherited_events_the_fresh_helper_thread_went_unseen(monkeypatch):
    """The control for the layer: the same cheat against a sampler of the threads that existed when it opened."""
    monkeypatch.setattr(native_probe, "INHERIT", 0)
    outcome = evaluate(SOFTMAX, ROOT / "adversarial" / "ref_fresh_thread.py", OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


@needs_perf
@pytest.mark.slow
def test_spinning_in_its_own_code_does_not_dilute_the_libtorch_budget():
    _caught("ref_diluted_share")


@needs_perf
@pytest.mark.slow
def test_with_the_share_alone_the_spinning_cheat_was_accepted(monkeypatch):
    """The control for the layer: without the budget the 50 % share is diluted and the cheat passes."""
    monkeypatch.setattr(case_timer, "REFERENCE_BUDGET", math.inf)
    outcome = evaluate(MID_SOFTMAX, ROOT / "adversarial" / "ref_diluted_share.py", OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


@needs_perf
@pytest.mark.slow
def test_the_diluted_cheat_on_a_small_reference_is_caught_within_the_calibrated_allowance():
    """tiny_softmax's 64x1000 case (45-60 us a call in libtorch): under the old 50 us line, now inside the budget."""
    outcome = _caught("ref_diluted_small")
    assert "for " in (outcome.error_excerpt or "") and "calls' own allocations" in (outcome.error_excerpt or "")


@needs_perf
@pytest.mark.slow
def test_the_allowance_is_calibrated_once_per_process_in_the_reference_worker():
    from harness import dispatch_allowance

    dispatch_allowance.forget()
    _caught("ref_diluted_small")
    (found,) = dispatch_allowance._cache.values()
    assert found.calls > 0 and found.samples >= 0
    again = _caught("ref_diluted_small")  # the cached calibration serves the next evaluation
    assert dispatch_allowance._cache[next(iter(dispatch_allowance._cache))] is found, again.error_excerpt


@needs_perf
@pytest.mark.slow
@pytest.mark.parametrize(
    "task, candidate",
    [
        ("tiny_relu", ROOT.parent / "harness" / "suite" / "candidates" / "cpu" / "relu.py"),
        ("tiny_relu", ROOT / "fixtures" / "deployed" / "relu_needs_passive.py"),  # 0.5 ms of Python spin a call
        ("tiny_softmax", ROOT.parent / "harness" / "suite" / "candidates" / "cpu" / "softmax.py"),
    ],
    ids=["relu", "relu_python_spin", "softmax"],
)
def test_honest_kernels_on_small_references_stay_within_the_budget(task, candidate):
    """Both tiny_relu cases (the 4097-element one: ~3 us a call in libtorch, less than an honest kernel's own
    dispatch) and tiny_softmax: the budget applies at every size and honest kernels are accepted."""
    outcome = evaluate(ROOT / "fixtures" / "tasks" / f"{task}.py", candidate, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.cases_passed == outcome.cases_total and outcome.speedup is not None


@needs_perf
@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_softmax_fresh_thread", "tiny_softmax_slow_openmp"])
def test_honest_kernels_on_fresh_threads_or_spinning_in_their_own_code_are_accepted(name):
    outcome = evaluate(SOFTMAX, ROOT / "fixtures" / "honest" / f"{name}.py", OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.cases_passed == outcome.cases_total and outcome.speedup is not None


def test_the_reference_under_disabled_dispatch_modes_is_caught_without_timing():
    """The dispatcher's op observer (RecordFunction) sees what the dispatch-mode recorder does not: deterministic,
    in the first correctness trial, with timing off (before, only the native probe's samples of timed units)."""
    path = ROOT / "adversarial" / "ref_dispatch_disabled.py"
    outcome = evaluate(SOFTMAX, path, OPTIONS, timing=False)
    assert outcome.error_kind == "cheat_detected:reference_call", outcome.error_excerpt
    assert "op observer" in (outcome.error_excerpt or "") and "aten._softmax" in (outcome.error_excerpt or "")
    assert outcome.cases_passed == 0 and outcome.speedup is None


def test_stopping_the_op_observer_in_forward_is_caught():
    outcome = _caught("ref_profiler_off")
    assert outcome.status.value == "cheat_detected"


def test_patching_the_dispatch_modes_base_class_is_caught_without_timing():
    outcome = _caught("patch_dispatch_mode")
    assert outcome.status.value == "cheat_detected"


def test_the_snapshot_watches_every_class_on_the_recorders_mro():
    snapshot = PatchSnapshot()
    original = TorchDispatchMode.__exit__
    try:
        TorchDispatchMode.__exit__ = lambda self, *exc: None  # type: ignore[method-assign]
        changes = snapshot.changes()
    finally:
        TorchDispatchMode.__exit__ = original  # type: ignore[method-assign]
    assert any("TorchDispatchMode.__exit__ was replaced" in c for c in changes), changes


def test_the_recorder_knows_from_the_c_stack_whether_it_is_active():
    """A no-op __enter__ switched in and out between the snapshot's checks still leaves the recorder off the stack."""
    recorder = AtenRecorder()
    with recorder:
        assert recorder.on_stack() and dispatch_depth() == 1
        torch.ones(2).sin()
    assert recorder.counts.get("sin") == 1 and not recorder.on_stack() and dispatch_depth() == 0
    original = TorchDispatchMode.__enter__
    try:
        TorchDispatchMode.__enter__ = lambda self: self  # type: ignore[method-assign]
        off = AtenRecorder()
        off.__enter__()
        assert not off.on_stack()
    finally:
        TorchDispatchMode.__enter__ = original  # type: ignore[method-assign]


# Issue 33, item 5: CPU time of threads that exited inside a timed call counts against the thread limit.
_EXITED_THREADS = r'''
import torch
import torch.nn as nn

from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <cmath>
#include <cstdint>
#include <thread>
static void rows(const float* x, float* y, int64_t lo, int64_t hi, int64_t n) {
    for (int64_t r = lo; r < hi; ++r) {
        const float* xr = x + r * n;
        float* yr = y + r * n;
        float m = xr[0];
        for (int64_t i = 1; i < n; ++i) m = xr[i] > m ? xr[i] : m;
        double s = 0;
        for (int64_t i = 0; i < n; ++i) { yr[i] = std::exp(xr[i] - m); s += yr[i]; }
        for (int64_t i = 0; i < n; ++i) yr[i] = float(yr[i] / s);
        volatile double spin = 0;  // more work per row, so the threads overlap for most of the call
        for (int64_t k = 0; k < 20000; ++k) spin = spin + k;
    }
}
extern "C" void softmax_eight_threads(const float* x, float* y, int64_t n_rows, int64_t n) {
    std::thread t[8];
    for (int64_t k = 0; k < 8; ++k) t[k] = std::thread(rows, x, y, n_rows * k / 8, n_rows * (k + 1) / 8, n);
    for (auto& one : t) one.join();
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.softmax_eight_threads(x, y, x.shape[0], x.shape[1])
        return y
'''


def _cores_free() -> float:
    """How many cores two busy processes get now (CPU time over wall time, 0.3 s)."""
    import subprocess
    import sys
    import time

    spin = "import time\nt = time.perf_counter()\nwhile time.perf_counter() - t < 0.3: pass\n"
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2)]
    used = 0.0
    for proc in procs:
        used += os.wait4(proc.pid, 0)[2].ru_utime
        proc.returncode = 0
    return used / (time.perf_counter() - start)


@pytest.mark.slow
@pytest.mark.alone  # two cores free: in the suite, only with no other test beside it (it skipped in every CI run before)
def test_threads_that_exit_inside_each_call_break_a_one_thread_limit(tmp_path):
    """Eight fresh threads per call, joined before forward returns: none is left for /proc/PID/task to list, but the
    process CPU clock (exited threads included) shows several times the wall time at --threads 1 (on a machine with
    at least two cores not taken by other work)."""
    if _cores_free() < 1.6:
        pytest.skip("fewer than two cores free here now: no thread count can be told from the CPU time")
    path = tmp_path / "exited_threads.py"
    path.write_text(_EXITED_THREADS)
    outcome = evaluate(SOFTMAX, path, OPTIONS, threads=1)
    assert outcome.error_kind == "cheat_detected:thread_count", outcome.error_excerpt
    assert "exited threads included" in (outcome.error_excerpt or "")


def test_a_workers_cpu_time_counts_threads_that_have_exited():
    """The process CPU clock, read from outside: a thread that spun ~0.3 s and exited still counts."""
    import subprocess
    import sys
    import time
    from types import SimpleNamespace

    from harness.worker_pool import Worker

    code = (
        "import threading, time\n"
        "def spin():\n"
        "    t = time.thread_time()\n"
        "    while time.thread_time() - t < 0.3: pass\n"
        "th = threading.Thread(target=spin); th.start(); th.join()\n"
        "print('done', flush=True); time.sleep(30)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "done"
        time.sleep(0.05)
        worker = SimpleNamespace(pid=proc.pid)
        worker.tasks = lambda: Worker.tasks(worker)  # type: ignore[arg-type]
        assert len(worker.tasks()) == 1  # the spinning thread is gone from /proc/PID/task
        assert Worker.cpu_ns(worker) >= 300_000_000  # type: ignore[arg-type]
    finally:
        proc.kill()
        proc.wait()
