"""The Triton templates' candidates compute their operators correctly under the Triton interpreter (CPU tensors).

* fast: every value of every knob, on every operator the template serves, on two small cases (an awkward
  float32 shape and a float64 or bfloat16 one), run in this process with ``TRITON_INTERPRET=1`` and compared
  with the task's reference by the harness's own comparison;
* slow: through the real harness (``--target triton``, interpreted): the default settings on every case of
  every operator, and every knob value on every case of one operator per setting (the interpreter runs a
  program at a time in Python, so the full cases take minutes).

On a GPU, scripts/gpu_check.sh times the same candidates.
"""

import importlib.util

import pytest
import torch

from harness.compare import compare_outputs
from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_task
from harness.suite.kernel_templates import list_templates
from harness.task import Case, load_task

pytest.importorskip("triton")

TEMPLATES = list_templates("triton")
SEED = 20261201
_EW = [{"batch_size": 7, "dim": 1031}, {"batch_size": 3, "dim": 517, "DTYPE": "float64"}]
_EW_BF16 = [{"batch_size": 7, "dim": 1031}, {"batch_size": 5, "dim": 301, "DTYPE": "bfloat16"}]
_RED = [
    {"batch_size": 3, "dim1": 67, "dim2": 45, "reduce_dim": 1},
    {"batch_size": 5, "dim1": 33, "dim2": 71, "reduce_dim": 2, "DTYPE": "float64"},
]
SMALL = {
    "relu": [{"SHAPE": [5, 1029]}, {"SHAPE": [3, 333], "DTYPE": "bfloat16"}],
    "leaky_relu": _EW,
    "clamp": _EW,
    "hardswish": _EW_BF16,
    "add_scaled": _EW,
    "gelu": _EW,
    "sigmoid": _EW_BF16,
    "silu": _EW,
    "tanh": _EW,
    "elu": _EW,
    "sum_dim": [{"SHAPE": [3, 67, 45], "DIM": 1}, {"SHAPE": [4, 5, 301], "DIM": 2, "DTYPE": "float64"}],
    "mean_dim": _RED,
    "max_dim": [_RED[0], {"batch_size": 4, "dim1": 37, "dim2": 9, "reduce_dim": 0, "DTYPE": "bfloat16"}],
    "softmax": [{"batch_size": 5, "dim": 1500}, {"batch_size": 3, "dim": 257, "DTYPE": "float64"}],
    "log_softmax": [{"batch_size": 5, "dim": 1500}, {"batch_size": 3, "dim": 257, "DTYPE": "float64"}],
    "layer_norm": [
        {"batch_size": 2, "tokens": 3, "hidden": 1500, "OFFSET": 100.0},
        {"batch_size": 2, "tokens": 2, "hidden": 257, "DTYPE": "float64"},
    ],
    "rms_norm": [
        {"batch_size": 2, "seq_len": 3, "hidden": 1500},
        {"batch_size": 2, "seq_len": 2, "hidden": 257, "DTYPE": "bfloat16"},
    ],
    "matmul": [{"M": 67, "K": 45, "N": 71}, {"M": 33, "K": 70, "N": 20, "DTYPE": "float64"}],
    "batched_matmul": [
        {"batch_size": 3, "m": 37, "k": 41, "n": 29},
        {"batch_size": 2, "m": 20, "k": 33, "n": 17, "DTYPE": "bfloat16"},
    ],
    "matmul_transposed_a": [{"m": 67, "k": 45, "n": 71}, {"m": 33, "k": 70, "n": 20, "DTYPE": "float64"}],
    "linear": [
        {"batch_size": 1, "in_features": 70, "out_features": 65},
        {"batch_size": 19, "in_features": 40, "out_features": 33, "DTYPE": "bfloat16"},
    ],
    "gemm_bias_relu": [
        {"batch_size": 37, "in_features": 70, "out_features": 65},
        {"batch_size": 9, "in_features": 40, "out_features": 33, "DTYPE": "float64"},
    ],
    "gemm_gelu_scale": [
        {"batch_size": 37, "in_features": 70, "out_features": 65},
        {"batch_size": 9, "in_features": 40, "out_features": 33, "DTYPE": "bfloat16"},
    ],
}


