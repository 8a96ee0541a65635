"""Task module code runs in a worker process under a timeout, never in the caller's process."""

import os
import textwrap
import time
from pathlib import Path

import pytest

from harness.errors import TaskFormatError
from harness.task_loader import load_task_isolated, read_task_info

ROOT = Path(__file__).resolve().parents[1]
HONEST = ROOT / "fixtures" / "honest" / "tiny_relu_carries_task.py"

TASK = """
import os
import time
import torch
import torch.nn as nn

{prelude}

n = 64
CASES = [{{"name": "n64", "n": 64}}, {{"name": "n{{}}".format(7) if False else "n7", "n": 7}}]


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
"""


def bare(monkeypatch) -> None:
    """These tasks report through a file outside their scratch folder, which the sandbox forbids: they run in
    the loader's unsandboxed worker (the opt-out). tests/e2e/test_task_sandbox.py checks the sandboxed one."""
    monkeypatch.setenv("KOPE_HARNESS_SANDBOX", "off")


def task_file(tmp_path: Path, prelude: str, name: str = "task.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(TASK.format(prelude=prelude)))
    return path


def test_slow_module_code_is_stopped_at_the_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPE_HARNESS_TASK_TIMEOUT", "3")
    path = task_file(tmp_path, "time.sleep(60)")
    began = time.monotonic()
    with pytest.raises(TaskFormatError) as err:
        load_task_isolated(path)
    assert time.monotonic() - began < 30
    assert "importing the task did not finish within 3 s" in err.value.message
    assert "KOPE_HARNESS_TASK_TIMEOUT" in err.value.hint


def test_task_code_runs_in_another_process_and_once_per_content(tmp_path, monkeypatch):
    bare(monkeypatch)
    marks = tmp_path / "pids"
    path = task_file(tmp_path, f"open({str(marks)!r}, 'a').write(str(os.getpid()) + '\\n')")
    first = load_task_isolated(path)
    second = load_task_isolated(path)
    pids = marks.read_text().split()
    assert len(pids) == 1 and int(pids[0]) != os.getpid()
    assert first is second and [c.name for c in first.cases] == ["n64", "n7"]


def test_a_later_process_reads_the_loaded_task_from_the_disk_cache_until_the_file_changes(tmp_path, monkeypatch):
    from harness import task_loader

    bare(monkeypatch)
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path / "cache"))
    task_loader._loader_version.cache_clear()
    marks = tmp_path / "pids"
    path = task_file(tmp_path, f"open({str(marks)!r}, 'a').write(str(os.getpid()) + '\\n')")
    load_task_isolated(path)
    monkeypatch.setattr(task_loader, "_cache", {})  # what a new process starts with
    again = load_task_isolated(path)
    assert len(marks.read_text().split()) == 1 and [c.name for c in again.cases] == ["n64", "n7"]
    (entry,) = (tmp_path / "cache" / "tasks").glob("*.json")
    assert oct(entry.stat().st_mode & 0o777) == "0o600"
    entry.write_text(entry.read_text().replace('"n7"', '"n8"'))  # damaged: its digest no longer matches
    monkeypatch.setattr(task_loader, "_cache", {})
    assert [c.name for c in load_task_isolated(path).cases] == ["n64", "n7"]
    assert len(marks.read_text().split()) == 2  # imported again (and the entry rewritten)
    path.write_text(path.read_text().replace('"n": 7', '"n": 9'))  # an edited task is a new key
    monkeypatch.setattr(task_loader, "_cache", {})
    assert [c.params["n"] for c in load_task_isolated(path).cases] == [64, 9]
    assert len(marks.read_text().split()) == 3


def test_case_parameters_keep_the_tasks_order_through_the_disk_cache(tmp_path, monkeypatch):
    """A case's shape is its integers in the order the task wrote them (kope.memory.shapes): the cache writes its
    JSON with sorted keys, so a task read back from it must still list (m, k, n) as m, k, n, as the fresh load does
    (it listed them k, m, n, and a replay with memory gave other steps after a cache miss than after a hit)."""
    from harness import task_loader
    from kope.memory.shapes import case_shape

    bare(monkeypatch)
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path / "cache"))
    task_loader._loader_version.cache_clear()
    path = tmp_path / "task.py"
    path.write_text(
        textwrap.dedent(TASK.format(prelude=""))
        .replace("n = 64\n", 'n = 64\nm = 8\nk = 2\nDTYPE = "float32"\n')
        .replace(
            'CASES = [{"name": "n64", "n": 64}', 'CASES = [{"name": "n64", "n": 64, "m": 8, "k": 2, "DTYPE": "float32"}'
        )
    )
    fresh = load_task_isolated(path)
    monkeypatch.setattr(task_loader, "_cache", {})  # what a new process starts with: the disk cache
    cached = load_task_isolated(path)
    assert fresh is not cached
    assert list(fresh.cases[0].params) == list(cached.cases[0].params) == ["n", "m", "k", "DTYPE"]
    shape = case_shape(cached.cases[0].as_dict())
    assert shape.dims == (64, 8, 2) and shape == case_shape(fresh.cases[0].as_dict())


def test_task_code_does_not_see_credentials(tmp_path, monkeypatch):
    bare(monkeypatch)
    monkeypatch.setenv("KOPE_NEO4J_PASSWORD", "hunter2-secret")
    monkeypatch.setenv("KOPE_LLM_API_KEY", "sk-very-secret")
    seen = tmp_path / "seen"
    prelude = (
        f"open({str(seen)!r}, 'w').write(repr([os.environ.get('KOPE_NEO4J_PASSWORD'), "
        "os.environ.get('KOPE_LLM_API_KEY')]))"
    )
    load_task_isolated(task_file(tmp_path, prelude))
    assert seen.read_text() == "[None, None]"


def test_a_task_that_fails_at_import_is_one_clear_error(tmp_path):
    with pytest.raises(TaskFormatError) as err:
        load_task_isolated(task_file(tmp_path, "raise RuntimeError('no GPU here')"))
    assert "importing the task raised RuntimeError: no GPU here" in err.value.message
    assert "Traceback" not in str(err.value)


def test_a_task_that_exits_the_interpreter_is_one_clear_error(tmp_path):
    with pytest.raises(TaskFormatError, match="the process importing the task exited with status 3"):
        load_task_isolated(task_file(tmp_path, "os._exit(3)"))


def test_non_literal_cases_are_read_in_a_worker_process(tmp_path, monkeypatch):
    bare(monkeypatch)
    marks = tmp_path / "pids"
    path = task_file(tmp_path, f"open({str(marks)!r}, 'a').write(str(os.getpid()))")
    info = read_task_info(path)  # CASES holds an expression: the file must be imported to read it
    assert [c.name for c in info.cases] == ["n64", "n7"]
    assert int(marks.read_text()) != os.getpid()


def test_kope_eval_of_a_hanging_task_is_one_error_line(kope_cli, tmp_path):
    path = task_file(tmp_path, "time.sleep(600)")
    began = time.monotonic()
    proc = kope_cli("eval", str(path), str(HONEST), env=dict(os.environ, KOPE_HARNESS_TASK_TIMEOUT="3"))
    assert time.monotonic() - began < 60
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and "did not finish within 3 s" in proc.stderr
    assert "Traceback" not in proc.stderr
