"""Inclusive prefix sum of a 2-D tensor along its rows."""

import torch
import torch.nn as nn

OPERATOR = "cumsum"
FAMILY = "reduction"
LEVEL = 1
DESCRIPTION = (
    "Inclusive cumulative sum along the last dimension of a (batch_size, dim) tensor "
    "(a scan: out[i, j] = sum of x[i, :j+1]); inputs are uniform in [0, 1) so prefix sums grow."
)

batch_size = 512
dim = 8192
DTYPE = "float32"

CASES = [
    {"name": "512x8192", "batch_size": 512, "dim": 8192, "DTYPE": "float32"},
    {"name": "4096x1024", "batch_size": 4096, "dim": 1024, "DTYPE": "float32"},
    {"name": "1x4194305", "batch_size": 1, "dim": 4194305, "DTYPE": "float32"},
    {"name": "1023x4097", "batch_size": 1023, "dim": 4097, "DTYPE": "float32"},
    {"name": "16385x257", "batch_size": 16385, "dim": 257, "DTYPE": "float32"},
    {"name": "7x600001", "batch_size": 7, "dim": 600001, "DTYPE": "float32"},
    {"name": "384x8192-f64", "batch_size": 384, "dim": 8192, "DTYPE": "float64"},
    {"name": "1021x3079-f64", "batch_size": 1021, "dim": 3079, "DTYPE": "float64"},
    {"name": "1x3145739-f64", "batch_size": 1, "dim": 3145739, "DTYPE": "float64"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x3001", "batch_size": 333, "dim": 3001, "DTYPE": "float32"},
    {"name": "heldout-3x1000003", "batch_size": 3, "dim": 1000003, "DTYPE": "float32"},
    {"name": "heldout-f64-1025x1023", "batch_size": 1025, "dim": 1023, "DTYPE": "float64"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


def get_inputs():
    return [torch.rand(batch_size, dim, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return []
