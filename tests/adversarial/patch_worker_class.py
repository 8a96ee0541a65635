"""Replaces a method of the harness's own worker class at import: every trial "passes" with no work done.

The patched run() returns an empty trial list (before: the parent paired reference trials with
whatever came back, so an empty list passed at any speedup). Caught by the parent, which checks
that every trial it asked for came back for the seeds it asked for.
"""

import torch.nn as nn

from harness import worker_candidate

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:missing_trials",)
CAUGHT_BY = "parent: trial count and seeds checked against the request"


def _nothing(self, header):
    return {"ok": True, "trials": [], "compile_time_s": None}, []


worker_candidate.CandidateWorker.run = _nothing


class ModelNew(nn.Module):
    def forward(self, x):
        return x
