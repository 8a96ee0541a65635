"""The thread count of timed calls (harness.timing.timing_threads): the candidate's worker runs at the count the
harness chose, torch's intra-op pool and the candidate's own OpenMP runtime alike; a requested count is honoured
where it fits (docs/harness-workers.md, "Threads")."""

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.hardware import available_cores
from harness.timing import Budget, timing_threads

TINY_RELU = Path(__file__).resolve().parents[1] / "fixtures" / "tasks" / "tiny_relu.py"

# correct in its one correctness trial; its first timed call reports the thread counts its process runs at
_REPORTS_THREADS = r'''
import torch
import torch.nn as nn

from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <cstdint>
#include <omp.h>
extern "C" void relu(const float* x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}
extern "C" int omp_team() {
    int n = 0;
    #pragma omp parallel
    {
        #pragma omp single
        n = omp_get_num_threads();
    }
    return n;
}
""")
_calls = [0]


class ModelNew(nn.Module):
    def forward(self, x):
        _calls[0] += 1
        if _calls[0] > 1:
            raise RuntimeError(f"threads: torch {torch.get_num_threads()} omp {_lib.omp_team()} end")
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu(x, y, x.numel())
        return y
'''

OPTIONS = {"cases": "0", "seeds": 1, "budget": Budget(warmup_ms=5, rep_ms=10, min_reps=3)}


def _reported(tmp_path: Path, **options) -> tuple[str, int]:
    path = tmp_path / "reports_threads.py"
    path.write_text(_REPORTS_THREADS)
    outcome = evaluate(TINY_RELU, path, EvalOptions(**OPTIONS, **options))
    excerpt = outcome.error_excerpt or ""
    assert "threads: torch" in excerpt, (outcome.status, outcome.error_kind, excerpt)
    return excerpt[excerpt.index("threads: torch") :].split(" end")[0], outcome.threads


def test_timed_calls_run_at_the_policys_thread_count(tmp_path):
    chosen = timing_threads(None, available_cores())
    assert chosen == max(1, available_cores() - 1)
    reported, recorded = _reported(tmp_path)
    assert reported == f"threads: torch {chosen} omp {chosen}" and recorded == chosen


def test_a_requested_thread_count_is_honoured_where_it_fits(tmp_path):
    reported, recorded = _reported(tmp_path, threads=1)
    assert reported == "threads: torch 1 omp 1" and recorded == 1
    cores = available_cores()
    if cores > 2:  # one that fits, above one
        reported, recorded = _reported(tmp_path, threads=2)
        assert reported == "threads: torch 2 omp 2" and recorded == 2
    # more than fits: capped, the cap recorded
    reported, recorded = _reported(tmp_path, threads=cores + 1)
    assert reported == f"threads: torch {max(1, cores - 1)} omp {max(1, cores - 1)}" and recorded == max(1, cores - 1)
