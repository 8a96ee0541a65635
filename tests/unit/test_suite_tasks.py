"""Every built-in suite task loads, declares valid metadata and runs each of its cases.

Task files under ``harness/suite/tasks/<family>/<operator>.py`` are imported
straight from their paths with importlib, and each case is applied as contract
§1 says (every key but ``name`` set as a module global, or ``apply_case(case)``
when the module defines it). The lead switches this to the harness loader when
the harness is merged. Work per case is one seeded construction and one forward
pass under ``torch.no_grad()``; no timing is asserted here (sizing is checked by
``benchmarks/suite_reference_times.py``).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

TASKS_DIR = Path(__file__).resolve().parents[2] / "harness" / "suite" / "tasks"
FAMILIES = {"elementwise", "reduction", "normalization", "matmul", "convolution", "fused", "block"}
TASK_FILES = sorted(p for p in TASKS_DIR.glob("*/*.py") if not p.name.startswith("_"))
IDS = [f"{p.parent.name}/{p.stem}" for p in TASK_FILES]


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"suite_task_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _apply_case(module, case: dict) -> None:
    if hasattr(module, "apply_case"):
        module.apply_case(dict(case))
        return
    for key, value in case.items():
        if key != "name":
            setattr(module, key, value)


def _tensors(output) -> list[torch.Tensor]:
    items = output if isinstance(output, (tuple, list)) else [output]
    assert items and all(isinstance(t, torch.Tensor) for t in items), f"forward returned {type(output).__name__}"
    return list(items)


def test_suite_holds_at_least_36_operators():
    assert len(TASK_FILES) >= 36, [p.name for p in TASK_FILES]


def test_every_family_has_at_least_three_tasks():
    counts = {family: sum(p.parent.name == family for p in TASK_FILES) for family in FAMILIES}
    assert all(n >= 3 for n in counts.values()), counts


def test_operator_names_are_unique_across_the_suite():
    names = [getattr(_load(p), "OPERATOR", p.stem) for p in TASK_FILES]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, duplicates


@pytest.mark.parametrize("path", TASK_FILES, ids=IDS)
def test_task_declares_valid_metadata(path: Path):
    module = _load(path)
    operator = getattr(module, "OPERATOR", path.stem)
    assert re.fullmatch(r"[a-z][a-z0-9_]*", operator), operator
    assert operator == path.stem, f"OPERATOR {operator!r} does not match the file name {path.name}"
    assert module.FAMILY in FAMILIES and module.FAMILY == path.parent.name, module.FAMILY
    assert isinstance(module.LEVEL, int) and 1 <= module.LEVEL <= 4, module.LEVEL
    assert isinstance(module.DESCRIPTION, str) and module.DESCRIPTION.strip()
    assert module.__doc__ and module.__doc__.strip(), "task file has no docstring"
    assert callable(module.Model) and callable(module.get_inputs) and callable(module.get_init_inputs)


@pytest.mark.parametrize("path", TASK_FILES, ids=IDS)
def test_task_has_at_least_eight_uniquely_named_json_cases(path: Path):
    cases = _load(path).CASES
    assert len(cases) >= 8, len(cases)
    names = [case["name"] for case in cases]
    assert all(isinstance(n, str) and n for n in names), names
    assert len(set(names)) == len(names), names
    assert json.loads(json.dumps(cases)) == cases  # JSON-serialisable, round-trips unchanged


@pytest.mark.parametrize("path", TASK_FILES, ids=IDS)
def test_every_case_sets_the_same_known_globals(path: Path):
    """So a case never inherits a value left behind by the case applied before it."""
    module = _load(path)
    if hasattr(module, "apply_case"):
        pytest.skip("the task applies cases through its own hook")
    keys = {frozenset(case) - {"name"} for case in module.CASES}
    assert len(keys) == 1, sorted(sorted(k) for k in keys)
    unknown = sorted(k for k in next(iter(keys)) if not hasattr(module, k))
    assert not unknown, f"cases set globals the module does not define: {unknown}"


@pytest.mark.parametrize("path", TASK_FILES, ids=IDS)
def test_module_defaults_are_the_first_case(path: Path):
    """So loading the file as a plain KernelBench problem (no CASES) runs case 0."""
    module = _load(path)
    if hasattr(module, "apply_case"):
        pytest.skip("the task applies cases through its own hook")
    first = module.CASES[0]
    differing = {
        key: (getattr(module, key, None), value)
        for key, value in first.items()
        if key != "name" and getattr(module, key, None) != value
    }
    assert not differing, f"module value vs first case: {differing}"


@pytest.mark.parametrize("path", TASK_FILES, ids=IDS)
def test_every_case_runs_to_a_finite_nonzero_output(path: Path):
    for case in _load(path).CASES:
        module = _load(path)  # fresh module per case, as the harness does
        _apply_case(module, case)
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).eval()
        inputs = module.get_inputs()
        with torch.no_grad():
            outputs = _tensors(model(*inputs))
        dtype = getattr(torch, module.DTYPE) if hasattr(module, "DTYPE") else None
        for out in outputs:
            label = f"case {case['name']}"
            assert out.numel() > 0, f"{label}: empty output"
            if out.is_floating_point():
                assert dtype is None or out.dtype == dtype, f"{label}: output dtype {out.dtype}, DTYPE says {dtype}"
                low, high = torch.aminmax(out)  # one pass, no temporary; NaN and inf show up in low/high
                assert torch.isfinite(low) and torch.isfinite(high), f"{label}: non-finite output"
                assert low != 0 or high != 0, f"{label}: output is all zeros"
            else:
                assert torch.count_nonzero(out) > 0, f"{label}: output is all zeros"
