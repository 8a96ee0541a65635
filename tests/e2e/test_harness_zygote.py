"""Workers forked by the zygote (``harness.zygote``) are as isolated as workers booted on their own.

The zygote boots the interpreter and torch once and forks every sandboxed worker; each fork gets
namespaces, a scratch folder, a ``/proc`` and descriptors of its own. These canaries check what a
fork could inherit that a separately booted worker could not: the zygote's descriptors, a view of
the other workers, another worker's scratch files; and that the zygote and its workers end with
the process that started them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.evaluate import evaluate
from harness.sandbox import sandbox_status
from harness.settings import ZYGOTE as ZYGOTE_ENV
from harness.worker_pool import close_pools, live_workers
from tests.e2e.test_harness_sandbox import OPTIONS, TASK, candidate
from tests.support.processes import descendants, running, zygote_processes

pytestmark = pytest.mark.skipif(not sandbox_status().available, reason="no OS sandbox on this machine")


def test_sandboxed_workers_are_forked_by_a_zygote_and_the_old_path_stays_available(tmp_path, monkeypatch):
    close_pools()  # workers an earlier test of this process booted on their own (old path, no sandbox) are gone
    honest = candidate(tmp_path, "")
    assert evaluate(TASK, honest, OPTIONS).status.value == "correct"
    assert zygote_processes(), "a sandboxed evaluation started no zygote"
    assert all(w.forked for w in live_workers())
    monkeypatch.setenv(ZYGOTE_ENV, "off")
    close_pools()
    assert evaluate(TASK, honest, OPTIONS).status.value == "correct"
    assert live_workers() and not any(w.forked for w in live_workers())
    close_pools()


def test_a_forked_candidate_holds_no_descriptor_of_the_zygote_nor_any_socket(tmp_path):
    path = candidate(
        tmp_path,
        """
        import os, stat
        for name in os.listdir("/proc/self/fd"):
            try:
                if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                    ESCAPED = True
            except OSError:
                pass
        if len(os.listdir("/proc/self/fd")) > 8:  # stdio, three pipes, the listing's own descriptor, slack of two
            ESCAPED = True
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


def test_a_forked_candidate_sees_no_other_process_neither_the_zygote_nor_other_workers(tmp_path):
    other = candidate(tmp_path, "", "honest.py")
    assert evaluate(TASK, other, OPTIONS).status.value == "correct"  # a reference worker stays loaded beside it
    path = candidate(
        tmp_path,
        """
        import os
        pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
        ESCAPED = pids != [1, 2]  # its namespace's PID 1 and itself
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


def test_a_forked_candidate_gets_a_scratch_folder_of_its_own(tmp_path):
    writer = candidate(
        tmp_path,
        """
        import os
        with open(os.path.join(os.getcwd(), "left-by-an-earlier-candidate"), "w") as f:
            f.write("x")
        with open(os.path.join(os.environ["HOME"], "left-in-home"), "w") as f:
            f.write("x")
        """,
        "writer.py",
    )
    assert evaluate(TASK, writer, OPTIONS).status.value == "correct"
    reader = candidate(
        tmp_path,
        """
        import os
        ESCAPED = bool(os.listdir(os.getcwd())) or bool(os.listdir(os.environ["HOME"]))
        """,
        "reader.py",
    )
    outcome = evaluate(TASK, reader, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


DRIVER = """
import sys, time
from harness.evaluate import EvalOptions, evaluate
from tests.support.processes import zygote_processes
outcome = evaluate(sys.argv[1], sys.argv[2], EvalOptions(timing=False, seeds=1, static_checks=False))
print(outcome.status.value, *sorted(zygote_processes()), flush=True)
time.sleep(600)
"""


def test_the_zygote_and_every_worker_end_with_the_process_that_started_them(tmp_path):
    honest = candidate(tmp_path, "")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, str(driver), str(TASK), str(honest)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        line = proc.stdout.readline().split()
        assert line and line[0] == "correct", line
        started = descendants(proc.pid)
        deadline = time.monotonic() + 30  # the replacement worker is forked in the background: under load, later
        while len(started) <= 2 and time.monotonic() < deadline:
            time.sleep(0.2)
            started = descendants(proc.pid)
        assert {int(p) for p in line[1:]} <= started and len(started) > 2  # the zygote and the kept workers
    finally:
        proc.send_signal(signal.SIGKILL)  # no atexit, no cleanup: only the kernel and the zygote's socket
        proc.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(running(p) for p in started):
        time.sleep(0.1)
    assert not [p for p in started if running(p)]


# Share of libtorch_cpu.so's read-only data pages mapped in the worker's page tables (/proc/self/pagemap, bit 63).
MAPPED_SHARE_TASK = """
import os
import torch
import torch.nn as nn


def mapped_share():
    page, present, total = os.sysconf("SC_PAGE_SIZE"), 0, 0
    with open("/proc/self/maps") as maps, open("/proc/self/pagemap", "rb") as pagemap:
        for line in maps:
            f = line.split()
            if len(f) < 6 or f[1] != "r--p" or not f[5].endswith("libtorch_cpu.so"):
                continue
            lo, hi = (int(v, 16) for v in f[0].split("-"))
            pagemap.seek(lo // page * 8)
            data = pagemap.read((hi - lo) // page * 8)
            total += len(data) // 8
            present += sum(data[i + 7] >> 7 for i in range(0, len(data), 8))
    return present / max(total, 1)


class Model(nn.Module):
    def forward(self, x):
        return x + mapped_share()


def get_inputs():
    return [torch.zeros(1, dtype=torch.float64)]


def get_init_inputs():
    return []
"""


def test_a_forked_worker_has_its_libraries_read_only_data_mapped(tmp_path):
    """fork copies no page-table entries of read-only file mappings, and an all-masked AVX-512 load (torch's float32
    expm1 has one) never faults its page in: such a load then took the slow path on every call (float32 elu 15x
    slower in a forked worker than in a fresh one). The zygote's worker maps that data in itself (map_constants)."""
    from harness import ipc
    from harness.eval_setup import EvalOptions, worker_spec
    from harness.targets import get_target

    task = tmp_path / "mapped_share.py"
    task.write_text(MAPPED_SHARE_TASK)
    target = get_target("cpu")
    worker = worker_spec(target, 1, True, EvalOptions(threads=1)).start("reference")
    try:
        assert worker.forked, "the sandboxed worker was not forked by the zygote"
        loaded, _ = worker.request(
            ipc.Load(task=str(task), target="cpu", target_options={}, threads=1), 120, "loading the task"
        )
        assert isinstance(loaded, ipc.Loaded), loaded
        reply, tensors = worker.request(ipc.Reference(case=0, init_seed=0, seeds=[1]), 120, "the reference")
        assert isinstance(reply, ipc.Trials), reply
        share = float(tensors[0][0])
    finally:
        worker.close()
    assert share > 0.99, f"only {share:.1%} of libtorch_cpu.so's read-only data is mapped in the forked worker"
