"""`kope serve` as a command (keys, start and stop, bad starts) and `kope memory ...` as its client."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess

import pytest

from kope.db.ports import free_port
from kope.memory import synthetic
from kope.memory.remote import RemoteMemory
from tests.support.memory_server import KOPE, client_env, memory_server, self_signed

pytestmark = pytest.mark.slow
OP = "softmax"


def one_error_line(proc):
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def serve(*args, env, timeout=120):
    return subprocess.run([str(KOPE), "serve", *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_keys_create_prints_the_token_once_and_the_registry_keeps_only_its_hash(neo4j_server, tmp_path):
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"))
    registry = tmp_path / "registry.sqlite3"
    made = serve("--registry", str(registry), "keys", "create", "--team", "team-x", "--label", "ci", env=env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert re.fullmatch(r"kope_[0-9a-f]{16}_[A-Za-z0-9_\-]{43}", token) and "shown only now" in made.stderr
    key_id, secret = token.split("_")[1], token.split("_", 2)[2]
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("registry.sqlite3*"))
    assert secret.encode() not in stored and token.encode() not in stored and b"$argon2id$" in stored
    listed = json.loads(serve("--registry", str(registry), "keys", "list", "--json", env=env).stdout)
    assert [(k["id"], k["team"], k["scopes"], k["revoked_at"]) for k in listed] == [
        (key_id, "team-x", ["read", "write"], None)
    ]
    assert "hash" not in listed[0] and "token" not in listed[0]
    namespaces = json.loads(serve("--registry", str(registry), "namespaces", "list", "--json", env=env).stdout)
    assert [(n["name"], n["owner"], n["visibility"]) for n in namespaces] == [("team-x", "team-x", "private")]
    revoked = serve("--registry", str(registry), "keys", "revoke", key_id, env=env)
    assert revoked.returncode == 0 and f"key {key_id} of team team-x revoked" in revoked.stdout
    assert json.loads(serve("--registry", str(registry), "keys", "list", "--json", env=env).stdout)[0]["revoked_at"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("keys", "create", "--team", "x", "--scopes", "read,root"), "scopes must be"),
        (("keys", "create", "--team", "bad team!"), "team must be"),
        (("keys", "revoke", "0123456789abcdef"), "no key"),
        (("namespaces", "create", "shared", "--owner", "nobody"), "no team 'nobody'"),
        (("namespaces", "share", "nowhere", "--public"), "no namespace 'nowhere'"),
        (("--rate-limit", "lots"), "--rate-limit must look like"),
        (("--slow-request-s", "-1"), "--slow-request-s"),
    ],
)
def test_bad_registry_commands_are_one_error_line(neo4j_server, tmp_path, args, message):
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"))
    proc = serve("--registry", str(tmp_path / "r.sqlite3"), *args, env=env)
    assert message in one_error_line(proc) and proc.returncode == 2


def test_a_busy_port_is_one_error_line(neo4j_server, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = serve("--port", str(port), "--registry", str(tmp_path / "r.sqlite3"), env=neo4j_server.env())
    assert f"port {port} on 127.0.0.1 is in use" in one_error_line(proc) and proc.returncode == 5


def test_an_unreachable_neo4j_is_one_error_line(neo4j_server, tmp_path):
    env = neo4j_server.env(KOPE_NEO4J_URI=f"bolt://127.0.0.1:{free_port()}")
    proc = serve("--port", str(free_port()), "--registry", str(tmp_path / "r.sqlite3"), env=env)
    assert "no Neo4j server answers" in one_error_line(proc) and proc.returncode == 7


def test_with_a_certificate_the_server_speaks_tls_and_clients_trusting_it_use_it(kope_cli, neo4j_server, tmp_path):
    certfile, keyfile = self_signed(tmp_path)
    server = memory_server(
        neo4j_server, tmp_path, "--certfile", str(certfile), "--keyfile", str(keyfile), cafile=certfile
    )
    try:
        token = server.key("team-tls")
        assert server.url.startswith("https://")
        env = client_env(neo4j_server, server, token, tmp_path / "c", SSL_CERT_FILE=str(certfile))
        stats = kope_cli("memory", "stats", "--json", env=env, check=True)
        assert json.loads(stats.stdout)["namespace"] == "team-tls"
        untrusted = client_env(neo4j_server, server, token, tmp_path / "c")
        assert "is not trusted" in one_error_line(kope_cli("memory", "stats", env=untrusted))
        plain = kope_cli("memory", "stats", env=dict(env, KOPE_MEMORY_URL=server.url.replace("https", "http")))
        assert plain.returncode != 0 and "Traceback" not in plain.stderr
    finally:
        server.stop()
    half = serve("--certfile", str(certfile), "--registry", str(tmp_path / "r.sqlite3"), env=neo4j_server.env())
    assert "TLS needs both --certfile and --keyfile" in one_error_line(half)


def test_sigterm_stops_the_server_cleanly(neo4j_server, tmp_path):
    server = memory_server(neo4j_server, tmp_path)
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=30) == 0
    assert "Traceback" not in server.log() and "listening on http://127.0.0.1:" in server.log()
    assert server.log().rstrip().endswith("kope serve: stopped")


def test_kope_memory_commands_work_through_the_server_without_any_neo4j_setting(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-cli", "read,write,admin")
        env = client_env(neo4j_server, server, token, tmp_path / "client")
        with RemoteMemory(server.url, token, journal_root=tmp_path / "client" / "memory") as memory:
            memory.start_run(synthetic.run_spec(OP, run_id="cli-run"))
            memory.record_attempts(
                [
                    synthetic.attempt("cli-run", 0, OP, speedup=1.0),
                    synthetic.attempt("cli-run", 1, OP, parent="cli-run:s0", speedup=1.3),
                    synthetic.attempt("cli-run", 2, OP, parent="cli-run:s0", status="compile_error"),
                    synthetic.attempt("cli-run", 3, OP, parent="cli-run:s1", status="compile_error"),
                ]
            )
            memory.finish_run("cli-run")
        stats = json.loads(kope_cli("memory", "stats", "--json", env=env, check=True).stdout)
        assert stats["namespace"] == "team-cli" and stats["nodes"]["Decision"] == 4 and stats["journal_entries"] == 6
        shown = json.loads(kope_cli("memory", "show", "cli-run", "--json", env=env, check=True).stdout)
        assert [d["id"] for d in shown["decisions"]] == [f"cli-run:s{i}" for i in range(4)]
        assert shown["run"]["incumbent_id"] == "cli-run:s1" and shown["run"]["team"] == "team-cli"
        context = kope_cli("context", "softmax", "--quiet", env=env, check=True).stdout
        assert "retrieval: 4 lineages" in context, context
        tree = kope_cli("memory", "lineage", "cli-run:s3", env=env, check=True).stdout
        assert "cli-run:s0" in tree and "cli-run:s3" in tree
        distilled = kope_cli("memory", "distill", env=env, check=True).stdout
        assert "1 validity rules" in distilled
        exported = tmp_path / "export.jsonl"
        kope_cli("memory", "export", "-o", str(exported), env=env, check=True)
        assert json.loads(exported.read_text().splitlines()[-1])["end"] is True
        imported = kope_cli("memory", "import", str(exported), "--namespace", "team-cli.copy", env=env, check=True)
        assert "imported into namespace team-cli.copy" in imported.stdout
        copy = json.loads(kope_cli("memory", "stats", "--json", "-n", "team-cli.copy", env=env, check=True).stdout)
        assert copy["nodes"]["Decision"] == 4 and server.registry.namespace("team-cli.copy").owner == "team-cli"
        dry = kope_cli("memory", "sync", "--dry-run", env=env, check=True)
        # run start, 4 attempts, run end and the journaled `kope memory distill` (#35 item 11)
        assert "7 entries, 7 already in the graph, 0 missing" in dry.stdout
        pruned = kope_cli("memory", "prune", "--run", "cli-run", "-n", "team-cli.copy", env=env, check=True)
        assert "removed 1 runs, 4 attempts" in pruned.stdout
        assert "Traceback" not in pruned.stderr
    finally:
        server.stop()


def test_clients_get_one_error_line_for_a_bad_key_a_missing_server_or_a_missing_scope(kope_cli, neo4j_server, tmp_path):
    server = memory_server(neo4j_server, tmp_path)
    try:
        reader = server.key("team-r", "read")
        bad = kope_cli("memory", "stats", env=client_env(neo4j_server, server, reader[:-4] + "AAAA", tmp_path / "c"))
        assert "refused: unknown or revoked key" in one_error_line(bad) and bad.returncode == 15
        env = client_env(neo4j_server, server, reader, tmp_path / "c")
        denied = kope_cli("memory", "prune", "--all", "--yes", env=env)
        assert "no admin scope" in one_error_line(denied) and denied.returncode == 15
        other = kope_cli("memory", "stats", "-n", "someone-else", env=env)
        assert "no namespace 'someone-else'" in one_error_line(other) and other.returncode == 2
        no_token = dict(env, KOPE_MEMORY_TOKEN="")
        assert "no key: set KOPE_MEMORY_TOKEN" in one_error_line(kope_cli("memory", "stats", env=no_token))
    finally:
        server.stop()
    gone = kope_cli("memory", "stats", env=env)
    assert "no KOPE memory server answers at" in one_error_line(gone) and gone.returncode == 7


def test_the_token_never_reaches_output_or_logs(kope_cli, neo4j_server, tmp_path):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-t", "read,write")
        env = client_env(neo4j_server, server, token, tmp_path / "c")
        shown = kope_cli("config", "show", env=env, check=True)
        assert token not in shown.stdout and "********" in shown.stdout
        verbose = kope_cli("-vv", "memory", "stats", env=env, check=True)
        assert token not in verbose.stdout + verbose.stderr
        assert token.split("_", 2)[2] not in server.log()
    finally:
        server.stop()


def test_slow_requests_are_logged_with_their_time_in_neo4j_and_without_the_namespace(neo4j_server, tmp_path):
    server = memory_server(neo4j_server, tmp_path, "--slow-request-s", "0")  # 0: every request is "slow"
    try:
        with RemoteMemory(server.url, server.key("team-slow")) as memory:
            memory.start_run(synthetic.run_spec(OP, run_id="slow-run"))
            memory.record_attempts([synthetic.attempt("slow-run", 0, OP, speedup=1.0)])
    finally:
        server.stop()
    lines = [line for line in server.log().splitlines() if "slow request: POST /v1/namespaces/{ns}/attempts" in line]
    assert lines, server.log()
    found = re.search(r"answered 200 after [0-9.]+ s \(Neo4j: (\d+) units of work, (\d+) transient errors", lines[0])
    assert found and int(found.group(1)) >= 1, lines[0]  # the request's writes are counted, in the worker thread
    assert "team-slow" not in "\n".join(lines)


def test_requests_answered_in_time_are_not_logged_as_slow(neo4j_server, tmp_path):
    server = memory_server(neo4j_server, tmp_path)  # the default: 10 s
    try:
        with RemoteMemory(server.url, server.key("team-fast")) as memory:
            memory.start_run(synthetic.run_spec(OP, run_id="fast-run"))
    finally:
        server.stop()
    assert "slow request" not in server.log()
