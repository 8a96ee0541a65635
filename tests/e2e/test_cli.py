"""The CLI surface: help for every command, config masking, doctor."""

import json
import os

import click
import pytest
from click.testing import CliRunner

from kope.cli import cli


def walk(command: click.Command, path=()):
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from walk(sub, path + (name,))


def test_every_command_has_help_text():
    runner = CliRunner()
    for path, command in walk(cli):
        assert (command.help or "").strip(), f"kope {' '.join(path)} has no help text"
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)


@pytest.mark.parametrize(
    "args, message, hint",
    [
        (("--bogus",), "error: No such option '--bogus'", "`kope --help`"),
        (("nosuch",), "error: No such command 'nosuch'", "`kope --help`"),
        (("bench", "--repeats", "0"), "error: Invalid value for '--repeats'", "`kope bench --help`"),
        (("tasks", "show"), "error: Missing argument 'TASK'", "`kope tasks show --help`"),
        (("serve", "--port", "-1"), "error: Invalid value for '--port'", "`kope serve --help`"),
        (("memory", "export", "--nope"), "error: No such option '--nope'", "`kope memory export --help`"),
    ],
)
def test_click_usage_errors_are_one_error_line_with_a_hint_and_exit_2(args, message, hint):
    result = CliRunner().invoke(cli, list(args), prog_name="kope")
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 2, result.stderr
    assert lines[0].startswith(message) and lines[1].startswith("  hint: ") and hint in lines[1]
    assert "Usage:" not in result.output


def test_a_bare_group_still_shows_its_help():
    result = CliRunner().invoke(cli, ["memory"])
    assert "Commands:" in result.output and "error:" not in result.output


def test_config_show_masks_secrets(kope_cli):
    env = dict(os.environ, KOPE_NEO4J_PASSWORD="hunter2-secret", KOPE_LLM_API_KEY="sk-very-secret")
    proc = kope_cli("config", "show", env=env, check=True)
    assert "hunter2-secret" not in proc.stdout + proc.stderr
    assert "sk-very-secret" not in proc.stdout + proc.stderr
    assert "********" in proc.stdout
    data = json.loads(kope_cli("config", "show", "--json", env=env, check=True).stdout)
    assert data["neo4j"]["password"] == "********" and data["llm"]["api_key"] == "********"


def test_config_error_is_one_line(kope_cli):
    proc = kope_cli("config", "show", env=dict(os.environ, KOPE_NEO4J_BOLT_PORT="abc"))
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: invalid configuration: server.bolt_port")
    assert "Traceback" not in proc.stderr


def test_doctor_reports_the_reachable_server(kope_cli, neo4j_server):
    proc = kope_cli("doctor", "--json", env=neo4j_server.env(), check=True)
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    assert checks["Neo4j"]["level"] == "ok" and "5.26" in checks["Neo4j"]["detail"]
    assert checks["Python"]["level"] == "ok"
    assert checks["C++ compiler + OpenMP"]["level"] == "ok"
    assert set(checks) >= {"PyTorch", "GPU (CUDA)", "Triton", "Java 17+", "Maven", "Docker engine", "LLM endpoint"}
    for check in checks.values():
        if check["level"] in ("missing", "optional"):
            assert check["fix"], check


def test_doctor_reports_the_candidate_sandbox_and_its_layers(kope_cli, neo4j_server):
    from harness.sandbox import sandbox_status

    proc = kope_cli("doctor", "--json", env=neo4j_server.env(), check=True)
    sandbox = {c["name"]: c for c in json.loads(proc.stdout)}["Candidate sandbox"]
    assert sandbox["level"] == ("ok" if sandbox_status().available else "missing")
    assert "namespaces" in sandbox["detail"] and "seccomp" in sandbox["detail"]


def test_doctor_says_when_the_sandbox_is_switched_off(kope_cli, neo4j_server):
    proc = kope_cli("doctor", "--json", env=neo4j_server.env(KOPE_HARNESS_SANDBOX="off"), check=True)
    sandbox = {c["name"]: c for c in json.loads(proc.stdout)}["Candidate sandbox"]
    assert sandbox["level"] == "optional" and "KOPE_HARNESS_SANDBOX=off" in sandbox["detail"] and sandbox["fix"]


def test_unknown_command_is_a_usage_error(kope_cli):
    proc = kope_cli("frobnicate")
    assert proc.returncode == 2 and "No such command" in proc.stderr
