"""`kope memory ...` and `kope browser` end to end (the real console script)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from kope.db.client import GraphClient
from kope.memory import ExperienceGraph, Journal, synthetic


def recorded(neo4j_server, data_dir: Path, ns: str = "default") -> None:
    client = GraphClient(neo4j_server.uri, neo4j_server.user, neo4j_server.password, neo4j_server.database)
    graph = ExperienceGraph(client, namespace=ns, journal=Journal(data_dir / "memory", ns))
    graph.start_run(synthetic.run_spec("softmax", run_id="r0"))
    graph.record_attempts(
        [
            synthetic.attempt("r0", 0, "softmax", speedup=1.0, title="naive loop"),
            synthetic.attempt("r0", 1, "softmax", parent="r0:s0", speedup=1.5, title="8-wide loads"),
            synthetic.attempt("r0", 2, "softmax", parent="r0:s0", status="compile_error", title="AVX-512 intrinsics"),
            synthetic.attempt("r0", 3, "softmax", parent="r0:s2", status="compile_error", title="AVX-512 again"),
        ]
    )
    graph.finish_run("r0")
    client.close()


def env_for(neo4j_server, tmp_path, **extra):
    return neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), COLUMNS="200", NO_COLOR="1", **extra)


def assert_clean_error(proc, code, fragment):
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert fragment in proc.stderr, proc.stderr
    assert proc.stderr.count("error:") == 1 and "Traceback" not in proc.stderr + proc.stdout


def test_memory_commands_show_what_was_recorded(kope_cli, neo4j_server, graph_client, tmp_path):
    recorded(neo4j_server, tmp_path / "data")
    env = env_for(neo4j_server, tmp_path)
    assert "schema already present" in kope_cli("memory", "init", env=env, check=True).stdout
    stats = json.loads(kope_cli("memory", "stats", "--json", env=env, check=True).stdout)
    assert stats["nodes"]["Decision"] == 4 and stats["relationships"]["FROM"] == 3
    assert stats["journal_entries"] == 6  # run start, 4 attempts, run end
    show = kope_cli("memory", "show", "r0", env=env, check=True).stdout
    assert "r0:s1 *" in show and "8-wide loads" in show and "compile_error" in show
    tree = kope_cli("memory", "lineage", "r0:s3", env=env, check=True).stdout
    lines = tree.splitlines()
    assert lines[0].startswith("r0:s0") and any("r0:s3" in ln for ln in lines) and len(lines) == 4
    assert "1 validity rules" in kope_cli("memory", "distill", env=env, check=True).stdout
    report = kope_cli("memory", "report", "-o", str(tmp_path / "page.html"), env=env, check=True).stdout
    assert "4 decisions of 1 operators (namespace default)" in report
    page = (tmp_path / "page.html").read_text()
    assert page.count('<g class="node') == 4 and 'data-operator="softmax"' in page
    journal = (tmp_path / "data" / "memory" / "default" / "journal" / "softmax.md").read_text()
    assert "### r0:s1" in journal and "**Interpretation**" in journal


def test_export_and_import_through_the_cli_share_a_memory(kope_cli, neo4j_server, graph_client, tmp_path):
    recorded(neo4j_server, tmp_path / "data")
    env = env_for(neo4j_server, tmp_path)
    target = tmp_path / "shared.jsonl"
    exported = kope_cli("memory", "export", "-o", str(target), env=env, check=True)
    assert "exported namespace default: 17 nodes" in exported.stderr
    imported = kope_cli("memory", "import", str(target), "--namespace", "team-b", env=env, check=True)
    assert "imported into namespace team-b: 17 nodes" in imported.stdout
    a = json.loads(kope_cli("memory", "stats", "--json", env=env, check=True).stdout)
    b = json.loads(kope_cli("memory", "stats", "--json", "--namespace", "team-b", env=env, check=True).stdout)
    assert a["nodes"] == b["nodes"] and a["relationships"] == b["relationships"]
    again = kope_cli("memory", "import", str(target), "-n", "team-b", env=env, check=True)
    assert again.returncode == 0
    assert (
        json.loads(kope_cli("memory", "stats", "--json", "-n", "team-b", env=env, check=True).stdout)["nodes"]
        == b["nodes"]
    )


def test_prune_through_the_cli(kope_cli, neo4j_server, graph_client, tmp_path):
    recorded(neo4j_server, tmp_path / "data")
    env = env_for(neo4j_server, tmp_path)
    assert (
        "would remove 1 runs, 4 attempts"
        in kope_cli("memory", "prune", "--run", "r0", "--dry-run", env=env, check=True).stdout
    )
    assert "removed 1 runs, 4 attempts" in kope_cli("memory", "prune", "--run", "r0", env=env, check=True).stdout
    assert json.loads(kope_cli("memory", "stats", "--json", env=env, check=True).stdout)["nodes"]["Decision"] == 0


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (("memory", "show", "nope"), 2, "no run 'nope' in namespace 'default'"),
        (("memory", "lineage", "nope:s1"), 2, "no decision 'nope:s1' in namespace 'default'"),
        (("memory", "import", "/does/not/exist.jsonl"), 2, "no such file: /does/not/exist.jsonl"),
        (("memory", "prune"), 2, "say what to prune"),
        (("memory", "report", "--operator", "nope"), 2, "no decisions of operator 'nope' in namespace 'default'"),
        (("memory", "report", "-o", "/does/not/exist/page.html"), 2, "folder /does/not/exist does not exist"),
        (("memory", "prune", "--all"), 2, "add --yes to confirm"),
        (("memory", "prune", "--run", "nope"), 2, "no run nope in namespace"),
        (("memory", "stats", "--namespace", "bad/name"), 2, "memory.namespace"),
    ],
)
def test_bad_memory_inputs_are_one_line_errors(kope_cli, neo4j_server, tmp_path, args, code, fragment):
    assert_clean_error(kope_cli(*args, env=env_for(neo4j_server, tmp_path)), code, fragment)


def test_importing_a_file_that_is_not_an_export_is_one_line(kope_cli, neo4j_server, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    assert_clean_error(
        kope_cli("memory", "import", str(bad), env=env_for(neo4j_server, tmp_path)), 2, "not a KOPE memory export"
    )


def test_sync_without_a_server_says_so(kope_cli, tmp_path):
    from kope.db.ports import free_port

    env = dict(
        os.environ,
        KOPE_DATA_DIR=str(tmp_path / "data"),
        KOPE_NEO4J_URI=f"bolt://127.0.0.1:{free_port()}",
        KOPE_NEO4J_PASSWORD="x",
    )
    assert_clean_error(kope_cli("memory", "sync", env=env), 7, "no Neo4j server answers")


def test_kope_browser_serves_the_guide_and_the_lineage_page_and_prints_their_urls(neo4j_server, graph_client, tmp_path):
    recorded(neo4j_server, tmp_path / "data", ns="team-x")
    exe = Path(sys.executable).with_name("kope")
    env = env_for(neo4j_server, tmp_path)
    proc = subprocess.Popen(
        [str(exe), "browser", "--namespace", "team-x"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines = []
        while not any(ln.startswith("Lineage page:") for ln in lines):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
        play = next(re.search(r":play (\S+)", ln).group(1) for ln in lines if ":play" in ln)
        style = next(re.search(r":style (\S+)", ln).group(1) for ln in lines if ":style" in ln)
        assert play.startswith("http://127.0.0.1:") and play.endswith("/kope.html")
        request = urllib.request.Request(play, headers={"Origin": "http://127.0.0.1:7474"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Access-Control-Allow-Origin"] == "*"
            body = response.read().decode()
        assert "<slide" in body and ":params {ns: &#x27;team-x&#x27;}" in body
        with urllib.request.urlopen(style, timeout=10) as response:
            assert "node.Decision" in response.read().decode()
        lineage = next(ln.split(None, 2)[2].strip() for ln in lines if ln.startswith("Lineage page:"))
        with urllib.request.urlopen(lineage, timeout=30) as response:
            page = response.read().decode()
        assert "namespace team-x" in page and 'data-operator="softmax"' in page
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr.read()


def test_kope_browser_without_a_server_still_serves_the_guide_and_says_why_there_is_no_lineage_page(tmp_path):
    import urllib.error

    from kope.db.ports import free_port

    env = dict(
        os.environ,
        KOPE_DATA_DIR=str(tmp_path / "data"),
        KOPE_NEO4J_URI=f"bolt://127.0.0.1:{free_port()}",
        KOPE_NEO4J_PASSWORD="x",
        NO_COLOR="1",
    )
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("kope")), "browser"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        lines = []
        while not any(ln.startswith("Lineage page:") for ln in lines):
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            lines.append(line)
        play = next(re.search(r":play (\S+)", ln).group(1) for ln in lines if ":play" in ln)
        with urllib.request.urlopen(play, timeout=10) as response:
            assert b"<slide" in response.read()
        lineage = next(ln.split(None, 2)[2].strip() for ln in lines if ln.startswith("Lineage page:"))
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(lineage, timeout=30)
        assert caught.value.code == 503
        assert caught.value.read().decode().startswith("error: no Neo4j server answers at bolt://127.0.0.1:")
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr.read()
