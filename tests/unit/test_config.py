"""Configuration: precedence, environment references, validation, masking."""

from pathlib import Path

import pytest

from kope.config import SECRET_MASK, load_config
from kope.errors import ConfigError


def write_toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "kope.toml"
    path.write_text(text)
    return path


def test_defaults_point_at_the_local_server(tmp_path):
    config = load_config(environ={}, cwd=tmp_path)
    assert config.uses_local_server
    assert config.neo4j_uri == "bolt://127.0.0.1:7687"
    assert config.server.version.startswith("5.26.")
    assert config.browser_url == "http://127.0.0.1:7474/browser/"


def test_toml_overrides_defaults(tmp_path):
    write_toml(tmp_path, "[server]\nbolt_port = 7999\n[context]\nwindow = 8000\n")
    config = load_config(environ={}, cwd=tmp_path)
    assert config.server.bolt_port == 7999
    assert config.context.window == 8000
    assert config.source_file == tmp_path / "kope.toml"


def test_environment_overrides_toml(tmp_path):
    write_toml(tmp_path, "[server]\nbolt_port = 7999\n")
    config = load_config(environ={"KOPE_NEO4J_BOLT_PORT": "7001"}, cwd=tmp_path)
    assert config.server.bolt_port == 7001


def test_explicit_overrides_beat_environment(tmp_path):
    config = load_config(
        {"server.bolt_port": 7002, "data_dir": str(tmp_path / "d")},
        environ={"KOPE_NEO4J_BOLT_PORT": "7001"},
        cwd=tmp_path,
    )
    assert config.server.bolt_port == 7002
    assert config.data_dir == tmp_path / "d"


def test_kope_config_variable_selects_the_file(tmp_path):
    other = tmp_path / "elsewhere.toml"
    other.write_text('[memory]\nteam = "kernels-a"\n')
    config = load_config(environ={"KOPE_CONFIG": str(other)}, cwd=tmp_path)
    assert config.memory.team == "kernels-a"


def test_missing_explicit_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="not a file"):
        load_config(environ={"KOPE_CONFIG": str(tmp_path / "nope.toml")}, cwd=tmp_path)


def test_environment_reference_is_expanded(tmp_path):
    write_toml(tmp_path, '[llm]\nmodel = "m"\napi_key = "${MY_KEY}"\n')
    config = load_config(environ={"MY_KEY": "sk-123"}, cwd=tmp_path)
    assert config.llm.api_key == "sk-123"


def test_unset_environment_reference_fails_loudly(tmp_path):
    write_toml(tmp_path, '[llm]\napi_key = "${MISSING_KEY}"\n')
    with pytest.raises(ConfigError, match="MISSING_KEY"):
        load_config(environ={}, cwd=tmp_path)


@pytest.mark.parametrize(
    "environ, fragment",
    [
        ({"KOPE_NEO4J_BOLT_PORT": "seventy"}, "server.bolt_port"),
        ({"KOPE_NEO4J_BOLT_PORT": "70000"}, "server.bolt_port"),
        ({"KOPE_NEO4J_URI": "http://x:7474"}, "neo4j.uri"),
        ({"KOPE_NEO4J_HEAP": "lots"}, "server.heap"),
        ({"KOPE_NAMESPACE": "has space"}, "memory.namespace"),
        ({"KOPE_EVALUATOR_REP_MS": "0"}, "evaluator.rep_ms"),
        ({"KOPE_EVALUATOR_FINAL_REP_MS": "soon"}, "evaluator.final_rep_ms"),
        ({"KOPE_EVALUATOR_MIN_REPS": "0"}, "evaluator.min_reps"),
        ({"KOPE_EVALUATOR_WARMUP_MS": "-1"}, "evaluator.warmup_ms"),
        ({"KOPE_TEAM_WEIGHTS": "gpu-a=2"}, "memory.team_weights"),
        ({"KOPE_TEAM_WEIGHTS": "gpu-a"}, "memory.team_weights"),
        ({"KOPE_TEAM_WEIGHTS": "bad team=0.5"}, "memory.team_weights"),
        ({"KOPE_TEAM_WEIGHTS": "gpu-a=lots"}, "memory.team_weights"),
    ],
)
def test_invalid_values_name_the_setting(tmp_path, environ, fragment):
    with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
        load_config(environ=environ, cwd=tmp_path)


