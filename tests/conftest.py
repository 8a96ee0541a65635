"""Shared fixtures: a real Neo4j server for the whole session, a clean graph per test.

Where the server comes from, in order:

1. ``KOPE_NEO4J_URI`` is set (``scripts/test.sh`` sets it after
   starting a server): use it, with ``KOPE_NEO4J_PASSWORD`` or the password
   file of ``KOPE_DATA_DIR``;
2. a Docker engine answers: testcontainers' Neo4j container (neo4j:5.26-community);
3. otherwise start the Maven-provisioned server in a temporary data dir on free ports.

If none works the Neo4j tests fail (never skip). At the end of a run under
``CI`` (or ``scripts/test.sh``), a session that selected Neo4j tests of which
none passed, or some were skipped, fails too.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.alone import pytest_runtest_protocol  # noqa: F401 (the alone marker's hook)
from tests.support.graph import clear_graph
from tests.support.ray_cluster import RAY_ENV

# Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when it is first imported, and otherwise turns a loopback
# cluster address into this machine's network address (seen: a test connected to 192.0.2.2 and hung, because an
# earlier test in the same pytest worker had imported ray before the variable was set). Set it for the whole
# session before any test can import ray, so every Ray connection stays on 127.0.0.1.
os.environ.update(RAY_ENV)

REPO = Path(__file__).resolve().parents[1]

# A short timing budget for every evaluation that takes its budget from the configuration (loop steps, the
# bench's final evaluation), in this process and in every `kope` it starts: the tests check what is measured
# and recorded, not its precision. Tests of the harness's own timing pass their budgets explicitly.
TEST_TIMING = {
    "KOPE_EVALUATOR_REP_MS": "10",
    "KOPE_EVALUATOR_FINAL_REP_MS": "20",
    "KOPE_EVALUATOR_WARMUP_MS": "0",
    "KOPE_EVALUATOR_MIN_REPS": "2",
}
for _name, _value in TEST_TIMING.items():
    os.environ.setdefault(_name, _value)


def _own_server_for_worker() -> None:
    """Under pytest-xdist, worker K > 0 uses its own Neo4j server (tests empty the graph they use).

    ``scripts/test.sh`` starts one per worker and passes worker K's as ``KOPE_TEST_NEO4J_K`` ("URI HTTP_PORT
    DATA_DIR"); this process and every ``kope`` it starts then see that server in the usual variables. A
    worker without one (pytest -n run by hand) forgets the shared server, so the fixture starts its own.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker:  # xdist gives its workers an 80x24 terminal: `kope` tables would be cut to that width
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
    if not worker.startswith("gw") or worker == "gw0":
        return
    own = os.environ.get(f"KOPE_TEST_NEO4J_{worker[2:]}")
    if not own:
        for name in ("KOPE_NEO4J_URI", "KOPE_NEO4J_PASSWORD", "KOPE_NEO4J_BOLT_PORT", "KOPE_NEO4J_HTTP_PORT"):
            os.environ.pop(name, None)
        return
    uri, http_port, data_dir = own.split(" ", 2)
    os.environ.update(
        KOPE_NEO4J_URI=uri,
        KOPE_NEO4J_BOLT_PORT=uri.rsplit(":", 1)[1],
        KOPE_NEO4J_HTTP_PORT=http_port,
        KOPE_DATA_DIR=data_dir,
        KOPE_NEO4J_PASSWORD=(Path(data_dir) / "neo4j" / "password").read_text(encoding="utf-8").strip(),
    )


_own_server_for_worker()


