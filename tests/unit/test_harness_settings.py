"""The harness's settings live in one module: harness/settings.py names every KOPE_HARNESS_* variable."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness import settings

REPO = Path(__file__).resolve().parents[2]
NAME = re.compile(r"^KOPE_HARNESS_[A-Z_]+$")


def test_no_other_module_names_a_harness_variable():
    found = []
    for folder in ("harness", "kope"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path == REPO / "harness" / "settings.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.match(node.value):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.value}")
    assert found == []


def test_every_harness_variable_is_documented():
    doc = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert [name for name in settings.ALL if f"`{name}`" not in doc] == []


@pytest.mark.parametrize(
    ("value", "expected"), [("", 60.0), ("2.5", 2.5), (" 7 ", 7.0), ("x", None), ("0", None), ("-1", None)]
)
def test_the_task_timeout_is_a_positive_number_of_seconds(monkeypatch, value, expected):
    monkeypatch.setenv(settings.TASK_TIMEOUT, value)
    if expected is None:
        with pytest.raises(settings.TaskFormatError, match=settings.TASK_TIMEOUT):
            settings.task_timeout_s()
    else:
        assert settings.task_timeout_s() == expected


def test_switches_read_off_and_its_synonyms(monkeypatch):
    for word in ("off", "OFF", "0", "false", "no"):
        monkeypatch.setenv(settings.SANDBOX, word)
        monkeypatch.setenv(settings.ZYGOTE, word)
        assert settings.sandbox_opted_out() and not settings.zygote_enabled()
    monkeypatch.setenv(settings.SANDBOX, "on")
    monkeypatch.delenv(settings.ZYGOTE)
    assert not settings.sandbox_opted_out() and settings.zygote_enabled()
