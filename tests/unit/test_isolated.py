"""What the sandbox for task code hides and hands over (harness.isolated), without starting it."""

from pathlib import Path

from harness import isolated


def test_every_entry_of_the_private_roots_is_hidden_but_the_way_to_the_task(tmp_path, monkeypatch):
    cache, service = tmp_path / "cache", tmp_path / "evaluations"
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(cache))
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    for folder in ("refs", "tasks", "cpu/ab"):
        (cache / folder).mkdir(parents=True)
    (cache / "worker.key").write_text("k")
    (tmp_path / "triton" / "kernel").mkdir(parents=True)
    task = service / "tasks" / "abc" / "level1" / "relu.py"
    task.parent.mkdir(parents=True)
    task.write_text("")
    (service / "tasks" / "abc" / "other.py").write_text("")
    (service / "tasks" / "def").mkdir()
    (service / "eval-123").mkdir()
    folders, files = isolated.private_paths([task], [service])
    assert folders == sorted(
        str(p)
        for p in (
            cache / "cpu",
            cache / "refs",
            cache / "tasks",
            service / "eval-123",
            service / "tasks" / "def",
            tmp_path / "triton" / "kernel",
        )
    )
    assert files == sorted([str(cache / "worker.key"), str(service / "tasks" / "abc" / "other.py")])


def test_the_child_gets_no_kope_variable_nor_credential_with_or_without_the_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("KOPE_HARNESS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KOPE_WORKER_KEY", "key-key-key-key-key")
    monkeypatch.setenv("SOME_API_KEY", "sk-secret")
    cmd, env = isolated.command("harness.task_loader", ["t.py"], tmp_path, sandboxed=True, reads=[tmp_path / "t.py"])
    assert not any(k.startswith("KOPE_") or "API_KEY" in k for k in env)
    assert cmd[cmd.index("--") + 1 :][-3:] == ["-m", "harness.task_loader", "t.py"]
    assert "--landlock" in cmd and "--memory-bytes" in cmd
    _, bare = isolated.command("harness.task_loader", ["t.py"], tmp_path, sandboxed=False)
    assert "KOPE_WORKER_KEY" not in bare and "SOME_API_KEY" not in bare and "PYTHONPATH" in bare
    gpu, _ = isolated.command("harness.roofline", [], Path(tmp_path), sandboxed=True, gpu=True)
    assert "--landlock" in gpu and "--memory-bytes" not in gpu
