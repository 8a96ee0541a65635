"""Finding Java, Maven and Docker, and reporting what is missing."""

import os
import stat
from pathlib import Path

import pytest

from kope.db.ports import port_is_free, port_owner
from kope.db.tools import docker_engine, find_java, find_maven, parse_java_major
from kope.errors import ToolMissingError


def fake_program(folder: Path, name: str, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + script + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.mark.parametrize(
    "text, major",
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_292"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("garbage", None),
    ],
)
def test_java_major_version_is_parsed(text, major):
    assert parse_java_major(text) == major


def test_missing_java_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ToolMissingError, match="`java` was not found"):
        find_java()


def test_old_java_is_reported(monkeypatch, tmp_path):
    fake_program(tmp_path / "bin", "java", "echo 'openjdk version \"11.0.2\" 2019-01-15' >&2")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ToolMissingError, match="Java 11 .* is too old"):
        find_java()


def test_java_home_wins_over_path(monkeypatch, tmp_path):
    fake_program(tmp_path / "jdk" / "bin", "java", "echo 'openjdk version \"21.0.1\"' >&2")
    fake_program(tmp_path / "bin", "java", "echo 'openjdk version \"11.0.2\"' >&2")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert find_java().path == str(tmp_path / "jdk" / "bin" / "java")


def test_missing_maven_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ToolMissingError, match="Maven"):
        find_maven()


def test_docker_without_engine_says_why(monkeypatch, tmp_path):
    fake_program(tmp_path / "bin", "docker", "echo 'Cannot connect to the Docker daemon' >&2; exit 1")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    ok, why = docker_engine()
    assert not ok and "Cannot connect to the Docker daemon" in why


def test_taken_port_is_seen_with_its_owner():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert not port_is_free(port)
        owner = port_owner(port)
        assert owner is not None and f"pid {os.getpid()}" in owner
    assert port_is_free(port)
