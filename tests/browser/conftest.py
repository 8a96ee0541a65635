"""Fixtures of the real-browser tests: a recorded memory, `kope browser` serving it, headless Chromium on
Neo4j Browser. Screenshots go to $KOPE_TEST_ARTIFACTS/browser (default: test-artifacts/browser in the
repository); the folder is printed at the end of the run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kope.db.client import GraphClient
from kope.memory import ExperienceGraph, Journal, UsedItem, synthetic
from tests.support.neo4j_browser import (
    NAMESPACE,
    SLOW_OPERATOR,
    Guide,
    NeoBrowser,
    find_chromium,
    start_chromium,
)

REPO = Path(__file__).resolve().parents[2]
HW = synthetic.hardware("cpu-e2e00001", "x86_64-avx2", "intel")
_used_artifacts: list[Path] = []


def pytest_terminal_summary(terminalreporter) -> None:
    for folder in _used_artifacts:
        terminalreporter.write_line(f"browser test screenshots: {folder}")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = Path(os.environ.get("KOPE_TEST_ARTIFACTS") or REPO / "test-artifacts") / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    _used_artifacts.append(folder)
    return folder


@pytest.fixture(scope="session")
def chromium() -> tuple[str, str]:
    found = find_chromium()
    if found is None:
        pytest.fail(
            "headless Chromium or chromedriver is missing: scripts/test.sh installs them with "
            "scripts/install_browser.sh (Debian packages chromium, chromium-driver); run it, or set "
            "KOPE_CHROMIUM and KOPE_CHROMEDRIVER"
        )
    return found


def _knob(name, old, new, **extra):
    return {"template": "pointwise", "settings": {name: new}, "change": {"knob": name, "from": old, "to": new}, **extra}


def _history(graph: ExperienceGraph) -> None:
    """Two more operators after the real run: branches, failures (two of a kind: a validity rule), a
    backtrack, effective steps (a pattern), and prompts that cite the relu lineage (USED across operators)."""
    relu_best = graph.lineages("relu")[0].best.id
    for n, op in enumerate(("gelu", "silu")):
        rid = f"hist-{op}"
        graph.start_run(synthetic.run_spec(op, run_id=rid, family="elementwise", hw=HW))
        cite = (UsedItem(kind="decision", id=relu_best, tier="warm", rank=0, tokens=140),)

        def a(step, parent=None, rid=rid, op=op, **kw):
            return synthetic.attempt(
                rid, step, op, parent=None if parent is None else f"{rid}:s{parent}", family="elementwise", hw=HW,
                layer=kw.pop("layer", "vectorization"), **kw,
            )  # fmt: skip

        graph.record_attempts(
            [
                a(0, speedup=0.9 + n, title="start from the best recorded settings (relu)", used=cite,
                  params={"template": "pointwise", "settings": {"unroll": 2}}),
                a(1, 0, speedup=1.5 + n, title="unroll: 2 -> 4", params=_knob("unroll", 2, 4), layer="unrolling",
                  used=cite),
                a(2, 1, speedup=2.4 + n, title="vector_width: 256 -> 512", params=_knob("vector_width", 256, 512),
                  used=(UsedItem(kind="decision", id=f"{rid}:s1", tier="warm", rank=0, tokens=90), *cite)),
                a(3, 2, status="compile_error", error_kind="compile_error", title="block: 16384 -> 4096",
                  params=_knob("block", 16384, 4096), layer="tiling"),
                a(4, 2, status="compile_error", error_kind="compile_error", title="block: 16384 -> 65536",
                  params=_knob("block", 16384, 65536), layer="tiling"),
                a(5, 1, speedup=1.55 + n, title="schedule: static -> dynamic",
                  params=_knob("schedule", "static", "dynamic", backtracked=True), layer="scheduling"),
            ]
        )  # fmt: skip
        graph.finish_run(rid)
    _slow_lineage(graph)


def _slow_lineage(graph: ExperienceGraph) -> None:
    """A lineage 4x slower than PyTorch whose every step gains on its parent (#35 item 13): its nodes must read
    negative (the speedup over PyTorch), with the step's gain as the secondary mark."""
    rid = f"hist-{SLOW_OPERATOR}"
    graph.start_run(synthetic.run_spec(SLOW_OPERATOR, run_id=rid, family="elementwise", hw=HW))
    graph.record_attempts(
        [
            synthetic.attempt(rid, 0, SLOW_OPERATOR, family="elementwise", hw=HW, speedup=0.1,
                              title="baseline: template pointwise", params={"template": "pointwise"}),
            synthetic.attempt(rid, 1, SLOW_OPERATOR, parent=f"{rid}:s0", family="elementwise", hw=HW, speedup=0.25,
                              title="unroll: 2 -> 4", params=_knob("unroll", 2, 4), layer="unrolling"),
            synthetic.attempt(rid, 2, SLOW_OPERATOR, parent=f"{rid}:s1", family="elementwise", hw=HW, speedup=0.27,
                              title="vector_width: 256 -> 512", params=_knob("vector_width", 256, 512)),
        ]
    )  # fmt: skip
    graph.finish_run(rid)


@pytest.fixture(scope="module")
def memory(neo4j_server, tmp_path_factory) -> ExperienceGraph:
    """A real `kope optimize` run (relu, offline proposer, real harness) plus a recorded history of two more
    operators, all in NAMESPACE; the whole namespace is replaced first (other tests clear the database
    between tests, these share one memory)."""
    data = tmp_path_factory.mktemp("browser-data")
    env = neo4j_server.env(KOPE_NAMESPACE=NAMESPACE, KOPE_DATA_DIR=str(data), NO_COLOR="1")
    client = GraphClient(neo4j_server.uri, neo4j_server.user, neo4j_server.password, neo4j_server.database)
    graph = ExperienceGraph(client, namespace=NAMESPACE, journal=Journal(data / "memory", NAMESPACE))
    graph.prune(everything=True)
    kope = Path(sys.executable).with_name("kope")
    proc = subprocess.run(
        [str(kope), "optimize", "relu", "--proposer", "offline", "--steps", "4", "--cases", "0", "--out",
         str(data / "out")], capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    _history(graph)
    yield graph
    client.close()


@pytest.fixture(scope="module")
def kope_browser(neo4j_server, memory, tmp_path_factory):
    """`kope browser --namespace NAMESPACE` on a free port: its printed URLs."""
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path_factory.mktemp("browser-cli")), NO_COLOR="1")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("kope")), "browser", "--namespace", NAMESPACE],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    lines: list[str] = []
    while not any(ln.startswith("Lineage page:") for ln in lines):
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        lines.append(line)
    text = "".join(lines)
    urls = {
        "play": re.search(r":play (\S+)", text).group(1),
        "style": re.search(r":style (\S+)", text).group(1),
        "lineage": re.search(r"Lineage page:\s+(\S+)", text).group(1),
        "banner": text,
    }
    yield urls
    proc.send_signal(signal.SIGINT)
    proc.wait(20)


@pytest.fixture(scope="module")
def driver(chromium):
    drv = start_chromium(*chromium)
    yield drv
    drv.quit()


@pytest.fixture(scope="module")
def neo(driver, neo4j_server) -> NeoBrowser:
    if not neo4j_server.http_url:
        pytest.fail(f"the test server ({neo4j_server.source}) does not say where its Neo4j Browser is")
    browser = NeoBrowser(driver, f"{neo4j_server.http_url}/browser/")
    browser.connect(neo4j_server.uri, neo4j_server.user, neo4j_server.password)
    return browser


@pytest.fixture(scope="module")
def guide(neo, kope_browser) -> Guide:
    """Browser with the KOPE style applied and the guide open (the only frame left)."""
    neo.run(f":style {kope_browser['style']}")
    frame = neo.run(f":play {kope_browser['play']}")
    assert frame.error() is None
    neo.close_all_but(frame)
    return Guide(frame)
