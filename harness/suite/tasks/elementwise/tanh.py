"""Hyperbolic tangent applied elementwise to a 2-D tensor."""

import torch
import torch.nn as nn

OPERATOR = "tanh"
FAMILY = "elementwise"
LEVEL = 1
DESCRIPTION = (
    "tanh(x) elementwise on a (batch_size, dim) tensor; inputs are scaled by 3 "
    "so the linear middle and both saturated tails are exercised."
)

batch_size = 1024
dim = 7168
DTYPE = "float32"

CASES = [
    {"name": "1024x7168", "batch_size": 1024, "dim": 7168, "DTYPE": "float32"},
    {"name": "2560x2880", "batch_size": 2560, "dim": 2880, "DTYPE": "float32"},
    {"name": "1x7340033", "batch_size": 1, "dim": 7340033, "DTYPE": "float32"},
    {"name": "1023x7177", "batch_size": 1023, "dim": 7177, "DTYPE": "float32"},
    {"name": "3x2446677", "batch_size": 3, "dim": 2446677, "DTYPE": "float32"},
    {"name": "512x7168-f64", "batch_size": 512, "dim": 7168, "DTYPE": "float64"},
    {"name": "257x14281-f64", "batch_size": 257, "dim": 14281, "DTYPE": "float64"},
    {"name": "1024x7168-bf16", "batch_size": 1024, "dim": 7168, "DTYPE": "bfloat16"},
    {"name": "1x7340033-bf16", "batch_size": 1, "dim": 7340033, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x9973", "batch_size": 333, "dim": 9973, "DTYPE": "float32"},
    {"name": "heldout-f64-3x400009", "batch_size": 3, "dim": 400009, "DTYPE": "float64"},
    {"name": "heldout-bf16-1000x3001", "batch_size": 1000, "dim": 3001, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


def get_inputs():
    return [3.0 * torch.randn(batch_size, dim, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return []