def every_knob_value(template):
    """Settings giving every knob each of its values in turn (the others at their defaults)."""
    return [{knob.name: value} for knob in template.knobs for value in knob.values]


def knob_value_settings(template):
    """A few settings that together give every knob every one of its non-default values."""
    others = {k.name: [v for v in k.values if v != k.default] for k in template.knobs}
    count = max(len(v) for v in others.values())
    return [{name: values[min(i, len(values) - 1)] for name, values in others.items()} for i in range(count)]


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


FAST_JOBS = [(t, op) for t in TEMPLATES for op in t.operators]


def test_every_served_operator_has_small_cases():
    assert {op for _, op in FAST_JOBS} == set(SMALL)


@pytest.mark.parametrize("template, operator", FAST_JOBS, ids=[f"{t.name}-{op}" for t, op in FAST_JOBS])
def test_every_knob_value_is_correct_on_small_cases_under_the_interpreter(interpret, tmp_path, template, operator):
    task = load_task(find_task(operator).path)
    for n, settings in enumerate(every_knob_value(template)):
        path = tmp_path / f"{operator}_{n}.py"
        path.write_text(template.render(operator, settings))
        candidate = _import(path, f"kope_triton_candidate_{operator}_{n}")
        for i, params in enumerate(SMALL[operator]):
            module = task.module_for_case(Case(i, f"small-{i}", params))
            torch.manual_seed(SEED + i)
            reference = module.Model(*module.get_init_inputs())
            new = candidate.ModelNew(*module.get_init_inputs())
            new.load_state_dict(reference.state_dict())
            inputs = module.get_inputs()
            with torch.no_grad():
                verdict = compare_outputs(new(*inputs), reference(*inputs))
            assert verdict.ok, f"{operator} {settings} {params}: {verdict.kind}: {verdict.message}"


def _failure(outcome):
    bad = [f"{c.name}: {c.error}" for c in outcome.cases if not c.passed]
    return f"{outcome.error_kind}: {bad[:2] or outcome.error_excerpt}"


def _evaluate(tmp_path, template, operator, settings):
    path = tmp_path / f"{operator}.py"
    path.write_text(template.render(operator, settings))
    options = EvalOptions(target="triton", timing=False, seeds=1, seed=SEED, case_timeout_s=1800)
    return evaluate(operator, path, options)


@pytest.mark.slow
@pytest.mark.parametrize("template, operator", FAST_JOBS, ids=[f"{t.name}-{op}" for t, op in FAST_JOBS])
def test_default_settings_pass_every_case_under_the_interpreter(tmp_path, template, operator):
    outcome = _evaluate(tmp_path, template, operator, template.default_settings())
    assert outcome.status.value == "correct", _failure(outcome)
    assert outcome.cases_passed == outcome.cases_total == len(find_task(operator).cases)


VALUE_JOBS = [(t, i, s) for t in TEMPLATES for i, s in enumerate(knob_value_settings(t))]


@pytest.mark.slow
@pytest.mark.parametrize("template, index, settings", VALUE_JOBS, ids=[f"{t.name}-{i}" for t, i, _ in VALUE_JOBS])
def test_every_knob_value_passes_every_case_of_an_operator_under_the_interpreter(tmp_path, template, index, settings):
    operator = template.operators[(index + 1) % len(template.operators)]
    outcome = _evaluate(tmp_path, template, operator, settings)
    assert outcome.status.value == "correct", f"{operator} {settings}: {_failure(outcome)}"
    assert outcome.cases_passed == outcome.cases_total == len(find_task(operator).cases)