def test_unknown_key_in_toml_is_rejected(tmp_path):
    write_toml(tmp_path, "[server]\nbolt_prot = 1\n")
    with pytest.raises(ConfigError, match="bolt_prot"):
        load_config(environ={}, cwd=tmp_path)


def test_broken_toml_is_reported_with_its_path(tmp_path):
    write_toml(tmp_path, "[server\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(environ={}, cwd=tmp_path)


def test_masked_view_hides_secrets(tmp_path):
    config = load_config(environ={"KOPE_NEO4J_PASSWORD": "hunter2", "KOPE_LLM_API_KEY": "sk-secret"}, cwd=tmp_path)
    masked = config.masked()
    assert masked["neo4j"]["password"] == SECRET_MASK
    assert masked["llm"]["api_key"] == SECRET_MASK
    assert "hunter2" not in repr(config) and "sk-secret" not in repr(config)


def test_password_comes_from_the_password_file(tmp_path):
    config = load_config({"data_dir": str(tmp_path)}, environ={}, cwd=tmp_path)
    assert config.neo4j_password() is None
    config.password_file.parent.mkdir(parents=True)
    config.password_file.write_text("from-file\n")
    assert config.neo4j_password() == "from-file"


def test_external_uri_disables_the_local_server(tmp_path):
    config = load_config(environ={"KOPE_NEO4J_URI": "neo4j+s://abc.databases.neo4j.io"}, cwd=tmp_path)
    assert not config.uses_local_server
    assert config.neo4j_uri == "neo4j+s://abc.databases.neo4j.io"


def test_the_timing_budget_of_loop_steps_and_final_evaluations_comes_from_the_environment(tmp_path):
    assert (
        load_config(environ={}, cwd=tmp_path).evaluator.rep_ms,
        load_config(environ={}, cwd=tmp_path).evaluator.final_rep_ms,
    ) == (100.0, 300.0)
    config = load_config(environ={"KOPE_EVALUATOR_REP_MS": "10", "KOPE_EVALUATOR_FINAL_REP_MS": "20"}, cwd=tmp_path)
    assert (config.evaluator.rep_ms, config.evaluator.final_rep_ms) == (10.0, 20.0)
    assert (config.evaluator.warmup_ms, config.evaluator.min_reps) == (25.0, 5)
    config = load_config(environ={"KOPE_EVALUATOR_WARMUP_MS": "0", "KOPE_EVALUATOR_MIN_REPS": "2"}, cwd=tmp_path)
    assert (config.evaluator.warmup_ms, config.evaluator.min_reps) == (0.0, 2)


def test_a_loop_step_times_with_the_evaluator_settings():
    from kope.agent.loop import LoopOptions, Optimizer

    config = load_config(
        environ={"KOPE_EVALUATOR_REP_MS": "7", "KOPE_EVALUATOR_WARMUP_MS": "0", "KOPE_EVALUATOR_MIN_REPS": "3"}
    )
    timing = Optimizer(config, None, None, LoopOptions(steps=1)).timing
    assert (timing.rep_ms, timing.warmup_ms, timing.min_reps) == (7.0, 0.0, 3)


def test_team_weights_from_the_environment_and_from_toml(tmp_path):
    config = load_config(environ={"KOPE_TEAM_WEIGHTS": "cpu-b=0.5, *=0.2"}, cwd=tmp_path)
    assert config.memory.team_weights == {"*": 0.2, "cpu-b": 0.5}
    (tmp_path / "kope.toml").write_text('[memory]\nteam_weights = { "gpu-a" = 1, "lab.x" = 0 }\n')
    assert load_config(environ={}, cwd=tmp_path).memory.team_weights == {"gpu-a": 1.0, "lab.x": 0.0}
    assert load_config(environ={}, cwd=tmp_path / "nowhere").memory.team_weights == {}


def test_the_evaluator_timing_defaults_are_the_harness_budget():
    # harness.timing.Budget is the one definition of the timing defaults; kope's config (which must not import
    # the harness, torch with it, to be read) repeats three of them, and this keeps the two from drifting
    from harness.timing import Budget

    evaluator = load_config(environ={}).evaluator
    budget = Budget()
    assert (evaluator.rep_ms, evaluator.warmup_ms, evaluator.min_reps) == (
        budget.rep_ms,
        budget.warmup_ms,
        budget.min_reps,
    )
