"""Replaces a method of the harness's own worker class at import: every trial "passes" with no work done.

The patched run() returns an empty trial list. Caught by the worker's patch check, which watches
the methods of the harness's classes as well as its module-level names (before: module-level names
only, and the parent's trial count check was the only layer; ``patch_worker_reply.py`` still
exercises that one).
"""

import torch.nn as nn

from harness import worker_candidate

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:forbidden_api"
EXPECT_RUNTIME = ("cheat_detected:monkey_patch",)
CAUGHT_BY = "worker: patch check on the harness's classes"


def _nothing(self, header):
    return {"ok": True, "trials": [], "compile_time_s": None}, []


worker_candidate.CandidateWorker.run = _nothing


class ModelNew(nn.Module):
    def forward(self, x):
        return x
