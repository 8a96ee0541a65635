"""Fault reports: each bad input or outage is one clear `error:` line with the right exit code.

A compressed or binary file given to `kope memory import`; ids outside the id alphabet in an
import; an unreachable Neo4j (reported within seconds, no raw driver lines); a locked-out account;
journal replay into an empty graph restoring every USED edge (and reporting those it cannot);
a task name that is neither an operator nor a file.
"""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path

import pytest

from kope.db.client import GraphClient
from kope.errors import DatabaseAuthError
from kope.memory import ExperienceGraph, synthetic
from kope.memory.journal import Journal
from kope.memory.specs import UsedItem

ROOT = Path(__file__).resolve().parents[1]
HONEST = ROOT / "fixtures" / "honest" / "tiny_relu_carries_task.py"


def one_error(proc, code: int) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return errors[0]


def no_server_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J")}
    return dict(env, KOPE_DATA_DIR=str(tmp_path / "data"), NO_COLOR="1", COLUMNS="200", **extra)


# -- kope memory import -------------------------------------------------------------------------------


def test_a_gzip_file_given_to_import_is_one_error_line(kope_cli, tmp_path):
    archive = tmp_path / "memory.jsonl.gz"
    archive.write_bytes(gzip.compress(b'{"format": "kope.memory", "version": 1}\n'))
    proc = kope_cli("memory", "import", str(archive), env=no_server_env(tmp_path))
    line = one_error(proc, 2)
    assert "is gzip-compressed, not a memory export" in line
    assert f"gunzip -c {archive} | kope memory import -" in proc.stderr


def test_a_binary_file_given_to_import_is_one_error_line(kope_cli, tmp_path):
    blob = tmp_path / "weights.bin"
    blob.write_bytes(bytes(range(256)) * 8)
    line = one_error(kope_cli("memory", "import", str(blob), env=no_server_env(tmp_path)), 2)
    assert "is a binary file, not a memory export" in line


def test_compressed_bytes_on_stdin_are_one_error_line(kope_cli, neo4j_server, tmp_path):
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("kope")
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), NO_COLOR="1")
    proc = subprocess.run(
        [str(exe), "memory", "import", "-", "--namespace", "stdin-binary"],
        input=gzip.compress(b"x" * 1000) + bytes(range(128, 256)),
        capture_output=True,
        env=env,
        timeout=120,
    )
    proc.stderr = proc.stderr.decode()
    line = one_error(proc, 2)
    assert "not UTF-8 text (a compressed or binary file?)" in line


def test_imported_ids_must_use_the_id_alphabet(kope_cli, neo4j_server, tmp_path):
    lines = [
        {"format": "kope.memory", "version": 1, "namespace": "x"},
        {"node": "Operator", "id": "softmax'}) DETACH DELETE (n", "props": {"name": "softmax"}},
        {"end": True, "nodes": 1, "relationships": 0},
    ]
    bad = tmp_path / "bad-ids.jsonl"
    bad.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"))
    line = one_error(kope_cli("memory", "import", str(bad), "--namespace", "bad-ids", env=env), 2)
    assert f"{bad}:2: Operator id" in line and "is not a valid id" in line and "letters, digits" in line


# -- an unreachable server ------------------------------------------------------------------------------


def test_an_unreachable_neo4j_is_one_line_within_seconds(kope_cli, tmp_path):
    from kope.db.ports import free_port

    env = no_server_env(tmp_path, KOPE_NEO4J_URI=f"bolt://127.0.0.1:{free_port()}", KOPE_NEO4J_PASSWORD="x")
    began = time.monotonic()
    proc = kope_cli("memory", "stats", env=env)
    elapsed = time.monotonic() - began
    line = one_error(proc, 7)
    assert "no Neo4j server answers at bolt://127.0.0.1:" in line
    assert elapsed < 12, elapsed  # the driver's retry loop took 16-33 s
    assert "retried" not in proc.stderr and "Transaction failed" not in proc.stderr
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) <= 2  # the error and its hint


# -- a locked-out account ---------------------------------------------------------------------------------


@pytest.fixture
def lockable_user(neo4j_server):
    name, password = "kope_lockout_test", "right-password-1"
    admin = GraphClient(neo4j_server.uri, neo4j_server.user, neo4j_server.password)
    run = admin._driver.execute_query
    run(f"CREATE OR REPLACE USER {name} SET PASSWORD $p CHANGE NOT REQUIRED", {"p": password}, database_="system")
    try:
        yield name, password
    finally:
        time.sleep(6)  # let the lock expire before anything else logs in
        run(f"DROP USER {name} IF EXISTS", database_="system")
        admin.close()


LOCK_S = 5.0  # the test server's dbms.security.auth_lock_time (Neo4j's default)


def _lock_out(neo4j_server, name: str, password: str) -> float:
    """Locks ``name`` out with wrong passwords, checks the right one is refused too, and returns when the last wrong
    attempt was made (the lock lasts ``LOCK_S`` from it)."""
    for _ in range(4):
        with GraphClient(neo4j_server.uri, name, "wrong-password") as client, pytest.raises(DatabaseAuthError):
            last = time.monotonic()
            client.verify()
    with GraphClient(neo4j_server.uri, name, password) as client, pytest.raises(DatabaseAuthError) as err:
        client.verify()
    assert "too many wrong passwords in a row" in err.value.message
    return last


