"""Hints name the namespace and the server they were printed for (no database)."""

import shlex

from kope.config import KopeConfig, load_config
from kope.hints import kope_command


def test_default_local_server_needs_only_the_namespace(tmp_path):
    cfg = load_config({"memory.namespace": "team-a"}, environ={}, cwd=tmp_path)
    cfg.data_dir = KopeConfig().data_dir
    assert kope_command(cfg, "optimize", "--resume", "run-1") == "kope optimize --resume run-1 --namespace team-a"


def test_an_external_server_is_named_by_its_uri(tmp_path):
    cfg = load_config({"memory.namespace": "exp", "neo4j.uri": "bolt://127.0.0.1:7999"}, environ={}, cwd=tmp_path)
    assert (
        kope_command(cfg, "memory", "sync") == "KOPE_NEO4J_URI=bolt://127.0.0.1:7999 kope memory sync --namespace exp"
    )


def test_a_local_server_on_other_ports_and_data_dir_is_named_by_them(tmp_path):
    cfg = load_config(
        {"data_dir": str(tmp_path / "my data"), "server.bolt_port": 7690, "server.http_port": 7480},
        environ={},
        cwd=tmp_path,
    )
    words = shlex.split(kope_command(cfg, "browser", "--port", "7476"))
    assert words == [
        f"KOPE_DATA_DIR={tmp_path / 'my data'}",
        "KOPE_NEO4J_BOLT_PORT=7690",
        "KOPE_NEO4J_HTTP_PORT=7480",
        "kope",
        "browser",
        "--port",
        "7476",
        "--namespace",
        "default",
    ]


def test_commands_without_a_namespace_and_an_explicit_namespace(tmp_path):
    cfg = load_config({"neo4j.uri": "neo4j://db:7687"}, environ={}, cwd=tmp_path)
    assert kope_command(cfg, "db", "start", scoped=False) == "KOPE_NEO4J_URI=neo4j://db:7687 kope db start"
    assert kope_command(cfg, "memory", "sync", namespace="other").endswith("--namespace other")


def test_no_secret_reaches_a_hint(tmp_path):
    cfg = load_config({"neo4j.uri": "bolt://db:7687", "neo4j.password": "s3cret"}, environ={}, cwd=tmp_path)
    assert "s3cret" not in kope_command(cfg, "memory", "sync")


def test_the_bench_resume_hint_names_the_server_its_namespaces_are_in_the_plan(tmp_path):
    from kope.bench.runner import resume_hint

    cfg = load_config({"neo4j.uri": "bolt://db:7687"}, environ={}, cwd=tmp_path)
    assert resume_hint(tmp_path / "bench out", cfg) == (
        f"continue it with `KOPE_NEO4J_URI=bolt://db:7687 kope bench --resume --out '{tmp_path / 'bench out'}'`"
    )
