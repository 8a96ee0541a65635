"""`kope db` end to end: a real Maven-provisioned server in its own data dir and ports.

These tests start and stop their own servers (not the session one), so they
run the real console script with KOPE_NEO4J_URI removed from its environment.
"""

from __future__ import annotations

import os
import socket
import stat
import urllib.request
from pathlib import Path

import pytest

from kope.db.ports import free_port

pytestmark = pytest.mark.slow


def local_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J_")}
    env.update(
        KOPE_DATA_DIR=str(tmp_path / "data"),
        KOPE_NEO4J_BOLT_PORT=str(free_port()),
        KOPE_NEO4J_HTTP_PORT=str(free_port()),
        NO_COLOR="1",
    )
    env.update(extra)
    return env


def assert_clean_error(proc, code: int, fragment: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert fragment in proc.stderr, proc.stderr
    assert proc.stderr.count("error:") == 1
    assert "Traceback" not in proc.stderr + proc.stdout


def test_start_status_stop_twice_keeps_data_and_reuses_cache(kope_cli, tmp_path):
    env = local_env(tmp_path)
    first = kope_cli("db", "start", env=env, check=True)
    assert "running" in first.stdout
    try:
        password = tmp_path / "data" / "neo4j" / "password"
        assert stat.S_IMODE(password.stat().st_mode) == 0o600
        browser = f"http://127.0.0.1:{env['KOPE_NEO4J_HTTP_PORT']}/browser/"
        with urllib.request.urlopen(browser, timeout=10) as response:
            assert response.status == 200
            assert b"<html" in response.read(4096).lower()
        # Write a node through the driver with the stored password.
        from neo4j import GraphDatabase

        uri = f"bolt://127.0.0.1:{env['KOPE_NEO4J_BOLT_PORT']}"
        with GraphDatabase.driver(uri, auth=("neo4j", password.read_text().strip())) as driver:
            driver.execute_query("CREATE (:Survivor {name: 'first run'})")
        again = kope_cli("db", "start", env=env, check=True)
        assert "reusing it" in again.stderr and "fetching" not in again.stderr
        status = kope_cli("db", "status", env=env, check=True)
        assert "browser" in status.stdout and env["KOPE_NEO4J_HTTP_PORT"] in status.stdout
    finally:
        kope_cli("db", "stop", env=env, check=True)
    stopped = kope_cli("db", "status", env=env, check=True)
    assert "not running" in stopped.stdout

    second = kope_cli("db", "start", env=env, check=True)
    try:
        assert "fetching" not in second.stderr  # the Maven cache is reused
        assert "setting the initial password" not in second.stderr
        status = kope_cli("db", "status", "--json", env=env, check=True)
        import json

        data = json.loads(status.stdout)
        assert data["running"] and data["nodes"] == 1 and data["version"].startswith("5.26")
        assert data["browser_url"].endswith("/browser/")
        logs = kope_cli("db", "logs", "-n", "5", env=env, check=True)
        assert logs.stdout.strip()
    finally:
        kope_cli("db", "stop", env=env, check=True)


def test_taken_port_names_its_owner(kope_cli, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = kope_cli("db", "start", "--bolt-port", str(port), env=local_env(tmp_path))
    assert_clean_error(proc, 5, f"Bolt port {port} is already in use by pid {os.getpid()}")


def test_wrong_password_is_one_line(kope_cli, neo4j_server, tmp_path):
    env = neo4j_server.env(KOPE_NEO4J_PASSWORD="not-the-password")
    assert_clean_error(kope_cli("db", "status", env=env), 8, f"Neo4j at {neo4j_server.uri} rejected the credentials")
    doctor = kope_cli("doctor", "--strict", "--json", env=env)
    assert doctor.returncode == 1 and "rejected the credentials" in doctor.stdout
    # the right password works through the same path
    assert kope_cli("db", "status", env=neo4j_server.env(), check=True).returncode == 0


def test_missing_java_is_reported(kope_cli, tmp_path):
    env = local_env(tmp_path, PATH=str(tmp_path / "empty"), JAVA_HOME="")
    assert_clean_error(kope_cli("db", "start", env=env), 3, "`java` was not found")


def test_old_java_is_reported(kope_cli, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    env = local_env(tmp_path, PATH=f"{bin_dir}:/usr/bin:/bin", JAVA_HOME="")
    assert_clean_error(kope_cli("db", "start", env=env), 3, "Java 11")


def test_missing_maven_with_empty_cache_is_reported(kope_cli, tmp_path):
    from kope.db.tools import java_executable

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(java_executable())
    env = local_env(tmp_path, PATH=str(bin_dir), JAVA_HOME="", KOPE_CACHE_DIR=str(tmp_path / "cache"))
    assert_clean_error(kope_cli("db", "start", env=env), 3, "Maven (`mvn`)")


def test_unreachable_artifacts_are_reported(kope_cli, tmp_path):
    env = local_env(tmp_path, KOPE_NEO4J_VERSION="5.26.9999", KOPE_CACHE_DIR=str(tmp_path / "cache"))
    proc = kope_cli("db", "start", env=env)
    assert_clean_error(proc, 4, "Maven could not fetch Neo4j 5.26.9999")


def test_server_that_dies_points_at_its_log(kope_cli, tmp_path):
    env = local_env(tmp_path, KOPE_NEO4J_HEAP="1m")
    proc = kope_cli("db", "start", env=env)
    assert_clean_error(proc, 6, "Neo4j exited during start-up")
    assert "console.log" in proc.stderr and "heap" in proc.stderr.lower()
    assert "running" not in kope_cli("db", "status", env=local_env(tmp_path)).stdout.replace("not running", "")


def test_docker_flag_without_engine_says_so(kope_cli, tmp_path):
    from kope.db.tools import docker_engine

    if docker_engine()[0]:
        pytest.skip("a Docker engine is present here; the no-engine message cannot be shown")
    assert_clean_error(
        kope_cli("db", "start", "--docker", env=local_env(tmp_path)), 3, "--docker needs a Docker engine"
    )


def test_external_uri_refuses_to_start_a_local_server(kope_cli, tmp_path):
    env = local_env(tmp_path, KOPE_NEO4J_URI="bolt://127.0.0.1:1")
    assert_clean_error(kope_cli("db", "start", env=env), 2, "KOPE_NEO4J_URI is set")