def test_a_locked_out_account_says_so_with_a_hint(kope_cli, neo4j_server, lockable_user, tmp_path):
    name, password = lockable_user
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), KOPE_NEO4J_USER=name, KOPE_NEO4J_PASSWORD=password)
    for _ in range(3):
        locked = _lock_out(neo4j_server, name, password)
        proc = kope_cli("memory", "stats", env=env)
        # a CLI that connected only after the lock had lapsed (a loaded machine: the whole-suite run of 6 Dec
        # 03:32-04:32 UTC at load 6-8) logged in as it should; lock it out again and retry, no other outcome
        if not (proc.returncode == 0 and time.monotonic() - locked > LOCK_S):
            break
    line = one_error(proc, 8)
    assert "refuses logins for user 'kope_lockout_test' for now" in line
    assert "auth_lock_time" in proc.stderr


# -- journal replay ------------------------------------------------------------------------------------------

DOCS = [
    {"id": "cpu-openmp-notes", "title": "OpenMP", "text": "parallel for", "targets": ["cpu"], "families": []},
    {"id": "x86-simd-notes", "title": "SIMD", "text": "vectors", "targets": ["cpu"], "families": []},
]


def record_with_evidence(config, namespace: str) -> int:
    """A run whose attempts cite knowledge documents and an earlier decision; returns the USED edge count."""
    with ExperienceGraph.from_config(config, namespace=namespace) as graph:
        graph.start_run(synthetic.run_spec("softmax", run_id="run-u"))
        graph.upsert_knowledge(DOCS)
        knowledge = tuple(
            UsedItem(kind="knowledge", id=d["id"], tier="cold", rank=i, tokens=10) for i, d in enumerate(DOCS)
        )
        graph.record_attempts(
            [
                synthetic.attempt("run-u", 0, "softmax", used=knowledge),
                synthetic.attempt(
                    "run-u",
                    1,
                    "softmax",
                    parent="run-u:s0",
                    used=knowledge + (UsedItem(kind="decision", id="run-u:s0", tier="warm", rank=0, tokens=50),),
                ),
            ]
        )
        graph.finish_run("run-u")
    return 5


def used_edges(graph_client, namespace: str) -> list[tuple[str, str]]:
    rows = graph_client._driver.execute_query(
        "MATCH (d:Decision {ns: $ns})-[:USED]->(e) RETURN d.id AS d, e.id AS e ORDER BY d, e", {"ns": namespace}
    ).records
    return [(r["d"], r["e"]) for r in rows]


def wipe_graph(config, namespace: str) -> None:
    with ExperienceGraph.from_config(config, namespace=namespace, journal=False) as graph:
        graph.prune(everything=True)


def test_journal_replay_into_an_empty_graph_restores_every_used_edge(kope_cli, neo4j_server, graph_client, tmp_path):
    from kope.config import load_config

    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), NO_COLOR="1", COLUMNS="200")
    config = load_config(environ=env)
    expected = record_with_evidence(config, "replay")
    before = used_edges(graph_client, "replay")
    assert len(before) == expected
    wipe_graph(config, "replay")
    assert used_edges(graph_client, "replay") == []
    proc = kope_cli("memory", "sync", "--namespace", "replay", env=env, check=True)
    assert "2 knowledge documents" in proc.stdout, proc.stdout
    assert used_edges(graph_client, "replay") == before
    again = kope_cli("memory", "sync", "--namespace", "replay", "--operator", "softmax", env=env, check=True)
    assert "0 missing" in again.stdout


def test_sync_reports_every_used_edge_it_could_not_restore(kope_cli, neo4j_server, graph_client, tmp_path):
    from kope.config import load_config

    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), NO_COLOR="1", COLUMNS="200")
    config = load_config(environ=env)
    record_with_evidence(config, "replay-lost")
    wipe_graph(config, "replay-lost")
    journal = Journal(config.data_dir / "memory", "replay-lost")
    (journal.wal_dir / "_knowledge.jsonl").unlink()  # as in a journal written before knowledge was journaled
    proc = kope_cli("memory", "sync", "--namespace", "replay-lost", "--json", env=env)
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert report["replayed"]["attempt"] == 2
    assert sorted(report["unlinked"]) == [
        "attempt run-u:s0: USED knowledge:cpu-openmp-notes is not in the graph",
        "attempt run-u:s0: USED knowledge:x86-simd-notes is not in the graph",
        "attempt run-u:s1: USED knowledge:cpu-openmp-notes is not in the graph",
        "attempt run-u:s1: USED knowledge:x86-simd-notes is not in the graph",
    ]
    assert "4 USED edges could not be restored" in one_error(proc, 1)
    assert used_edges(graph_client, "replay-lost") == [("run-u:s1", "run-u:s0")]


# -- task names -------------------------------------------------------------------------------------------


def test_a_task_name_like_cypher_says_what_is_wrong_with_it(kope_cli, tmp_path):
    line = one_error(kope_cli("eval", "MATCH (n) DETACH DELETE n", str(HONEST), env=no_server_env(tmp_path)), 2)
    assert "is neither a built-in operator (operator names are snake_case" in line
    assert "characters ' ' '(' ')'" in line and "nor an existing task file" in line


def test_a_task_file_with_another_suffix_says_so(kope_cli, tmp_path):
    task = tmp_path / "MATCH (n) RETURN n.cypher"
    task.write_text("MATCH (n) RETURN n\n")
    line = one_error(kope_cli("eval", str(task), str(HONEST), env=no_server_env(tmp_path)), 2)
    assert "a task is a Python file (.py); this file name ends in '.cypher'" in line
