"""Every built-in task's reference runs on the CPU for every case (iterates the discovery API, so new tasks are covered)."""

import pytest
import torch

from harness.compare import degenerate_reason
from harness.suite import list_tasks
from harness.task import load_task
from harness.worker_common import build_reference, init_inputs, make_inputs


@pytest.mark.parametrize("info", list_tasks(), ids=lambda t: f"{t.family}/{t.operator}")
def test_reference_runs_on_cpu_for_every_case(info):
    task = load_task(info.path)
    assert len(task.cases) >= 8
    for case in task.cases:
        module = task.module_for_case(case)
        model = build_reference(module, init_inputs(module, 0, case.name), 0, "cpu", case.name)
        inputs = make_inputs(module, 1, "cpu", case.name)
        with torch.no_grad():
            out = model(*inputs)
        tensors = [out] if isinstance(out, torch.Tensor) else [t for t in out if isinstance(t, torch.Tensor)]
        assert tensors, f"{case.name}: the reference returned no tensor"
        dtype = getattr(torch, module.DTYPE) if isinstance(getattr(module, "DTYPE", None), str) else None
        for tensor in tensors:
            if dtype is not None and tensor.is_floating_point():
                assert tensor.dtype == dtype, f"{case.name}: output dtype {tensor.dtype}, DTYPE says {dtype}"
        assert degenerate_reason(out) is None, f"{case.name}: {degenerate_reason(out)}"
