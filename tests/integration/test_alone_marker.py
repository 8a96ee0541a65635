"""The ``alone`` marker (tests/support/alone.py) in a real pytest-xdist run: a test marked alone runs with no other
test beside it, and the tests that are not marked still run side by side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SAMPLE = textwrap.dedent(
    """
    import json, os, time
    import pytest

    def _spell(name):
        began = time.monotonic()
        time.sleep(0.4)
        with open(os.environ["SPELLS"], "a") as f:
            f.write(json.dumps([name, began, time.monotonic()]) + "\\n")

    @pytest.mark.parametrize("k", range(8))
    def test_plain(k):
        _spell(f"plain{k}")

    @pytest.mark.alone
    @pytest.mark.parametrize("k", range(2))
    def test_alone(k):
        _spell(f"alone{k}")
    """
)


def _overlap(a: list, b: list) -> bool:
    return a[1] < b[2] and b[1] < a[2]


def _run(tmp_path: Path, *plugin: str) -> list[list]:
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    spells = tmp_path / "spells.jsonl"
    spells.unlink(missing_ok=True)
    env = {**os.environ, "SPELLS": str(spells), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin", "-p", "no:randomly",
         "--rootdir", str(tmp_path), "-o", "markers=alone: x", *plugin, str(tmp_path / "test_sample.py")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(line) for line in spells.read_text().splitlines()]


def test_a_test_marked_alone_runs_with_no_other_test_beside_it(tmp_path):
    spells = _run(tmp_path, "-p", "tests.support.alone")
    assert len(spells) == 10
    alone = [s for s in spells if s[0].startswith("alone")]
    assert all(not _overlap(a, s) for a in alone for s in spells if s is not a), spells
    plain = [s for s in spells if s[0].startswith("plain")]
    assert any(_overlap(a, b) for a in plain for b in plain if a is not b), "the other tests ran one at a time"


def test_without_the_hook_the_same_tests_overlap(tmp_path):
    """The control: without the plugin an alone test has others beside it (so the first test can fail)."""
    spells = _run(tmp_path)
    alone = [s for s in spells if s[0].startswith("alone")]
    assert any(_overlap(a, s) for a in alone for s in spells if s is not a), spells
