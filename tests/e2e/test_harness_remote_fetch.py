"""Timed outputs read out of the workers' memory (harness.remote_memory), with the pipe as the way back.

Real sandboxed workers, real process_vm_readv: an honest candidate is timed through the remote path
(and nothing else), the same evaluation works through the pipes with KOPE_HARNESS_REMOTE_FETCH=off,
garbage on timed calls is caught either way, and a candidate worker that describes memory it has
not mapped gets a malformed-reply outcome, not a crash of the parent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import harness.remote_memory as remote_memory
from harness.evaluate import EvalOptions, evaluate
from harness.settings import REMOTE_FETCH as REMOTE_FETCH_ENV
from harness.timing import Budget
from tests.e2e.test_harness_adversarial import alone_marks
from tests.e2e.test_harness_sandbox import candidate

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("harness_trace")  # its trace printed when a verdict is wrong
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
OPTIONS = dict(seeds=1, case_timeout_s=60, budget=Budget(warmup_ms=2, rep_ms=10, min_reps=3))


@pytest.fixture
def reads(monkeypatch):
    """The number of process_vm_readv batches the parent made (the real call underneath)."""
    calls = []
    real = remote_memory.read_into

    def counted(pid, pieces):
        calls.append(len(pieces))
        return real(pid, pieces)

    monkeypatch.setattr(remote_memory, "read_into", counted)
    return calls


@pytest.fixture
def staged(monkeypatch):
    """Whose outputs the parent read out of a worker's memory, one entry per reply."""
    whose = []
    real = remote_memory.Staging.read

    def read(self, who, *args):
        whose.append(who)
        return real(self, who, *args)

    monkeypatch.setattr(remote_memory.Staging, "read", read)
    return whose


def test_an_honest_candidates_outputs_are_read_out_of_the_workers(tmp_path, reads, staged):
    outcome = evaluate(TASK, candidate(tmp_path, ""), EvalOptions(**OPTIONS))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.speedup is not None
    assert reads and all(n >= 1 for n in reads)
    # the correctness trials' outputs (one batch per case) and every timed unit's of both workers
    assert sorted(set(staged)) == ["cand", "ref", "trial"]
    assert staged.count("trial") == len(outcome.cases)


# an honest candidate the fetch bound flagged twice beside this file's spinning fixtures in the other pytest worker
# (5 Dec 23:52 UTC: 21.1 ms of CPU against the reference worker's 9.2 ms in the median of f64-4097's 3 units, outputs
# through the pipes); alone it passed every time: a known limit (docs/harness-workers.md), not a property of this test
@pytest.mark.alone
def test_with_remote_fetch_off_the_outputs_come_through_the_pipes(tmp_path, reads, monkeypatch):
    monkeypatch.setenv(REMOTE_FETCH_ENV, "off")
    outcome = evaluate(TASK, candidate(tmp_path, ""), EvalOptions(**OPTIONS))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.speedup is not None
    assert reads == []


@pytest.mark.parametrize("remote", [True, False], ids=["remote", "pipe"])
def test_garbage_on_timed_calls_is_caught_either_way(remote):
    cheat = ROOT / "adversarial" / "timed_garbage.py"
    task = ROOT / "fixtures" / "tasks" / "tiny_softmax.py"
    outcome = evaluate(task, cheat, EvalOptions(**OPTIONS, static_checks=False, remote_fetch=remote))
    assert outcome.error_kind == "incorrect:timed_mismatch", outcome.error_excerpt


# rewrites the worker's replies on their way out (json.dumps is not watched by the in-process patch check: it
# stands in for a native patch, which nothing inside the candidate's process can see)
LYING = """
import json

_dumps = json.dumps


def _lie(obj, *args, **kwargs):
    if isinstance(obj, dict) and isinstance(obj.get("remote"), list):
        obj = {**obj, "remote": [{**spec, "addr": 4096} for spec in obj["remote"]]}
    return _dumps(obj, *args, **kwargs)


json.dumps = _lie
ESCAPED = False
"""


def test_a_worker_that_describes_unmapped_memory_gets_a_malformed_reply_outcome(tmp_path):
    outcome = evaluate(TASK, candidate(tmp_path, LYING), EvalOptions(**OPTIONS, static_checks=False))
    assert outcome.error_kind == "runtime_error:protocol", outcome.error_excerpt
    assert "not mapped" in outcome.error_excerpt


def test_large_timed_outputs_are_checked_by_sampled_blocks_not_read_whole(tmp_path, monkeypatch):
    """Outputs over remote_memory.SAMPLE_MIN_BYTES: of each timed unit the parent reads the blocks it drew after the
    unit returned (docs/harness-workers.md, "Sampled checks of timed outputs"), not the whole outputs; the
    correctness trials' outputs are still read whole."""
    copied = [0]
    real_read, real_staging = remote_memory.read_into, remote_memory.Staging.read

    def counted(pid, rows):
        copied[0] += int(rows[:, 2].sum())
        return real_read(pid, rows)

    units: dict[str, list[tuple[int, int]]] = {}  # who -> (bytes described, bytes copied) per reply

    def read(self, who, pid, specs, *args):
        before = copied[0]
        out = real_staging(self, who, pid, specs, *args)
        units.setdefault(who, []).append((sum(s["nbytes"] for s in specs), copied[0] - before))
        return out

    monkeypatch.setattr(remote_memory, "read_into", counted)
    monkeypatch.setattr(remote_memory.Staging, "read", read)
    task = ROOT / "fixtures" / "tasks" / "wide_relu.py"
    outcome = evaluate(task, candidate(tmp_path, ""), EvalOptions(**OPTIONS))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert all(got == size for size, got in units["trial"])
    for who in ("ref", "cand"):
        assert units[who] and all(0 < got < size // 4 for size, got in units[who]), units[who]


# On wide_relu a filler thread's work (torch ops, the GIL released) can overlap the next timed call, and the per-unit
# CPU bound names it before the seal's comparison at fetch does: legitimately (a second thread's CPU in the unit).
# 6 Dec: lazy_fill_thread named by the CPU bound in 5 of 12 evaluations at 2da93e8 and 1-8 of 12 since (idle); the
# seal's layer is still required in one of four runs
ALSO_CAUGHT_BY = {"lazy_fill_thread": ("cheat_detected:thread_count", "more than 1 thread(s) can")}


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=alone_marks(ROOT / "adversarial" / f"{name}.py"))
        for name in ("lazy_fill_thread", "lazy_python_thread", "hook_fill_at_fetch", "hook_profile_inputs",
                     "lazy_fill_short_delay")
    ],
)  # fmt: skip
def test_outputs_filled_after_the_timed_call_are_caught_by_the_same_layer_when_sampled(name):
    """Issue 33, 3 (outputs filled after return, hooks in the untimed phases; these fixtures' ReLU, on outputs
    checked by sampled blocks): the sealed elements are among the blocks read, and the hooks are checked as before."""
    from tests.e2e.test_harness_adversarial import constants

    cheat = ROOT / "adversarial" / f"{name}.py"
    task = ROOT / "fixtures" / "tasks" / "wide_relu.py"
    expected = constants(cheat)["EXPECT_RUNTIME"]
    also = ALSO_CAUGHT_BY.get(name)
    for _ in range(4):
        outcome = evaluate(task, cheat, EvalOptions(**OPTIONS, static_checks=False))
        if outcome.error_kind in expected:
            return
        assert also and outcome.error_kind == also[0] and also[1] in outcome.error_excerpt, outcome.error_excerpt
    raise AssertionError(f"{name}: caught by {also} in 4 runs, never by {expected}")
