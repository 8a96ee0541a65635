"""Warm single-use workers and the reference cache: faster, and nothing else changes."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

from harness import reference_cache
from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_candidate
from harness.worker_pool import WARM_POOL, close_pools, live_workers

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "fixtures" / "tasks"
RELU = TASKS / "tiny_relu.py"
HONEST = ROOT / "fixtures" / "sandbox" / "relu_honest.py"
OPTIONS = EvalOptions(timing=False, seeds=2)


def fresh_task(tmp_path: Path) -> Path:
    """tiny_relu with content of its own (the cache is keyed by content: a plain copy would hit old entries)."""
    task = tmp_path / "relu_task.py"
    task.write_text(RELU.read_text() + f"\n# {uuid.uuid4().hex}\n")
    return task


def test_a_candidate_worker_serves_one_candidate_and_is_then_gone():
    close_pools()
    outcome = evaluate(RELU, HONEST, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt
    idle = {w for workers in WARM_POOL._idle.values() for w in workers}
    from harness.worker_pool import REFERENCE_POOL

    pooled = idle | {w for _, w, _ in REFERENCE_POOL._idle}
    busy = [w for w in live_workers() if w not in pooled and w.role == "candidate"]
    assert busy == []


def test_closing_the_pools_leaves_no_worker_process():
    evaluate(RELU, HONEST, OPTIONS)
    close_pools()
    assert live_workers() == []


def test_several_evaluations_at_once_in_one_process_all_get_their_own_workers():
    results = []

    def one():
        results.append(evaluate(RELU, HONEST, OPTIONS))

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [o.status.value for o in results] == ["correct"] * 3
    close_pools()
    assert live_workers() == []


def test_reference_outputs_are_cached_and_the_cache_is_used(tmp_path, monkeypatch):
    # A cache of its own: other test workers write into the shared one at the same time.
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path / "cache"))
    task = fresh_task(tmp_path)
    before = set(reference_cache.folder().rglob("*.kref"))
    assert evaluate(task, HONEST, OPTIONS).status.value == "correct"
    written = set(reference_cache.folder().rglob("*.kref")) - before
    assert len(written) == 2 * 2  # two cases, two seeds
    stamps = {p: p.stat().st_mtime_ns for p in written}
    assert evaluate(task, HONEST, OPTIONS).status.value == "correct"
    assert {p: p.stat().st_mtime_ns for p in written} == stamps  # read, not recomputed
    close_pools()  # its workers were started for this cache only


def test_a_stale_cache_is_never_used_after_the_task_file_changes(tmp_path):
    task = fresh_task(tmp_path)
    assert evaluate(task, HONEST, OPTIONS).status.value == "correct"
    task.write_text(task.read_text().replace("return torch.relu(x)", "return torch.relu(x) * 2"))
    outcome = evaluate(task, HONEST, OPTIONS)
    assert outcome.error_kind == "incorrect:mismatch", outcome.error_excerpt


def test_a_corrupted_cache_entry_is_recomputed(tmp_path):
    task = fresh_task(tmp_path)
    before = set(reference_cache.folder().rglob("*.kref"))
    evaluate(task, HONEST, OPTIONS)
    written = set(reference_cache.folder().rglob("*.kref")) - before
    assert written
    for entry in written:
        data = bytearray(entry.read_bytes())
        data[-1] ^= 0xFF  # one flipped bit in the reference output
        entry.write_bytes(bytes(data))
    wrong = ROOT / "adversarial" / "all_zeros.py"
    assert evaluate(task, HONEST, OPTIONS).status.value == "correct"
    assert evaluate(task, wrong, EvalOptions(timing=False, seeds=2, static_checks=False)).status.value == "incorrect"


def test_the_suite_candidates_are_still_correct_with_pool_and_cache_off():
    outcome = evaluate(
        "relu",
        find_candidate("relu"),
        EvalOptions(timing=False, seeds=1, cases="0", warm_pool=False, reference_cache=False),
    )
    assert outcome.status.value == "correct", outcome.error_excerpt


def test_kope_eval_is_a_one_shot_that_boots_no_worker_for_a_next_evaluation(monkeypatch):
    from click.testing import CliRunner

    from harness.worker_pool import REFERENCE_POOL
    from kope.cli import cli

    close_pools()
    monkeypatch.setattr(WARM_POOL, "size", 2)  # as in a long-running process; restored afterwards
    monkeypatch.setattr(REFERENCE_POOL, "size", 2)
    result = CliRunner().invoke(cli, ["eval", str(RELU), str(HONEST), "--no-timing", "--seeds", "1"])
    assert result.exit_code == 0, result.output
    assert live_workers() == []  # neither a warm worker booting for a next evaluation nor a kept reference worker


def test_prestarted_workers_serve_the_first_evaluation_which_starts_none_itself(monkeypatch):
    """`kope optimize`, `kope bench` and `kope eval` call prestart first: the first evaluation then takes the
    two workers already booting (it waits for their boot) instead of starting two more beside them."""
    from harness.eval_setup import prestart
    from harness.worker_pool import WorkerSpec

    close_pools()
    monkeypatch.setattr(WARM_POOL, "size", 1)
    started: list[str] = []
    start = WorkerSpec.start

    def counted(self, role="warm"):
        started.append(threading.current_thread().name)
        return start(self, role)

    monkeypatch.setattr(WorkerSpec, "start", counted)
    prestart("cpu")  # the two boots are under way, not finished
    with WARM_POOL._lock:
        assert sum(WARM_POOL._starting.values()) + sum(len(w) for w in WARM_POOL._idle.values()) == 2
    outcome = evaluate(RELU, HONEST, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert "MainThread" not in started, started  # every worker came from the pool's own boot threads
    assert 2 <= len(started) <= 3  # the two prestarted, and at most the replacement for a next evaluation
    close_pools()
    assert live_workers() == []


def test_a_last_evaluation_boots_no_replacement_for_the_workers_it_took(monkeypatch):
    """The loop's last step (EvalOptions.refill_pool=False) takes its workers and starts no boot for a next
    evaluation that will not come; an ordinary evaluation does start its replacement."""
    from dataclasses import replace

    from harness.worker_pool import REFERENCE_POOL, WorkerSpec

    close_pools()
    monkeypatch.setattr(WARM_POOL, "size", 1)
    monkeypatch.setattr(REFERENCE_POOL, "size", 0)  # the reference worker is taken from the warm pool too
    started: list[str] = []
    start = WorkerSpec.start

    def counted(self, role="warm"):
        started.append(threading.current_thread().name)
        return start(self, role)

    monkeypatch.setattr(WorkerSpec, "start", counted)
    outcome = evaluate(RELU, HONEST, replace(OPTIONS, refill_pool=False))
    assert outcome.status.value == "correct", outcome.error_excerpt
    # the candidate's worker (and the reference's, unless the reference cache answered), started by the evaluation
    assert set(started) == {"MainThread"} and 1 <= len(started) <= 2, started
    assert live_workers() == []  # nothing booting or idle afterwards
    outcome = evaluate(RELU, HONEST, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt
    # the ordinary evaluation booted a replacement: in the background, and only while no other process times
    # something (machine_lock), so the boot thread may reach WorkerSpec.start after the evaluation returned (seen
    # in a full-suite run); one case's timing is bounded by Budget.max_wall_s (60 s)
    deadline = time.monotonic() + 120.0
    while "kope-warm-pool" not in started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "kope-warm-pool" in started
    close_pools()
    assert live_workers() == []


def _stopped(pid: int, expected: bool = True, within_s: float = 10.0) -> bool:
    """Whether the process is stopped, waiting up to `within_s` for it to reach `expected`: SIGSTOP and SIGCONT are
    delivered asynchronously, so the state a signal asks for can lag the kill() call (seen on a loaded CI machine)."""
    deadline = time.monotonic() + within_s
    while True:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
        if state == expected or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def test_a_worker_that_finished_booting_just_as_the_pool_paused_is_continued_when_it_resumes():
    """pause() stops booting workers; one whose boot ended in that instant was stopped and then moved to the idle
    list, where resume() (which continued only the workers still booting) left it stopped for good."""
    from harness.hardware import available_cores
    from harness.ipc import decode_request, encode
    from harness.targets import get_target
    from harness.worker_pool import Limits, WarmPool, WorkerSpec
    from harness.worker_process import worker_env

    pool = WarmPool(size=0)
    env = worker_env(get_target("cpu").worker_env(available_cores()), False)
    spec = WorkerSpec(tuple(sorted(env.items())), Limits(), True, False, (), None)
    worker = spec.start()
    try:
        worker.wait_ready(120)
        with pool._lock:  # the instant in _start_one: ready, not yet moved out of the booting set
            pool._booting.add(worker)
        pool.pause()
        assert _stopped(worker.proc.pid)
        with pool._changed:  # _start_one's next step: out of the booting set, into the idle list
            pool._booting.discard(worker)
            pool._idle.setdefault(spec, []).append(worker)
        pool.resume()
        assert not _stopped(worker.proc.pid, expected=False)
        assert pool.take(spec, refill=False) is worker
        load = {"op": "load", "role": "reference", "task": str(RELU), "target": "cpu", "target_options": {}}
        request = decode_request({**load, "threads": available_cores()})
        reply = encode(worker.request(request, 60, "load")[0])  # it answers: not stopped
        assert reply.get("ok"), reply
    finally:
        worker.close()
        pool.close_all()


def test_a_reference_request_in_flight_when_an_evaluation_stops_is_read_before_its_worker_is_reused(tmp_path):
    """The parent asks for the next case's reference outputs while the candidate runs this case's trials: a candidate
    caught in its first case stops the evaluation with that request in flight (nothing cached: the task is new); the
    pooled reference worker answers it before it serves the next evaluation of the task, whose outcome is right."""
    from harness.worker_pool import REFERENCE_POOL

    task = tmp_path / "softmax_task.py"
    task.write_text((TASKS / "tiny_softmax.py").read_text() + f"\n# {uuid.uuid4().hex}\n")
    cheat = evaluate(task, ROOT / "adversarial" / "input_mutation.py", OPTIONS)
    assert cheat.error_kind == "cheat_detected:input_mutation", cheat.error_excerpt
    assert cheat.cases[0].error and not cheat.cases[1].passed  # stopped in the first case
    pooled = [w for key, w, _ in REFERENCE_POOL._idle if key[0] == str(task)]
    assert len(pooled) == 1 and pooled[0].pending == 0
    honest = evaluate(task, find_candidate("softmax"), OPTIONS)
    assert honest.status.value == "correct" and all(c.passed for c in honest.cases), honest.error_excerpt
    assert not [w for key, w, _ in REFERENCE_POOL._idle if key[0] == str(task) and w is not pooled[0]]
