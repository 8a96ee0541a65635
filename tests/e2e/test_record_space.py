"""`kope bench record-space` with the real harness: a small recording, then its optimum confirmed on --resume.

Each setting is rendered, compiled, checked and timed on this machine (a short budget: the figures are not
the point, the file and its bookkeeping are)."""

from __future__ import annotations

import json
import os

from kope.evaluators.space import SpaceFile


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J")}  # no graph needed


def test_a_recording_is_resumed_with_its_optimum_confirmed_by_the_median_of_three(kope_cli, tmp_path):
    base = ("bench", "record-space", "--operators", "relu", "--cases", "0", "--budget-ms", "5", "--max-settings", "3")
    first = kope_cli(*base, "--out", "spaces", "--confirm", "0", env=_env(), check=True)
    path = tmp_path / "spaces" / "relu.pointwise.space.json"
    recorded = SpaceFile.read(path)
    n = len(recorded.settings)  # the defaults and every one-knob change (more than --max-settings 3)
    assert f"{path.relative_to(tmp_path)}: {n} settings" in first.stdout, first.stdout
    assert n == recorded.design["planned"] and "confirm" not in recorded.design
    assert not any("confirmed" in e for e in recorded.settings)

    again = kope_cli(*base, "--out", "spaces", "--resume", env=_env(), check=True)  # the default: --confirm 2
    assert f"resuming: {n} of {n} settings already recorded" in again.stderr, again.stderr
    assert "[confirm 1] relu / pointwise" in again.stderr and "measured 3 times" in again.stderr, again.stderr
    space = SpaceFile.read(path)
    assert len(space.settings) == n and space.design["confirm"] == 2
    confirmed = [e for e in space.settings if "confirmed" in e]
    assert confirmed  # (the first is the fastest after the resume's control pass, which may measure some again)
    assert "confirmed" in space.ranked()[0]  # and the optimum now is a confirmed setting
    for entry in confirmed:
        assert entry["confirmed"] == 3 and len([r for r in entry["remeasured"] if r.get("confirm")]) == 2
        speeds = sorted([entry["outcome"]["speedup"], *(r["speedup"] for r in entry["remeasured"] if r.get("confirm"))])
        assert entry["outcome"]["speedup"] == speeds[1]  # the median of the three
    assert json.loads(path.read_text())["settings"] == space.settings

    # nothing left to do, unless the recording's control measures again a setting whose reference time is still off
    # the space's median (every resume runs it: under load, as in the whole suite, it may, and may reorder the
    # settings so that a new fastest is confirmed in turn)
    calm = kope_cli(*base, "--out", "spaces", "--resume", env=_env(), check=True)
    after = SpaceFile.read(path)
    if "[again" not in calm.stderr:
        assert "[confirm" not in calm.stderr and after.settings == space.settings, calm.stderr
    assert len(after.settings) == n and "confirmed" in after.ranked()[0], calm.stderr
