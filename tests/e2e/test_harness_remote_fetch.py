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
from tests.e2e.test_harness_sandbox import candidate

ROOT = Path(__file__).resolve().parents[1]
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
