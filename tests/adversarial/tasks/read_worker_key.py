"""Hostile task: looks for the HTTP worker's key in its parent's environment (and in every process it can see).

Before issue 33 the worker service imported task files in its long-lived evaluator process, whose parent is
the service: ``/proc/<ppid>/environ`` still held ``KOPE_WORKER_KEY`` (``os.environ.pop`` only unlinks the
variable). It always fails at import, saying what it found, so the test can tell containment from a leak.
"""

import os

import torch
import torch.nn as nn

found = []
looked = []
for pid in sorted({str(os.getppid()), *(p for p in os.listdir("/proc") if p.isdigit())}):
    for name in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        looked.append(f"{pid}/{name}")
        found += [e.decode(errors="replace") for e in data.split(b"\0") if b"KOPE_WORKER_KEY" in e or b"--key" in e]
raise RuntimeError(f"looked in {len(looked)} process files; worker key: {found or 'nothing found'}")


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256)]


def get_init_inputs():
    return []
