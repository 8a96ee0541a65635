"""Small task files for the bench plan's tests (tests/unit/test_bench_plan.py, tests/integration/test_bench_plan_tasks.py)."""

from __future__ import annotations

from pathlib import Path

TASK = """import torch
import torch.nn as nn

OPERATOR = "{operator}"
FAMILY = "{family}"
{level}
n = 64
CASES = [{{"name": "n64", "n": 64}}, {{"name": "n128", "n": 128}}]


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
"""


def write_task(
    folder: Path, operator: str, family: str = "elementwise", level: int | None = 1, name: str | None = None
) -> Path:
    path = folder / f"{name or operator}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TASK.format(operator=operator, family=family, level=f"LEVEL = {level}" if level else ""))
    return path
