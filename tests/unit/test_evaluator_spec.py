"""`--evaluator` values: local, worker URLs, ray, ray://ADDRESS, replay:DIR; bad values are one clear error."""

import pytest

from kope.config import load_config
from kope.errors import ConfigError, UsageError
from kope.evaluators import parse_evaluator


@pytest.mark.parametrize(
    ("text", "kind", "shown"),
    [
        (None, "local", "local"),
        ("local", "local", "local"),
        ("http://127.0.0.1:8700/", "http", "http://127.0.0.1:8700"),
        ("http://127.0.0.1:8700, https://[::1]:8701", "http", "http://127.0.0.1:8700,https://[::1]:8701"),
        ("ray", "ray", "ray"),
        ("ray://127.0.0.1:10001", "ray", "ray://127.0.0.1:10001"),
    ],
)
def test_evaluator_values_parse(text, kind, shown):
    spec = parse_evaluator(text)
    assert spec.kind == kind and str(spec) == shown


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu-box", "unknown evaluator"),
        ("http://user:secret@h:1", "no credentials in the URL"),
        ("http://h:99999", "port"),
        ("http://h:1?x=1", "no query"),
        ("http://h:1,http://h:1", "twice"),
        ("ray://", "ray://HOST:PORT"),
        ("replay:", "give replay:DIR"),
        ("ftp://h:1", "unknown evaluator"),
    ],
)
def test_bad_evaluator_values_are_usage_errors(text, message):
    with pytest.raises(UsageError, match=message):
        parse_evaluator(text)


def test_the_evaluator_comes_from_the_environment_and_its_key_is_masked():
    config = load_config(environ={"KOPE_EVALUATOR": "http://127.0.0.1:8700", "KOPE_WORKER_KEY": "s3cret-key-value"})
    assert config.evaluator.backend == "http://127.0.0.1:8700" and config.evaluator.key == "s3cret-key-value"
    assert "s3cret-key-value" not in str(config.masked()) and "s3cret-key-value" not in repr(config)


def test_a_bad_evaluator_in_the_configuration_is_a_config_error():
    with pytest.raises(ConfigError, match="evaluator.backend"):
        load_config(environ={"KOPE_EVALUATOR": "nowhere"})


def test_a_ray_address_nothing_answers_at_is_one_clear_error_not_a_silent_local_evaluation():
    from kope.db.ports import free_port
    from kope.evaluators import make_evaluator

    closed = free_port()  # a loopback port nothing listens on
    with pytest.raises(UsageError, match=f"no Ray cluster answers at ray://127.0.0.1:{closed}"):
        make_evaluator(load_config(environ={}), f"ray://127.0.0.1:{closed}")
    with pytest.raises(UsageError, match="bad Ray address"):
        make_evaluator(load_config(environ={}), "ray://127.0.0.1")


@pytest.mark.parametrize("value", ["0", "many", "-2"])
def test_a_bad_ray_cpu_count_names_the_setting(value):
    with pytest.raises(ConfigError, match="evaluator.ray_cpus"):
        load_config(environ={"KOPE_EVALUATOR_RAY_CPUS": value})


def test_a_replay_folder_is_kept_as_an_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = parse_evaluator("replay:spaces")
    assert spec.kind == "replay" and spec.folder == str(tmp_path / "spaces")
    assert str(spec) == f"replay:{tmp_path / 'spaces'}"
