"""Hostile task: sleeps 300 s at import (before issue 33 only the worker's 2-hour evaluation timeout applied)."""

import time

import torch
import torch.nn as nn

time.sleep(300)


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256)]


def get_init_inputs():
    return []
