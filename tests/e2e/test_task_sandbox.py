"""Canaries: task code (tests/adversarial/tasks) is loaded, costed and traced only in the sandbox, and never in
the worker service's process; each hostile task ends in an error naming it, and what comes after is unaffected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.errors import HarnessError, TaskFormatError
from harness.evaluate import EvalOptions
from harness.task import read_task_literals
from harness.task_loader import load_task_isolated
from tests.support.eval_worker import KEY, EvalWorker

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "adversarial" / "tasks"
TASKS = ROOT / "fixtures" / "tasks"
HONEST = ROOT / "fixtures" / "honest" / "tiny_relu_carries_task.py"
ZEROS = ROOT / "adversarial" / "all_zeros.py"
ESCAPED = "kope-task-escaped.txt"  # what write_outside.py tries to write
OUTSIDE = [Path("/tmp") / ESCAPED, Path("/var/tmp") / ESCAPED]


def hostile(tmp_path: Path, name: str) -> Path:
    """A copy of the fixture in a folder of its own (a write beside it would land there, not in the repo)."""
    folder = tmp_path / name.removesuffix(".py")
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(HOSTILE / name, folder / name))


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KOPE_HARNESS_ROOFLINE_CACHE", str(tmp_path / "roofline"))
    monkeypatch.delenv("KOPE_HARNESS_SANDBOX", raising=False)
    for path in OUTSIDE:
        path.unlink(missing_ok=True)


def nothing_escaped(task: Path) -> None:
    assert not (task.parent / ESCAPED).exists()
    assert not any(p.exists() for p in OUTSIDE)


# -- locally ---------------------------------------------------------------------------------------------------


def test_a_task_sees_no_other_process_and_so_no_worker_key(tmp_path):
    """The loader's caller holds the key in its initial environment (/proc/<ppid>/environ): the task sees
    only its own PID namespace."""
    task = hostile(tmp_path, "read_worker_key.py")
    code = "from harness.task_loader import load_task_isolated as load\ntry:\n    load({!r})\nexcept Exception as e:\n    print(e)"
    env = {**os.environ, "KOPE_WORKER_KEY": KEY}
    proc = subprocess.run(
        [sys.executable, "-c", code.format(str(task))], capture_output=True, text=True, env=env, timeout=300
    )
    assert str(task) in proc.stdout and "importing the task raised RuntimeError" in proc.stdout, proc.stderr
    assert "worker key: nothing found" in proc.stdout
    assert KEY not in proc.stdout + proc.stderr


def test_kope_tasks_show_of_a_hostile_task_reports_its_import_error(kope_cli, tmp_path):
    task = hostile(tmp_path, "read_worker_key.py")
    proc = kope_cli("tasks", "show", str(task), env={**os.environ, "KOPE_WORKER_KEY": KEY})
    said = proc.stdout + proc.stderr  # `tasks show` lists an invalid task's problem as part of what it shows
    lines = [line for line in said.splitlines() if "importing the task raised RuntimeError" in line]
    assert len(lines) == 1 and str(task) in lines[0] and "worker key: nothing found" in lines[0], said
    assert KEY not in said and "Traceback" not in said


def test_a_task_that_patches_the_comparison_is_refused_and_this_process_keeps_its_own(tmp_path):
    import harness.compare
    import harness.fast_compare

    originals = (harness.compare.compare_outputs, harness.fast_compare.compare_encoded)
    task = hostile(tmp_path, "patch_compare.py")
    with pytest.raises(TaskFormatError) as err:
        load_task_isolated(task)
    assert str(task) in err.value.message and "replaced the harness's own code" in err.value.message
    assert "harness.compare.compare_outputs" in err.value.message
    assert (harness.compare.compare_outputs, harness.fast_compare.compare_encoded) == originals


def test_a_task_that_sleeps_at_import_is_stopped_by_the_load_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPE_HARNESS_TASK_TIMEOUT", "3")
    task = hostile(tmp_path, "sleep_at_import.py")
    began = time.monotonic()
    with pytest.raises(TaskFormatError, match="did not finish within 3 s") as err:
        load_task_isolated(task)
    assert time.monotonic() - began < 60 and str(task) in err.value.message


def test_a_task_cannot_write_outside_its_scratch(tmp_path):
    task = hostile(tmp_path, "write_outside.py")
    with pytest.raises(TaskFormatError) as err:
        load_task_isolated(task)
    assert str(task) in err.value.message and "wrote outside the scratch: nothing" in err.value.message
    assert "refused: 3" in err.value.message
    nothing_escaped(task)


def test_a_sandboxed_task_has_no_network_no_capability_no_credentials_and_limits(tmp_path, monkeypatch):
    """What the loader's worker is: its own PID namespace, a clean environment, no capability, rlimits, the
    harness cache's private folders empty (their names are the harness's, contents never shown)."""
    cache = tmp_path / "cache"
    (cache / "refs").mkdir(parents=True)
    (cache / "refs" / "seed-salt").write_text("salt")
    (cache / "worker.key").write_text("secret-key-file")
    monkeypatch.setenv("KOPE_NEO4J_PASSWORD", "hunter2-secret")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, resource, socket\nimport torch, torch.nn as nn\n"
        f"cache = {str(cache)!r}\n"
        "seen = {'pids': sorted(p for p in os.listdir('/proc') if p.isdigit()), 'env': sorted(os.environ),\n"
        "        'refs': os.listdir(cache + '/refs'), 'key': open(cache + '/worker.key').read(),\n"
        "        'cap': [l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0],\n"
        "        'as': resource.getrlimit(resource.RLIMIT_AS)[0], 'cpu': resource.getrlimit(resource.RLIMIT_CPU)[0]}\n"
        "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=2); seen['net'] = 'connected'\n"
        "except OSError as e:\n    seen['net'] = type(e).__name__\n"
        "DESCRIPTION = repr(seen)\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return x\n"
        "def get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n"
    )
    import ast

    seen = ast.literal_eval(load_task_isolated(probe).description)
    assert seen["pids"] == ["1"] and seen["refs"] == [] and seen["key"] == ""
    assert not any(k.startswith("KOPE_") or "PASSWORD" in k for k in seen["env"]), seen["env"]
    assert int(seen["cap"], 16) == 0 and 0 < seen["as"] < (1 << 40) and 0 < seen["cpu"] < 10_000
    assert seen["net"] != "connected"


def test_the_roofline_cost_helper_runs_task_code_only_in_the_sandbox(tmp_path, monkeypatch):
    from harness import roofline

    monkeypatch.setattr(roofline, "MEASURE_TIMEOUT_S", 20.0)
    honest = roofline.case_costs(read_task_literals(TASKS / "tiny_relu.py"), [0], "cpu", 1)
    assert honest[0].bytes > 0  # an honest task is costed in the sandbox
    for name in ("write_outside.py", "read_worker_key.py", "sleep_at_import.py"):
        task = hostile(tmp_path, name)
        info = read_task_literals(task)  # metadata only: nothing runs here
        began = time.monotonic()
        with pytest.raises(HarnessError) as err:
            roofline.case_costs(info, [0], "cpu", 1)
        assert str(task) in err.value.message and time.monotonic() - began < 120
        assert KEY not in err.value.message
        nothing_escaped(task)


def test_the_structure_tracer_runs_each_task_apart_in_the_sandbox(tmp_path):
    from harness.structure import tracing

    tasks = [hostile(tmp_path, n) for n in ("write_outside.py", "patch_compare.py")] + [TASKS / "tiny_relu.py"]
    tracing.warm(tasks, timeout=60)
    with pytest.raises(tracing.StructureError) as err:
        tracing.trace_task(tasks[0])
    assert str(tasks[0]) in err.value.message and "wrote outside the scratch: nothing" in err.value.message
    nothing_escaped(tasks[0])
    trace = tracing.trace_task(tasks[2])
    assert any("relu" in op.name for op in trace.first.ops)


# -- through a real worker service ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KOPE_HARNESS_TASK_TIMEOUT", "25")  # torch's import on a busy 2-core host: ~8 s
        patch.delenv("KOPE_HARNESS_SANDBOX", raising=False)
        started = EvalWorker(tmp_path_factory.mktemp("task-sandbox-worker")).start()
    yield started
    started.stop()


def test_the_worker_service_holds_no_readable_key_and_contains_every_hostile_task(worker, tmp_path):
    from kope.boundary import TaskError
    from kope.evaluators import parse_evaluator
    from kope.evaluators.http import HttpEvaluator

    assert worker.proc is not None
    for pid in [worker.proc.pid, *_children(worker.proc.pid)]:  # the service and its evaluator processes
        assert KEY.encode() not in Path(f"/proc/{pid}/environ").read_bytes(), pid
    options = EvalOptions(timing=False, seeds=1)
    expected = {
        "read_worker_key.py": "worker key: nothing found",
        "patch_compare.py": "replaced the harness's own code",
        "sleep_at_import.py": "did not finish within 25 s",
        "write_outside.py": "wrote outside the scratch: nothing",
    }
    with HttpEvaluator(parse_evaluator(worker.url), KEY, timeout_s=900, attempts=1) as remote:
        for name, words in expected.items():
            task = hostile(tmp_path, name)
            began = time.monotonic()
            with pytest.raises(TaskError) as err:
                remote.evaluate(task, HONEST, options)
            message = str(err.value)
            assert name in message and words in message, message
            assert KEY not in message and time.monotonic() - began < 120
            nothing_escaped(task)
        # the next honest requests through the same worker: compared with the real comparison
        zeros = remote.evaluate(TASKS / "tiny_softmax.py", ZEROS, options)
        assert zeros.status.value == "incorrect" and zeros.error_kind == "incorrect:mismatch"
        honest = remote.evaluate(TASKS / "tiny_relu.py", HONEST, options)
        assert honest.status.value == "correct", honest.error_excerpt
    assert "Traceback" not in worker.log(), worker.log()[-3000:]


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_the_service_erases_its_key_from_its_own_environment_block():
    """``erase_from_process_block`` on a real process: the variable is gone from /proc/PID/environ."""
    code = (
        "import os, sys\nfrom harness.serve.cli import erase_from_process_block as erase\n"
        "os.environ.pop('KOPE_WORKER_KEY')\n"
        "print(erase(b'KOPE_WORKER_KEY=', 'env'), erase(sys.argv[1].encode(), 'arg'))\n"
        "print(open('/proc/self/environ', 'rb').read().count(b'KOPE_WORKER_KEY'),"
        " open('/proc/self/cmdline', 'rb').read().count(sys.argv[1].encode()))\n"
    )
    env = {**os.environ, "KOPE_WORKER_KEY": KEY}
    proc = subprocess.run([sys.executable, "-c", code, KEY], capture_output=True, text=True, env=env, timeout=60)
    assert proc.stdout.split() == ["True", "True", "0", "0"], proc.stderr
    assert json.dumps(KEY) not in proc.stdout


def test_without_the_sandbox_task_code_is_refused_unless_the_user_opts_out(tmp_path, monkeypatch):
    import harness.sandbox as sb
    from harness.errors import SandboxUnavailableError

    monkeypatch.setattr(sb, "sandbox_status", lambda: sb.SandboxStatus(False, {"namespaces": "off"}, "namespaces: off"))
    task = Path(shutil.copy(TASKS / "tiny_relu.py", tmp_path / "tiny_relu.py"))
    with pytest.raises(SandboxUnavailableError, match="KOPE_HARNESS_SANDBOX=off"):
        load_task_isolated(task)
    monkeypatch.setenv("KOPE_HARNESS_SANDBOX", "off")
    assert load_task_isolated(task).operator == "tiny_relu"
