"""The built wheel carries cypher/, docker/, the knowledge documents and the console script."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_contains_cypher_and_docker(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    wheel = next(tmp_path.glob("kope-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {p.relative_to(REPO / "cypher").as_posix() for p in (REPO / "cypher").rglob("*.cypher")}
    assert shipped, "cypher/ holds no statements"
    for rel in shipped:
        assert f"kope/_resources/cypher/{rel}" in names, rel
    assert "kope/_resources/docker/compose.yml" in names
    knowledge = {p.name for p in (REPO / "kope" / "knowledge").glob("*.md")}
    assert knowledge, "kope/knowledge/ holds no documents"
    for name in knowledge:
        assert f"kope/knowledge/{name}" in names, name
    assert any(n.startswith("harness/") for n in names)
    assert (
        "harness/suite/tasks/normalization/softmax.py" in names and "harness/suite/candidates/cpu/softmax.py" in names
    )
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "kope = kope.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.mark.slow
def test_installed_wheel_loads_its_own_cypher(tmp_path):
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "w"),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next((tmp_path / "w").glob("kope-*.whl"))
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(tmp_path / "site"), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from kope.db.catalog import default_catalog as c; print(c().root); print(len(c().names()))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"},
    )
    assert probe.returncode == 0, probe.stderr
    root, count = probe.stdout.split()
    assert root.startswith(str(tmp_path / "site")) and int(count) >= 3
