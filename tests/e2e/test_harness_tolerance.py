"""A long reduction whose float32 reference is less accurate than the default tolerance assumes: an honest kernel
is accepted by the reference's own accuracy (recomputed in float64 in a reference worker), and the outcome says
so; a kernel off by more than that is still refused (harness.compare.precise_verdict; docs/harness.md,
"The reference's own accuracy")."""

from __future__ import annotations

from pathlib import Path

from harness.compare import PRECISE_RULE
from harness.eval_setup import EvalOptions
from harness.evaluate import evaluate
from harness.timing import Budget

# A dot product of 4M float32 values whose halves cancel: torch's float32 result is off the float64 one by 3-23
# (seeds 0-4) where the default tolerance allows 0.02-0.6.
TASK = """
import torch
import torch.nn as nn

OPERATOR = "cancelling_dot"
FAMILY = "reduction"
LEVEL = 1
k = 1 << 22


class Model(nn.Module):
    def forward(self, a, x):
        return torch.mv(a, x)


def get_inputs():
    v = torch.randn(k // 2) * 1000
    return [(torch.cat([v, -v]) + torch.randn(k)).view(1, k), torch.ones(k)]


def get_init_inputs():
    return []
"""

# y = a @ x accumulated in double, then + OFFSET
CANDIDATE = """
import torch
import torch.nn as nn
from harness.cpu import compile_cpp

_lib = compile_cpp(r'''
#include <cstdint>
extern "C" void dot_f32(const float* a, const float* x, float* y, int64_t k, double offset) {
    double s = 0.0;
    for (int64_t i = 0; i < k; ++i) s += double(a[i]) * double(x[i]);
    y[0] = float(s + offset);
}
''')


class ModelNew(nn.Module):
    def forward(self, a, x):
        y = torch.empty(1, dtype=torch.float32)
        _lib.dot_f32(a.contiguous(), x.contiguous(), y, a.shape[1], OFFSET)
        return y
"""

OPTIONS = EvalOptions(seeds=2, budget=Budget(warmup_ms=5, rep_ms=30, min_reps=3, max_reps=5), physical_limit=False)


def write(tmp_path: Path, offset: float) -> tuple[Path, Path]:
    task, candidate = tmp_path / "cancelling_dot.py", tmp_path / "cand.py"
    task.write_text(TASK)
    candidate.write_text(f"OFFSET = {offset!r}\n" + CANDIDATE)
    return task, candidate


def test_an_accurate_long_reduction_is_accepted_timed_and_the_rule_recorded(tmp_path):
    task, candidate = write(tmp_path, 0.0)
    outcome = evaluate(task, candidate, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt
    case = outcome.cases[0]
    assert case.passed and case.speedup is not None  # the timed calls' outputs (ring inputs) were judged too
    assert case.tolerance == PRECISE_RULE
    assert outcome.to_dict()["cases"][0]["tolerance"] == PRECISE_RULE


def test_a_result_off_by_more_than_the_references_own_error_is_refused(tmp_path):
    task, candidate = write(tmp_path, 500.0)  # ~20x the reference's worst error on these inputs
    outcome = evaluate(task, candidate, OPTIONS)
    assert outcome.status.value == "incorrect" and outcome.error_kind == "incorrect:mismatch"
    assert "outside the reference's own accuracy" in (outcome.error_excerpt or "")
    assert outcome.cases[0].tolerance is None
