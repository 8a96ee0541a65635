"""Crashes, aborts, hangs, huge allocations, exits and floods become outcomes within their timeouts."""

import re
import threading
import time
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.worker_pool import Limits, live_workers
from tests.support.processes import descendants, running

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_copy.py"
BROKEN = sorted((ROOT / "fixtures" / "broken").glob("*.py"))


def expected(path: Path) -> str:
    match = re.search(r'^EXPECT = "([^"]+)"', path.read_text(), re.M)
    return match.group(1) if match else "format_error:no_code"


OPTIONS = EvalOptions(
    static_checks=False,
    timing=False,
    case_timeout_s=5,
    compile_timeout_s=5,
    limits=Limits(memory_bytes=1 << 30, file_bytes=16 << 20),
)


@pytest.mark.slow
@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.stem)
def test_misbehaving_candidate_becomes_an_outcome(path):
    started = time.monotonic()
    outcome = evaluate(TASK, path, OPTIONS)
    elapsed = time.monotonic() - started
    assert outcome.error_kind == expected(path), outcome.error_excerpt
    assert outcome.status.value == expected(path).split(":")[0]
    assert outcome.error_excerpt
    assert elapsed < 5 + 5 + 60  # case timeout + compile timeout + worker start-up allowance
    assert outcome.to_json()  # still a valid record


def test_every_broken_fixture_declares_its_outcome():
    for path in BROKEN:
        if path.read_text().strip() != "# nothing here":
            assert re.search(r'^EXPECT = "', path.read_text(), re.M), path


@pytest.mark.slow
def test_no_candidate_process_is_left_behind_by_a_hanging_candidate():
    # the candidate's processes (the worker, and in the sandbox its namespace's PID 1 and launcher), as seen
    # from here while it hangs; after the timeout every one of them must be gone
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for worker in live_workers():
                if worker.role == "candidate":
                    seen.add(worker.proc.pid)
                    seen.update(descendants(worker.proc.pid))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        outcome = evaluate(TASK, ROOT / "fixtures" / "broken" / "hang_native.py", OPTIONS)
    finally:
        done.set()
        watcher.join()
    assert outcome.error_kind == "timeout"
    assert seen, "the candidate's worker was never seen running"
    time.sleep(0.5)
    assert [pid for pid in seen if running(pid)] == []


@pytest.mark.slow
def test_the_candidates_output_and_traceback_come_back_in_the_excerpt():
    outcome = evaluate(TASK, ROOT / "fixtures" / "broken" / "raises_after_print.py", OPTIONS)
    assert outcome.error_kind == "runtime_error:ValueError"
    assert "the kernel gave up" in outcome.error_excerpt and "hello from the candidate" in outcome.error_excerpt
    assert outcome.cases[0].error.startswith("runtime_error:ValueError")
