"""Every built-in suite task declares valid metadata and well-formed cases.

Running every case's reference (finite, non-degenerate output of the declared
dtype) is tests/e2e/test_harness_references.py, through the harness loader;
sizing is checked by ``benchmarks/suite_reference_times.py``.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from harness.vocabulary import FAMILIES

TASKS_DIR = Path(__file__).resolve().parents[2] / "harness" / "suite" / "tasks"
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
