"""benchmarks/replay_bounds.py's consensus policy: a reference for what transferring settings alone gives on a
recording (issue 34, twenty-third round), on the committed pointwise spaces with their speedups set here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kope.evaluators.space import SpaceFile, read_spaces

SPACES = Path(__file__).resolve().parents[1] / "fixtures" / "spaces"


def _with_speedups(tmp_path: Path, operator: str, speedups: dict[int, float]) -> SpaceFile:
    """The committed space of ``operator`` with the speedups of the settings at the given indices (the rest 0.1)."""
    space = next(s for s in read_spaces(SPACES) if s.operator == operator)
    for i, entry in enumerate(space.settings):
        entry["outcome"] = json.loads(json.dumps(entry["outcome"]))
        entry["outcome"]["status"] = "correct"
        entry["outcome"]["speedup"] = speedups.get(i, 0.1)
    path = tmp_path / f"{operator}.json"
    space.write(path)
    return SpaceFile.read(path)


@pytest.fixture()
def bounds(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import replay_bounds

    return replay_bounds


def test_the_consensus_policy_tries_the_setting_nearest_the_earlier_optima_first(bounds, tmp_path):
    earlier = _with_speedups(tmp_path, "clamp", {0: 1.0, 1: 1.5, 2: 2.0})
    # add_scaled reads clamp's settings as its own (same template, the same knobs matter): clamp's optimum (index 2)
    # within 90 % of add_scaled's is its first step
    later = _with_speedups(tmp_path, "add_scaled", {0: 1.0, 1: 1.2, 2: 1.9, 3: 2.0})
    assert bounds.consensus_steps(later, [earlier], 1, alone=5.0) == 1.0
    # add_scaled's optimum is clamp's second best: one miss, then found at the second try; with one try it goes on as
    # no memory would after its miss (1 + 5 steps), and never past the budget + 1
    later = _with_speedups(tmp_path, "add_scaled", {0: 1.0, 1: 3.0, 2: 1.0})
    assert bounds.consensus_steps(later, [earlier], 2, alone=5.0) == 2.0
    assert bounds.consensus_steps(later, [earlier], 1, alone=5.0) == 6.0
    assert bounds.consensus_steps(later, [earlier], 1, alone=8.5) == 9.0


def test_the_bounds_report_refuses_a_top_below_one(bounds, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bounds.main([str(SPACES), "--top", "0"])
    assert exit_info.value.code == 2
    assert "--top takes a count of at least 1" in capsys.readouterr().err
