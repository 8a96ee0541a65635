"""Finding the external programs the local server needs: Java, Maven, Docker."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kope.errors import ToolMissingError

MIN_JAVA = 17


@dataclass(frozen=True)
class Tool:
    path: str
    version: str


def _run(cmd: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def java_executable() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


def parse_java_major(version_output: str) -> int | None:
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_output)
    if not match:
        return None
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_..." style
        major = int(match.group(2))
    return major


def find_java(minimum: int = MIN_JAVA) -> Tool:
    """Java ``minimum``+ (JAVA_HOME first, then PATH), or a ToolMissingError."""
    path = java_executable()
    fix = f"install a Java {minimum}+ runtime (e.g. OpenJDK {minimum}) or set JAVA_HOME"
    if not path:
        raise ToolMissingError(
            f"Java {minimum}+ is needed to run the local Neo4j server, but `java` was not found", hint=fix
        )
    try:
        proc = _run([path, "-version"])
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"`{path} -version` failed: {exc}", hint=fix) from None
    text = proc.stderr + proc.stdout
    major = parse_java_major(text)
    if major is None:
        raise ToolMissingError(f"could not read the Java version from `{path} -version`", hint=fix)
    if major < minimum:
        raise ToolMissingError(f"Java {major} at {path} is too old: Neo4j 5.26 needs Java {minimum}+", hint=fix)
    first = text.strip().splitlines()[0] if text.strip() else str(major)
    return Tool(path, first)


def find_maven() -> Tool:
    path = shutil.which("mvn")
    fix = "install Apache Maven 3.6+ (e.g. `apt-get install maven`), or point KOPE at an existing Neo4j with KOPE_NEO4J_URI"
    if not path:
        raise ToolMissingError(
            "Maven (`mvn`) is needed to fetch the Neo4j server the first time, but it was not found", hint=fix
        )
    try:
        proc = _run([path, "-v"], timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"`mvn -v` failed: {exc}", hint=fix) from None
    if proc.returncode != 0:
        raise ToolMissingError(f"`mvn -v` failed: {(proc.stderr or proc.stdout).strip()[:200]}", hint=fix)
    first = proc.stdout.strip().splitlines()[0] if proc.stdout.strip() else "maven"
    return Tool(path, re.sub(r"\x1b\[[0-9;]*m", "", first))


def docker_engine() -> tuple[bool, str]:
    """(True, server version) when a Docker engine answers, else (False, why not)."""
    path = shutil.which("docker")
    if not path:
        return False, "the docker client is not installed"
    try:
        proc = _run([path, "info", "--format", "{{.ServerVersion}}"], timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"`docker info` failed: {exc}"
    if proc.returncode != 0 or not proc.stdout.strip():
        reason = (proc.stderr or proc.stdout).strip().splitlines()
        return False, "no Docker engine answers" + (f" ({reason[-1][:160]})" if reason else "")
    return True, proc.stdout.strip()
