"""Hostile task: writes beside itself and under /tmp at import, then fails saying which writes got through."""

import os
import tempfile
from pathlib import Path

import torch
import torch.nn as nn

NAME = "kope-task-escaped.txt"
wrote, refused = [], []
for folder in (Path(__file__).resolve().parent, Path("/tmp"), Path("/var/tmp")):
    target = folder / NAME
    try:
        target.write_text("written by a task file at import\n")
        wrote.append(str(target))
    except OSError as exc:
        refused.append(f"{target}: {exc.strerror}")
scratch = Path(tempfile.gettempdir()) / NAME  # its own scratch folder: allowed, and gone with it
scratch.write_text("mine\n")
raise RuntimeError(f"wrote outside the scratch: {wrote or 'nothing'}; refused: {len(refused)}; home {os.environ.get('HOME')}")


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(256)]


def get_init_inputs():
    return []
