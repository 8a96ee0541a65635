"""Every cheating candidate in tests/adversarial is caught, by the static layer and by the run-time layer alone."""

import ast
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.timing import Budget
from harness.worker_pool import Limits

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("harness_trace")  # its trace printed when a verdict is wrong
CHEATS = sorted((ROOT / "adversarial").glob("*.py"))


def constants(path: Path) -> dict:
    values = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return values


def run(path: Path, static: bool):
    spec = constants(path)
    task = ROOT / "fixtures" / "tasks" / f"{spec['TASK']}.py"
    options = EvalOptions(
        static_checks=static,
        timing=bool(spec.get("NEEDS_TIMING")),
        budget=Budget(warmup_ms=5, rep_ms=20),
        limits=Limits(memory_bytes=2 << 30),
        case_timeout_s=60,
    )
    return spec, evaluate(task, path, options)


def alone_marks(path: Path) -> tuple:
    """The marks of a test of the fixture ``path``: ``alone`` where it says RUN_ALONE (no other test beside it)."""
    return (pytest.mark.alone,) if constants(path).get("RUN_ALONE") else ()


def params(paths: list[Path]) -> list:
    """``paths`` as parameters, each with its fixture's ``alone_marks``."""
    return [pytest.param(p, marks=alone_marks(p)) for p in paths]


def test_the_folder_holds_at_least_ten_distinct_cheats():
    kinds = {k for p in CHEATS for k in constants(p)["EXPECT_RUNTIME"]}
    assert len(CHEATS) >= 10 and len(kinds) >= 10


STATIC = [p for p in CHEATS if constants(p)["EXPECT_STATIC"]]


@pytest.mark.parametrize("path", STATIC, ids=lambda p: p.stem)
def test_static_checks_catch_the_cheat_before_anything_runs(path):
    spec, outcome = run(path, static=True)
    assert outcome.error_kind == spec["EXPECT_STATIC"], outcome.error_excerpt
    assert outcome.status.value == "cheat_detected" and "line" in outcome.error_excerpt
    assert outcome.compile_time_s is None  # nothing was compiled or run


@pytest.mark.slow
@pytest.mark.parametrize("path", params(CHEATS), ids=lambda p: p.stem)
def test_run_time_checks_alone_catch_the_cheat(path):
    spec, outcome = run(path, static=False)
    assert outcome.error_kind in spec["EXPECT_RUNTIME"], outcome.error_excerpt
    assert outcome.status.value in ("cheat_detected", "incorrect")
    assert outcome.error_excerpt  # the reason
    assert outcome.cases_passed < outcome.cases_total


@pytest.mark.slow
def test_a_background_spinner_is_caught_on_a_machine_loaded_from_outside():
    """Busy processes outside the evaluation take their share of the cores: the spinner then gets as little of a
    core as the reference's threads do, and an allowance measured in wall time let it through (seen on the
    development machine with other jobs running)."""
    import os
    import subprocess
    import sys

    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
        for _ in range(2 * (os.cpu_count() or 1))
    ]
    try:
        spec, outcome = run(ROOT / "adversarial" / "background_spinner.py", static=False)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert outcome.error_kind in spec["EXPECT_RUNTIME"], outcome.error_excerpt
