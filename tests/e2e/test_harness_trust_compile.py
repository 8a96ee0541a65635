"""Canaries of issue 33, items 1, 3 and 5: compilation inside the sandbox, the untimed phases guarded, the report
channel that cannot be taken away, blocked deletions and foreign-memory reads flagged.

Each escape route is tried for real (a real compiler, real namespaces, a real evaluation) and must be caught by
the layer named in the test; the state outside is checked too.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.sandbox import sandbox_status
from harness.timing import Budget

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
UNTIMED = EvalOptions(timing=False, seeds=2, case_timeout_s=60, static_checks=False)
TIMED = EvalOptions(seeds=2, case_timeout_s=60, static_checks=False, budget=Budget(warmup_ms=5, rep_ms=20))

pytestmark = pytest.mark.skipif(not sandbox_status().available, reason="no OS sandbox on this machine")

RELU = '''
import sys, threading
import torch
import torch.nn as nn
from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <cstdint>
extern "C" void relu_f32(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" void relu_f64(const double* x, double* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0 ? x[i] : 0.0;
}
""", flags=FLAGS)


def relu(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    (_lib.relu_f32 if x.dtype == torch.float32 else _lib.relu_f64)(x, y, x.numel())
    return y


def _hook(frame, event, arg):
    return None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        INIT

    def forward(self, x):
        self.calls += 1
        FORWARD
        return relu(x)
'''


def candidate(tmp_path: Path, *, top: str = "", init: str = "pass", forward: str = "pass", flags: str = "[]") -> Path:
    path = tmp_path / "cand.py"
    body = RELU.replace("FLAGS", flags).replace("INIT", init).replace("FORWARD", forward)
    path.write_text(textwrap.dedent(top) + body)
    return path


# -- 1. compilation -----------------------------------------------------------------------------------------------


def test_the_compile_sandbox_has_no_capabilities_and_cannot_undo_its_view(tmp_path):
    """What a shell started by the compiler (as -wrapper did) can do: nothing outside its build folder."""
    from harness.commands import cache_root, sandboxed_command
    from harness.cpu import library_key

    library_key()  # there is a key to look for
    build = tmp_path / "build"
    build.mkdir()
    outside = tmp_path / "outside.txt"
    script = f"""
        grep CapEff /proc/self/status
        mount -o remount,rw / 2>/dev/null && echo REMOUNTED
        mount -t tmpfs none {build} 2>/dev/null && echo MOUNTED
        unshare -U -r true 2>/dev/null && echo UNSHARED
        echo x > {outside} 2>/dev/null && echo WROTE_OUTSIDE
        echo x > {build}/inside && echo WROTE_INSIDE
        ls -A {cache_root() / "keys"} {cache_root() / "refs"}
        echo TMPDIR=$TMPDIR
    """
    cmd, env = sandboxed_command(["sh", "-c", script], [str(build)])
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    out = proc.stdout
    assert "CapEff:\t0000000000000000" in out, out + proc.stderr
    for escaped in ("REMOUNTED", "MOUNTED", "UNSHARED", "WROTE_OUTSIDE"):
        assert escaped not in out, out
    assert "WROTE_INSIDE" in out and f"TMPDIR={build}" in out
    assert "library-key" not in out and "seed-salt" not in out  # both hidden folders are empty
    assert not outside.exists()


def test_a_compiler_flag_that_runs_a_program_is_refused_and_reported(tmp_path):
    canary = Path("/tmp/kope-wrapper-canary")
    canary.unlink(missing_ok=True)
    outcome = evaluate(TASK, ROOT / "adversarial" / "compile_flag_wrapper.py", UNTIMED)
    assert outcome.error_kind == "cheat_detected:compiler_escape", outcome.error_excerpt
    assert "'-wrapper'" in outcome.error_excerpt and "allow-list" in outcome.error_excerpt
    assert not canary.exists()


def test_a_flag_off_the_allow_list_is_a_compile_error_naming_it(tmp_path):
    outcome = evaluate(TASK, candidate(tmp_path, flags='["-O3", "-I/tmp"]'), UNTIMED)
    assert outcome.error_kind == "compile_error", outcome.error_excerpt
    assert "'-I/tmp'" in outcome.error_excerpt


def test_load_inline_options_are_checked_before_anything_is_built():
    from harness.targets import torch_ext

    spec = {"name": "relu_ext", "cpp_sources": ["int f() { return 1; }"], "functions": ["f"]}
    for extra, cheat in (
        ({"extra_cflags": ["-O3", "-B/tmp/evil"]}, "compiler_escape"),
        ({"extra_ldflags": ["-Wl,--plugin=/tmp/p.so"]}, "compiler_escape"),
        ({"extra_include_paths": ["/tmp"]}, None),
        ({"name": "../../escape"}, None),
    ):
        reply = torch_ext.serve({"call": "load_inline", "spec": {**spec, **extra}})
        assert reply["ok"] is False and reply["cheat"] == cheat, reply


def test_a_cache_entry_replaced_together_with_its_hash_is_rebuilt(tmp_path, monkeypatch):
    """The issue's attack: another candidate's library and its SHA-256 replaced; the HMAC under the hidden key
    does not match, so the harness rebuilds instead of loading the impostor."""
    import harness.cpu as cpu

    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path / "cache"))
    source = 'extern "C" int answer(void) { return 42; }'
    first = cpu.compile_cpp(source)
    assert first.answer() == 42 and not first.cached
    impostor = cpu.compile_cpp('extern "C" int answer(void) { return 666; }')
    folder = first.path.parent
    swap = folder / "swap.so"  # a new file in its place (the loaded library's pages stay this process's)
    swap.write_bytes(impostor.path.read_bytes())
    swap.replace(first.path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["sha256"] = cpu.file_sha256(first.path)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    assert not cpu.verified(folder, first.path, first.key)
    again = cpu.compile_cpp(source)
    assert not again.cached  # rebuilt, not loaded
    assert cpu.verified(folder, again.path, again.key)
    assert (tmp_path / "cache" / "keys" / "library-key").stat().st_mode & 0o077 == 0


def test_honest_flags_openmp_and_several_threads_are_accepted(tmp_path):
    path = candidate(tmp_path, flags='["-O3", "-funroll-loops", "-ffast-math", "-fno-math-errno", "-DBLOCK=64"]')
    outcome = evaluate(TASK, path, TIMED)
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.speedup is not None


# -- 3. the untimed phases ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("where", "top", "init", "forward", "options", "phase"),
    [
        (
            "import",
            "import threading\nthreading.setprofile(lambda *a: None)\n",
            "pass",
            "pass",
            UNTIMED,
            "at its import",
        ),
        ("model init", "", "sys.settrace(_hook)", "pass", UNTIMED, "while ModelNew was built"),
        (
            "forward, correctness",
            "",
            "pass",
            "sys.setprofile(_hook) if self.calls == 1 else None",
            UNTIMED,
            "in forward",
        ),
        ("forward, timed", "", "pass", "sys.setprofile(_hook) if self.calls == 8 else None", TIMED, "timed calls"),
    ],
)
def test_an_interpreter_hook_is_caught_whatever_phase_installs_it(tmp_path, where, top, init, forward, options, phase):
    outcome = evaluate(TASK, candidate(tmp_path, top=top, init=init, forward=forward), options)
    assert outcome.error_kind == "cheat_detected:monkey_patch", (where, outcome.error_excerpt)
    assert "interpreter hook" in outcome.error_excerpt and phase in outcome.error_excerpt


def test_outputs_filled_after_the_timed_call_are_caught():
    outcome = evaluate(TASK, ROOT / "adversarial" / "lazy_fill_thread.py", TIMED)
    assert outcome.status.value != "correct", outcome.error_excerpt
    # Which check catches it depends on when the candidate's filler thread runs: between the seal and the parent's
    # read (the usual case) the sealed elements changed; on a loaded machine (CI, 2 cores, the suite on both) the
    # thread can be starved until after the read, and the parent reads half an output; since the seal is taken
    # inside `go`, the filler can also still be writing while the reference's units are timed (the idle check:
    # work done off the clock). All three refuse the kernel.
    if outcome.error_kind == "cheat_detected:background_work":
        assert "off the clock" in outcome.error_excerpt, outcome.error_excerpt
        return
    if outcome.error_kind == "incorrect:timed_mismatch":
        assert "timed call on seed" in outcome.error_excerpt, outcome.error_excerpt
        return
    assert outcome.error_kind == "cheat_detected:lazy_output", outcome.error_excerpt
    assert "sealed" in outcome.error_excerpt


@pytest.mark.alone  # the fixture's RUN_ALONE
def test_outputs_filled_a_short_fixed_delay_after_the_timed_calls_are_caught_every_time():
    """Issue 33, round 4: a native thread fills the rest of each timed output 50 us after forward returned. The seal
    request of round 3 came a round trip later and often found it filled (accepted 16 of 30 runs, load 3.5-4.2); the
    seal taken inside go, right after the calls, with the last call's output always among those sealed, catches it in
    some unit far more often. Two layers race, both legitimately (docs/harness-workers.md, "What catches what"): the seal catches it in the
    first unit whose gather came before the fill (the gather comes 43-63 us after the last call in the worker, so in
    few units); the per-unit CPU bound catches it on case f64-4097, whose calls run back to back, so the filler spins
    through the whole unit beside them (not the task count, not the reply path). 5 Dec 18:16 UTC: the CPU bound named
    it in 6 of 8 runs at load ~1 (once on case 100003 instead, 5 Dec 23:32 UTC, alone in a 2-worker run), the seal in
    10 of 10 beside 2 and 4 busy loops. At load ~5.3 it was accepted in 3 of
    ~35 evaluations (a known limit): this test then fails. Which layer comes first is not this test's to require: on
    6 Dec the CPU bound named it in 5 of 5 CI runs and 8 of 8 here at load ~0, and with that bound switched off the
    seal let it through 8 of 8 here (its gather came after the 50 us fill): the seal's own layer is required by
    lazy_fill_thread.py (test_harness_adversarial), whose fill comes later."""
    for _ in range(5):
        outcome = evaluate(TASK, ROOT / "adversarial" / "lazy_fill_short_delay.py", TIMED)
        assert outcome.error_kind in ("cheat_detected:lazy_output", "cheat_detected:thread_count"), (
            outcome.error_excerpt
        )
        if outcome.error_kind == "cheat_detected:lazy_output":
            assert "sealed inside the timed request" in outcome.error_excerpt
        else:  # the CPU bound, mostly on f64-4097, whose calls run back to back (on 100003 too: 5 Dec 23:32 UTC)
            assert "thread(s) can" in outcome.error_excerpt
        assert outcome.speedup is None


def test_outputs_computed_while_the_worker_describes_them_are_caught_by_the_fetch_bound():
    """Issue 33, round 4: a C-level profile function (invisible to the hook check) computes the outputs in fetch and
    rewrites the seal's record for the few it names; the candidate's CPU in the fetch windows, against the reference
    worker's running the same checks, catches it (round 3 accepted it 8 of 8 runs)."""
    from tests.e2e.test_harness_adversarial import constants

    cheat = ROOT / "adversarial" / "hook_c_profile_fetch.py"
    for _ in range(2):
        outcome = evaluate(ROOT / "fixtures" / "tasks" / "mid_softmax.py", cheat, TIMED)
        assert outcome.error_kind == "cheat_detected:background_work", outcome.error_excerpt
        assert constants(cheat)["CAUGHT_MESSAGE"] in outcome.error_excerpt and outcome.speedup is None


WAIT_BURST = ROOT / "adversarial" / "wait_burst_after_go.py"
# ~10 units a case (the burst falls in the waits in up to half of them, and on a loaded machine in fewer)
WAIT_TIMED = EvalOptions(
    seeds=2, case_timeout_s=60, static_checks=False, budget=Budget(warmup_ms=5, rep_ms=20, case_wall_s=4)
)


@pytest.mark.alone  # the fixture's RUN_ALONE
def test_work_while_the_worker_waits_for_its_next_request_is_caught_by_the_wait_bound():
    """Issue 33, round 5: a native thread computes for 0.8 ms whenever a unit's calls are over, while the worker waits
    for its next request (in every other unit the reference's timed unit comes then); the candidate's CPU in the
    stretches where it waits, against the reference worker's, catches it."""
    from tests.e2e.test_harness_adversarial import constants

    # the wait bound nearly always, the per-unit CPU bound in a rare run (the fixture's EXPECT_RUNTIME: two layers race
    # legitimately; in the lead's run of 5 Dec 23:04-23:30 UTC the CPU bound named it once). Under load the fixture
    # is accepted and this fails (a known limit, docs/harness-workers.md: once at load 3.4-3.9); hence alone
    kinds = []
    for _ in range(4):
        outcome = evaluate(ROOT / "fixtures" / "tasks" / "tiny_softmax.py", WAIT_BURST, WAIT_TIMED)
        assert outcome.error_kind in constants(WAIT_BURST)["EXPECT_RUNTIME"], outcome.error_excerpt
        assert outcome.speedup is None
        kinds.append(outcome.error_kind)
        if outcome.error_kind == "cheat_detected:thread_count":  # bursts in the gaps between a unit's calls
            assert "thread(s) can" in outcome.error_excerpt
            continue
        assert constants(WAIT_BURST)["CAUGHT_MESSAGE"] in outcome.error_excerpt
        # the stretch that held the work: after the unit, before or after the fetch (its 400 us quiet wait)
        assert any(
            stretch in outcome.error_excerpt
            for stretch in ("between its go reply and the fetch request", "between the fetch reply and the next")
        )
    assert "cheat_detected:background_work" in kinds, kinds  # the layer this test is about, in some run


@pytest.mark.alone  # the fixture's RUN_ALONE
def test_without_the_wait_bound_the_burst_after_each_unit_was_accepted(monkeypatch):
    """The control for the layer: every other check of the waits (the idle check, the prepare and fetch bounds) let it
    through, and the per-unit thread check too but in a rare run (when bursts fall in the gaps between a unit's
    calls): accepted in at least one of three runs, never caught by anything else."""
    from harness import timing

    monkeypatch.setattr(timing, "wait_overrun", lambda *args: None)
    kinds = []
    for _ in range(3):
        outcome = evaluate(ROOT / "fixtures" / "tasks" / "tiny_softmax.py", WAIT_BURST, WAIT_TIMED)
        assert outcome.status.value == "correct" or outcome.error_kind == "cheat_detected:thread_count", (
            outcome.error_excerpt
        )
        kinds.append(outcome.status.value)
        if outcome.status.value == "correct":
            break
    assert "correct" in kinds, kinds


def test_a_finding_over_the_untimed_stretches_stands_only_if_a_second_measurement_finds_it_too(tmp_path, monkeypatch):
    """CI, 6 Dec: an honest candidate (row_norm on L2Norm over dim 1) was flagged by the wait bound once in a whole
    suite, its reply tails stretched by a loaded runner. A finding over the measured units' untimed stretches now
    times the case again from its warm-up and stands only if that measurement finds it too; the times kept are the
    second measurement's, which every check passed."""
    from harness import timing

    findings = ["the candidate's process used 0.60 ms of CPU between its go reply and the fetch request"]
    calls: list[int] = []

    def once(*args):
        calls.append(1)
        return findings.pop() if findings else None

    monkeypatch.setattr(timing, "wait_overrun", once)
    outcome = evaluate(TASK, candidate(tmp_path), TIMED)
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.speedup is not None and all(case.speedup is not None for case in outcome.cases)
    assert len(calls) == len(outcome.cases) + 1  # the flagged case measured twice, every other once

    monkeypatch.setattr(timing, "wait_overrun", lambda *args: "a lump in every measurement")
    outcome = evaluate(TASK, candidate(tmp_path), TIMED)
    assert outcome.error_kind == "cheat_detected:background_work", outcome.error_excerpt
    assert "found in each of 2 measurements of the case" in outcome.error_excerpt and outcome.speedup is None


# -- 5. the report channel, deletions, foreign memory ------------------------------------------------------------


def test_closing_the_report_channel_does_not_hide_a_trapped_call():
    outcome = evaluate(TASK, ROOT / "adversarial" / "report_pipe_closed.py", UNTIMED)
    assert outcome.error_kind == "cheat_detected:sandbox_escape", outcome.error_excerpt


def test_a_blocked_deletion_is_flagged_and_nothing_is_deleted(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = candidate(tmp_path, forward=f"import os; os.remove({str(victim)!r}) if self.calls == 1 else None")
    outcome = evaluate(TASK, path, UNTIMED)
    assert outcome.error_kind == "cheat_detected:file_access", outcome.error_excerpt
    assert "delete" in outcome.error_excerpt and victim.read_text() == "keep me"


def test_reading_another_processs_memory_is_flagged():
    outcome = evaluate(TASK, ROOT / "adversarial" / "proc_mem_read.py", UNTIMED)
    assert outcome.error_kind == "cheat_detected:memory_access", outcome.error_excerpt
    assert "/proc/1/mem" in outcome.error_excerpt
