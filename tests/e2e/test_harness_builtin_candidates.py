"""The hand-written cpu candidates shipped with the suite are correct on every case of their task."""

import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_task, list_candidates

CANDIDATES = sorted(list_candidates("cpu").items())


@pytest.mark.slow
@pytest.mark.parametrize("operator, path", CANDIDATES, ids=[op for op, _ in CANDIDATES])
def test_builtin_candidate_passes_every_case(operator, path):
    # One seed per case keeps this test short; several seeds per case are exercised by the adversarial tests.
    outcome = evaluate(operator, path, EvalOptions(timing=False, seeds=1))
    assert outcome.status.value == "correct", outcome.error_excerpt
    assert outcome.cases_passed == outcome.cases_total == len(find_task(operator).cases)
    assert outcome.compile_time_s is not None


def test_at_least_eight_builtin_operators_ship_a_cpu_candidate():
    assert len(CANDIDATES) >= 8
