"""``kope db start --docker``: the same server from docker/compose.yml, where a Docker engine exists."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from kope._resources import resource_dir
from kope.config import KopeConfig
from kope.db.local import LocalNeo4j, ServerStatus
from kope.db.tools import docker_engine
from kope.errors import ServerStartError, ToolMissingError

PROJECT = "kope"


def compose_file() -> Path:
    return resource_dir("docker") / "compose.yml"


class DockerNeo4j:
    """Runs neo4j:5.26-community with Docker Compose; password handling as for the local server."""

    def __init__(self, config: KopeConfig, progress: Callable[[str], None] = lambda _m: None) -> None:
        self.config = config
        self.progress = progress
        self.local = LocalNeo4j(config, progress)  # for the password file and status queries

    def _require_engine(self) -> str:
        ok, detail = docker_engine()
        if not ok:
            raise ToolMissingError(
                f"--docker needs a Docker engine, but {detail}",
                hint="run `kope db start` without --docker to use the Maven-provisioned server (needs Java 17+)",
            )
        return detail

    def _compose(
        self, *args: str, password: str | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        s = self.config.server
        env = dict(
            os.environ,
            KOPE_NEO4J_BOLT_PORT=str(s.bolt_port),
            KOPE_NEO4J_HTTP_PORT=str(s.http_port),
            KOPE_NEO4J_HEAP=s.heap,
            KOPE_NEO4J_PAGECACHE=s.pagecache,
            NEO4J_AUTH=f"neo4j/{password}" if password else "neo4j/unused",
        )
        cmd = [shutil.which("docker") or "docker", "compose", "-p", PROJECT, "-f", str(compose_file()), *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)

    def start(self) -> ServerStatus:
        version = self._require_engine()
        self.progress(f"starting neo4j:5.26-community with Docker Compose (engine {version})")
        password = self.local._initial_password()
        proc = self._compose("up", "-d", "--wait", password=password)
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            raise ServerStartError(f"docker compose up failed: {lines[-1] if lines else proc.returncode}")
        return self.status()

    def stop(self) -> bool:
        self._require_engine()
        proc = self._compose("stop")
        return proc.returncode == 0

    def status(self) -> ServerStatus:
        from kope.db.client import GraphClient

        s = self.config.server
        status = ServerStatus(running=True, data_dir="docker volume kope-neo4j-data")
        status.bolt_uri = f"bolt://127.0.0.1:{s.bolt_port}"
        status.http_url = f"http://127.0.0.1:{s.http_port}/"
        status.browser_url = f"http://127.0.0.1:{s.http_port}/browser/"
        with GraphClient.from_config(self.config) as client:
            info = client.server_info()
            counts = client.counts()
        status.version, status.edition = info.get("version"), info.get("edition")
        status.nodes, status.relationships = counts["nodes"], counts["relationships"]
        return status
