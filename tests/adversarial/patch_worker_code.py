"""Swaps the code object of a harness worker method at import, keeping the function object itself.

An identity check on the method (``CandidateWorker.run is before``) still holds; caught by the
worker's patch check, which compares each watched function's ``__code__`` too.
"""

import torch.nn as nn

from harness import worker_candidate

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:monkey_patch",)
CAUGHT_BY = "worker: patch check compares code objects"


def _nothing(self, header):
    return {"ok": True, "trials": [], "compile_time_s": None}, []


worker_candidate.CandidateWorker.run.__code__ = _nothing.__code__


class ModelNew(nn.Module):
    def forward(self, x):
        return x
