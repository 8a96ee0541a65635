"""Small cases of the operators the Triton templates serve, and a checker that runs under the interpreter.

``python -m tests.support.triton_small_cases TEMPLATE OPERATOR`` renders the template for OPERATOR with every
value of every knob in turn (the others at their defaults), runs each candidate on the operator's small cases
against the task's reference and compares them with the harness's own comparison. It must run in a process
started with ``TRITON_INTERPRET=1`` (triton reads it when ``triton.language`` is first imported), so the
tests start it as a subprocess. Prints one line per failure and exits 1 if there is any, else prints ``ok N``.
"""

import importlib.util
import sys

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


def _import(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(template_name: str, operator: str, folder) -> list[str]:
    import torch

    from harness.compare import compare_outputs
    from harness.suite import find_task
    from harness.suite.kernel_templates import list_templates
    from harness.task import Case, load_task

    template = next(t for t in list_templates("triton") if t.name == template_name)
    task = load_task(find_task(operator).path)
    failures, checked = [], 0
    for n, settings in enumerate(every_knob_value(template)):
        path = folder / f"{operator}_{n}.py"
        path.write_text(template.render(operator, settings))
        candidate = _import(path, f"kope_triton_candidate_{operator}_{n}")
        for i, params in enumerate(SMALL[operator]):
            module = task.module_for_case(Case(i, f"small-{i}", params))
            torch.manual_seed(SEED + i)
            reference = module.Model(*module.get_init_inputs())
            new = candidate.ModelNew(*module.get_init_inputs())
            new.load_state_dict(reference.state_dict())
            inputs = module.get_inputs()
            try:
                with torch.no_grad():
                    verdict = compare_outputs(new(*inputs), reference(*inputs))
            except Exception as exc:  # a failing candidate is a finding, reported with its settings
                failures.append(f"{operator} {settings} {params}: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            checked += 1
            if not verdict.ok:
                failures.append(f"{operator} {settings} {params}: {verdict.kind}: {verdict.message}")
    if not failures:
        print(f"ok {checked}")
    return failures


if __name__ == "__main__":
    import os
    import tempfile
    from pathlib import Path

    if os.environ.get("TRITON_INTERPRET") != "1":
        print("error: run with TRITON_INTERPRET=1", file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory(prefix="kope-triton-small-") as tmp:
        problems = check(sys.argv[1], sys.argv[2], Path(tmp))
    for line in problems:
        print(line)
    sys.exit(1 if problems else 0)
