"""Rewrites the worker's replies on their way out: every trial list is emptied before it is encoded.

Goes through ``json.dumps``, which the in-process patch check does not watch (it stands in for a
native patch, which no check inside the candidate's process can see). Caught by the parent, which
checks that every trial it asked for came back for the seeds it asked for.
"""

import json

import torch.nn as nn

TASK = "tiny_softmax"
EXPECT_STATIC = "cheat_detected:monkey_patch"
EXPECT_RUNTIME = ("cheat_detected:missing_trials",)
CAUGHT_BY = "parent: trial count and seeds checked against the request"

_dumps = json.dumps


def _emptied(obj, *args, **kwargs):
    if isinstance(obj, dict) and "trials" in obj:
        obj = {**obj, "trials": []}
    return _dumps(obj, *args, **kwargs)


json.dumps = _emptied


class ModelNew(nn.Module):
    def forward(self, x):
        return x
