"""Hostile task: at import, replaces the harness's output comparison so that every later output passes.

Before issue 33 the worker service imported task files in its long-lived evaluator process: the patch
outlived the request, and the next client's all-zeros candidate was accepted as correct. Otherwise this
is a valid task (a ReLU), so only the harness can refuse it.
"""

import torch
import torch.nn as nn

import harness.compare as compare
import harness.fast_compare as fast_compare


def _always_pass(*args, **kwargs):
    return compare.PASS


for _module in (compare, fast_compare):
    for _name in dir(_module):
        if _name.startswith("compare") and callable(getattr(_module, _name)):
            setattr(_module, _name, _always_pass)
compare.degenerate_reason = lambda ref: None

OPERATOR = "patch_compare"


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256)]


def get_init_inputs():
    return []
