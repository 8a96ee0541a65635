"""ReLU over a dense tensor of any rank (memory-bound elementwise)."""

import torch
import torch.nn as nn

OPERATOR = "relu"
FAMILY = "elementwise"
LEVEL = 1
DESCRIPTION = "y = max(x, 0) elementwise over a dense tensor; float32, float64, float16 and bfloat16."
DTYPE = "float32"
SHAPE = [2048, 2048]

CASES = [
    {"name": "2048x2048", "SHAPE": [2048, 2048]},
    {"name": "odd-1531x2053", "SHAPE": [1531, 2053]},
    {"name": "flat-8000009", "SHAPE": [8000009]},
    {"name": "rank3-128x129x257", "SHAPE": [128, 129, 257]},
    {"name": "7x600011", "SHAPE": [7, 600011]},
    {"name": "f64-2047x1025", "SHAPE": [2047, 1025], "DTYPE": "float64"},
    {"name": "f64-3x999983", "SHAPE": [3, 999983], "DTYPE": "float64"},
    {"name": "bf16-4096x2049", "SHAPE": [4096, 2049], "DTYPE": "bfloat16"},
    {"name": "f16-2048x4097", "SHAPE": [2048, 4097], "DTYPE": "float16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-rank4-17x31x63x127", "SHAPE": [17, 31, 63, 127], "DTYPE": "float32"},
    {"name": "heldout-f64-5x300007", "SHAPE": [5, 300007], "DTYPE": "float64"},
    {"name": "heldout-f16-999x3001", "SHAPE": [999, 3001], "DTYPE": "float16"},
    {"name": "heldout-bf16-3000001", "SHAPE": [3000001], "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    return [torch.randn(*SHAPE, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return []
