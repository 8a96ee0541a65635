"""The built wheel carries cypher/, docker/, the suite, the knowledge documents and the console script; the build is quiet."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    """``python -m build``: the sdist, then the wheel from the sdist (so both are checked); built once for
    the tests that only read the wheel and the build's output."""
    tmp_path = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc, next(tmp_path.glob("kope-*.whl"))


@pytest.mark.slow
def test_wheel_contains_cypher_and_docker(built):
    _proc, wheel = built
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
def test_data_folders_are_data_and_code_folders_are_packages(built):
    _proc, wheel = built
    names = set(zipfile.ZipFile(wheel).namelist())
    data = ("kope/_resources/cypher/", "kope/_resources/docker/", "kope/knowledge/", "harness/suite/tasks/")
    assert not [n for n in names if n.startswith(data) and n.endswith("__init__.py")]
    templates = {p.relative_to(REPO).as_posix() for p in (REPO / "harness/suite/templates/cpu").glob("*.py")}
    assert "harness/suite/templates/cpu/__init__.py" in templates and templates <= names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


@pytest.mark.slow
def test_the_build_and_an_editable_build_print_no_warnings(built, tmp_path):
    proc, _wheel = built
    assert "warning" not in (proc.stdout + proc.stderr).lower(), proc.stdout + proc.stderr
    # the backend's editable build is what `pip install -e .` runs (setuptools printed its warnings there)
    editable = subprocess.run(
        [
            sys.executable,
            "-W",
            "error",
            "-c",
            "import sys, hatchling.build as backend; print(backend.build_editable(sys.argv[1]))",
            str(tmp_path / "editable"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert editable.returncode == 0, editable.stderr[-2000:]
    assert editable.stderr == "" and "warning" not in editable.stdout.lower(), editable.stdout + editable.stderr
    names = zipfile.ZipFile(tmp_path / "editable" / editable.stdout.split()[-1]).namelist()
    assert any(n.endswith(".pth") for n in names), names


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel (``pip wheel``) installed into a folder of its own; returns the folder."""
    tmp_path = tmp_path_factory.mktemp("installed")
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
    return tmp_path / "site"


def _run_installed(site: Path, code: str) -> subprocess.CompletedProcess:
    """``python -c code`` with only the installed wheel on the path, outside the checkout."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=site.parent,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )


@pytest.mark.slow
def test_installed_wheel_loads_its_own_cypher(installed):
    probe = _run_installed(
        installed, "from kope.db.catalog import default_catalog as c; print(c().root); print(len(c().names()))"
    )
    assert probe.returncode == 0, probe.stderr
    root, count = probe.stdout.split()
    assert root.startswith(str(installed)) and int(count) >= 3


@pytest.mark.slow
def test_the_wheel_carries_the_cpp_kits_sources_and_the_installed_kit_reads_them(built, installed):
    _proc, wheel = built
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "harness/suite/cpp_kit").glob("*.cpp")}
    assert "harness/suite/cpp_kit/gemm.cpp" in sources and sources <= set(zipfile.ZipFile(wheel).namelist())
    probe = _run_installed(
        installed, "import harness.suite.cpp_kit.gemm as g; print(g.__file__); print('template <class Acc>' in g.GEMM)"
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == [str(installed / "harness/suite/cpp_kit/gemm.py"), "True"]
