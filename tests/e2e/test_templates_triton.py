"""The Triton templates' candidates compute their operators correctly under the Triton interpreter (CPU tensors).

* fast: every value of every knob, on every operator the template serves, on two small cases (an awkward
  float32 shape and a float64 or bfloat16 one), run in this process with ``TRITON_INTERPRET=1`` and compared
  with the task's reference by the harness's own comparison;
* slow, and only with ``KOPE_TRITON_FULL_CASES=1``: through the real harness (``--target triton``,
  interpreted), the default settings on every case of every operator, and every knob value on every case of
  one operator per setting. The interpreter runs one program at a time in Python (about 2 ms each), so a
  task's full cases take minutes per evaluation and the whole set hours: too long for the default test run
  and CI; on a GPU the same candidates run in seconds (scripts/gpu_check.sh).

On a GPU, scripts/gpu_check.sh times the same candidates.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_task
from harness.suite.kernel_templates import list_templates
from tests.support.triton_small_cases import SMALL

pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = list_templates("triton")
SEED = 20261201
FAST_JOBS = [(t, op) for t in TEMPLATES for op in t.operators]


def knob_value_settings(template):
    """A few settings that together give every knob every one of its non-default values."""
    others = {k.name: [v for v in k.values if v != k.default] for k in template.knobs}
    count = max(len(v) for v in others.values())
    return [{name: values[min(i, len(values) - 1)] for name, values in others.items()} for i in range(count)]


def test_every_served_operator_has_small_cases():
    assert {op for _, op in FAST_JOBS} == set(SMALL)


@pytest.mark.parametrize("template, operator", FAST_JOBS, ids=[f"{t.name}-{op}" for t, op in FAST_JOBS])
def test_every_knob_value_is_correct_on_small_cases_under_the_interpreter(template, operator):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.triton_small_cases", template.name, operator],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    expected = sum(len(k.values) for k in template.knobs) * len(SMALL[operator])
    assert proc.stdout.strip() == f"ok {expected}"


FULL_CASES = pytest.mark.skipif(
    "1" not in (os.environ.get("KOPE_TRITON_FULL_CASES"), os.environ.get("KOPE_FULL_CHECKS")),
    reason="every case under the Triton interpreter takes hours: set KOPE_TRITON_FULL_CASES=1 to run it",
)


def _failure(outcome):
    bad = [f"{c.name}: {c.error}" for c in outcome.cases if not c.passed]
    return f"{outcome.error_kind}: {bad[:2] or outcome.error_excerpt}"


def _evaluate(tmp_path, template, operator, settings):
    path = tmp_path / f"{operator}.py"
    path.write_text(template.render(operator, settings))
    options = EvalOptions(target="triton", timing=False, seeds=1, seed=SEED, case_timeout_s=1800)
    return evaluate(operator, path, options)


@pytest.mark.slow
@FULL_CASES
@pytest.mark.parametrize("template, operator", FAST_JOBS, ids=[f"{t.name}-{op}" for t, op in FAST_JOBS])
def test_default_settings_pass_every_case_under_the_interpreter(tmp_path, template, operator):
    outcome = _evaluate(tmp_path, template, operator, template.default_settings())
    assert outcome.status.value == "correct", _failure(outcome)
    assert outcome.cases_passed == outcome.cases_total == len(find_task(operator).cases)


VALUE_JOBS = [(t, i, s) for t in TEMPLATES for i, s in enumerate(knob_value_settings(t))]


@pytest.mark.slow
@FULL_CASES
@pytest.mark.parametrize("template, index, settings", VALUE_JOBS, ids=[f"{t.name}-{i}" for t, i, _ in VALUE_JOBS])
def test_every_knob_value_passes_every_case_of_an_operator_under_the_interpreter(tmp_path, template, index, settings):
    operator = template.operators[(index + 1) % len(template.operators)]
    outcome = _evaluate(tmp_path, template, operator, settings)
    assert outcome.status.value == "correct", f"{operator} {settings}: {_failure(outcome)}"
    assert outcome.cases_passed == outcome.cases_total == len(find_task(operator).cases)
