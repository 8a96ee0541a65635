"""Sum of a 3-D tensor over one dimension, keeping it (KernelBench level 1 style)."""

import torch
import torch.nn as nn

OPERATOR = "sum_dim"
FAMILY = "reduction"
LEVEL = 1
DESCRIPTION = "y = x.sum(dim=DIM, keepdim=True) for a 3-D x; DIM is 0, 1 or 2; float32 and float64."
DTYPE = "float32"
SHAPE = [128, 256, 257]
DIM = 2

CASES = [
    {"name": "dim2-128x256x257", "SHAPE": [128, 256, 257], "DIM": 2},
    {"name": "dim1-128x257x256", "SHAPE": [128, 257, 256], "DIM": 1},
    {"name": "dim0-255x256x129", "SHAPE": [255, 256, 129], "DIM": 0},
    {"name": "dim2-long-16x16x32771", "SHAPE": [16, 16, 32771], "DIM": 2},
    {"name": "dim1-odd-65x1025x123", "SHAPE": [65, 1025, 123], "DIM": 1},
    {"name": "dim1-narrow-2x1048573x3", "SHAPE": [2, 1048573, 3], "DIM": 1},
    {"name": "dim0-f64-1001x61x67", "SHAPE": [1001, 61, 67], "DIM": 0, "DTYPE": "float64"},
    {"name": "dim2-f64-6144x1x1023", "SHAPE": [6144, 1, 1023], "DIM": 2, "DTYPE": "float64"},
    {"name": "dim1-f64-33x1023x129", "SHAPE": [33, 1023, 129], "DIM": 1, "DTYPE": "float64"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-dim2-97x129x1021", "SHAPE": [97, 129, 1021], "DIM": 2, "DTYPE": "float32"},
    {"name": "heldout-dim0-7x3001x257", "SHAPE": [7, 3001, 257], "DIM": 0, "DTYPE": "float32"},
    {"name": "heldout-dim1-f64-31x2047x63", "SHAPE": [31, 2047, 63], "DIM": 1, "DTYPE": "float64"},
]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs():
    return [torch.randn(*SHAPE, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [DIM]
