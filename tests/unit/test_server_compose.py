"""docker/compose.yml with the memory server next to Neo4j (no Docker engine here: what can be checked
without one is the file itself, the command it runs, its ports and that `kope db start --docker` is unchanged)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from kope.cli import cli

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker" / "compose.yml").read_text())


def test_the_compose_file_is_valid_yaml_with_neo4j_and_the_memory_server():
    assert set(COMPOSE["services"]) == {"neo4j", "memory"}
    assert set(COMPOSE["volumes"]) == {"kope-neo4j-data", "kope-server-data"}


def test_the_memory_server_runs_kope_serve_against_the_neo4j_service():
    memory = COMPOSE["services"]["memory"]
    command = " ".join(memory["command"])
    assert re.search(r"exec kope serve --host 0\.0\.0\.0 --port 8765 .*--registry /data/registry\.sqlite3", command)
    assert 'KOPE_NEO4J_PASSWORD="$${NEO4J_AUTH#*/}"' in command  # the one credential, from NEO4J_AUTH
    assert memory["environment"]["KOPE_NEO4J_URI"] == "bolt://neo4j:7687"
    assert memory["depends_on"] == {"neo4j": {"condition": "service_healthy"}}
    assert "8765/health" in " ".join(memory["healthcheck"]["test"])
    assert (REPO / memory["build"]["dockerfile"]).is_file() and memory["build"]["context"] == ".."


def test_every_published_port_binds_to_loopback_only():
    for name, service in COMPOSE["services"].items():
        for port in service["ports"]:
            assert port.startswith("127.0.0.1:"), (name, port)
    assert COMPOSE["services"]["memory"]["ports"] == ["127.0.0.1:${KOPE_SERVER_PORT:-8765}:8765"]


def test_kope_db_start_docker_still_starts_only_neo4j():
    # `kope db start --docker` runs `docker compose up` without profiles: the server needs --profile server
    assert COMPOSE["services"]["memory"]["profiles"] == ["server"]
    assert "profiles" not in COMPOSE["services"]["neo4j"]


def test_the_image_runs_kope_serve_with_options_the_cli_accepts():
    dockerfile = (REPO / "docker" / "server.Dockerfile").read_text()
    cmd = re.search(r"^CMD \[(.*)\]$", dockerfile, re.M).group(1)
    args = [a.strip().strip('"') for a in cmd.split(",")]
    assert args[:2] == ["kope", "serve"]
    serve = cli.commands["serve"]
    options = {opt for param in serve.params for opt in param.opts}
    assert {a for a in args[2:] if a.startswith("--")} <= options