@dataclass(frozen=True)
class Neo4jEndpoint:
    uri: str
    user: str
    password: str
    database: str
    source: str
    http_url: str | None = None  # the server's HTTP root (Neo4j Browser at /browser/), where known

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for a `kope` subprocess that talks to this server."""
        env = dict(os.environ)
        env.update(
            KOPE_NEO4J_URI=self.uri,
            KOPE_NEO4J_USER=self.user,
            KOPE_NEO4J_PASSWORD=self.password,
            KOPE_NEO4J_DATABASE=self.database,
            **TEST_TIMING,  # also when os.environ was changed since
        )
        env.update(extra)
        return env


def _from_env() -> Neo4jEndpoint | None:
    uri = os.environ.get("KOPE_NEO4J_URI")
    if not uri:
        return None
    from kope.config import load_config

    config = load_config()
    password = config.neo4j_password()
    if not password:
        pytest.fail("KOPE_NEO4J_URI is set but no password is known: set KOPE_NEO4J_PASSWORD")
    http_port = os.environ.get("KOPE_NEO4J_HTTP_PORT")  # scripts/test.sh starts the server with it
    http_url = f"http://127.0.0.1:{http_port}" if http_port and "://127.0.0.1:" in uri else None
    return Neo4jEndpoint(uri, config.neo4j.user, password, config.neo4j.database, "KOPE_NEO4J_URI", http_url)


@pytest.fixture(scope="session")
def neo4j_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Neo4jEndpoint]:
    endpoint = _from_env()
    if endpoint is not None:
        yield endpoint
        return

    from kope.db.tools import docker_engine

    has_docker, _why = docker_engine()
    if has_docker:
        from testcontainers.neo4j import Neo4jContainer

        container = Neo4jContainer("neo4j:5.26-community", password="kope-test-password")
        container.start()
        try:
            yield Neo4jEndpoint(
                container.get_connection_url(),
                "neo4j",
                "kope-test-password",
                "neo4j",
                "testcontainers",
                f"http://{container.get_container_host_ip()}:{container.get_exposed_port(7474)}",
            )
        finally:
            container.stop()
        return

    from kope.config import load_config
    from kope.db.local import LocalNeo4j
    from kope.db.ports import free_port
    from kope.errors import KopeError

    data_dir = tmp_path_factory.mktemp("neo4j-session")
    config = load_config(
        {"data_dir": str(data_dir), "server.bolt_port": free_port(), "server.http_port": free_port()},
        environ={k: v for k, v in os.environ.items() if k != "KOPE_NEO4J_URI"},
    )
    server = LocalNeo4j(config, progress=lambda m: print(f"[neo4j] {m}", file=sys.stderr))
    try:
        server.start()
    except KopeError as exc:
        pytest.fail(
            f"no Neo4j server for the tests: KOPE_NEO4J_URI unset, no Docker engine, and the local server failed: {exc}"
        )
    try:
        yield Neo4jEndpoint(
            config.neo4j_uri,
            "neo4j",
            config.neo4j_password() or "",
            "neo4j",
            "maven-provisioned",
            f"http://127.0.0.1:{config.server.http_port}",
        )
    finally:
        server.stop()


@pytest.fixture
def graph_client(neo4j_server: Neo4jEndpoint):
    """A GraphClient on an emptied database (schema objects are kept)."""
    from kope.db.client import GraphClient

    client = GraphClient(neo4j_server.uri, neo4j_server.user, neo4j_server.password, neo4j_server.database)
    clear_graph(client)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def harness_trace(caplog: pytest.LogCaptureFixture) -> None:
    """The harness's DEBUG trace (logger ``harness``: the native probe's counts and budget, the calibrated allowance,
    the wait stretches) captured for the test; pytest prints it under "Captured log call" when the test fails, so a
    verdict that came out wrong in a loaded CI run says why."""
    caplog.set_level(logging.DEBUG, logger="harness")


@pytest.fixture
def kope_cli(tmp_path: Path):
    """Run the real `kope` console script in a subprocess; returns CompletedProcess."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 300, check: bool = False):
        base = dict(env if env is not None else os.environ)
        base.setdefault("KOPE_DATA_DIR", str(tmp_path / "kope-data"))
        base.setdefault("NO_COLOR", "1")
        base["COLUMNS"] = base.get("COLUMNS", "200")
        exe = Path(sys.executable).with_name("kope")
        proc = subprocess.run(
            [str(exe), *args], capture_output=True, text=True, env=base, timeout=timeout, cwd=tmp_path
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kope {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run


# -- session guard: Neo4j tests must really run ------------------------------------------------

_neo4j_results = {"selected": 0, "reported": 0, "passed": 0, "skipped": 0}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "neo4j_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.neo4j)


def pytest_collection_finish(session: pytest.Session) -> None:
    # after -k/-m deselection: a run that selects no Neo4j test (e.g. tests/unit) has nothing to guard
    _neo4j_results["selected"] = sum(1 for item in session.items if item.get_closest_marker("neo4j"))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # under pytest-xdist the controller collects nothing: it counts the workers' reports here
    if "neo4j" not in report.keywords:
        return
    if report.when == "setup":
        _neo4j_results["reported"] += 1
    if report.when == "call" and report.passed:
        _neo4j_results["passed"] += 1
    elif report.skipped:
        _neo4j_results["skipped"] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller sees every report
        return
    selected = max(_neo4j_results["selected"], _neo4j_results["reported"])
    if not (os.environ.get("CI") or os.environ.get("KOPE_REQUIRE_NEO4J")) or not selected:
        return
    if _neo4j_results["skipped"] or _neo4j_results["passed"] == 0:
        sys.stderr.write(
            f"\nKOPE: under CI (or scripts/test.sh) the Neo4j tests must run and pass: {_neo4j_results['passed']} passed, "
            f"{_neo4j_results['skipped']} skipped. Failing the session.\n"
        )
        session.exitstatus = 1
