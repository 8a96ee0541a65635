"""Clamp every element of a 2-D tensor into [min_value, max_value]."""

import torch
import torch.nn as nn

OPERATOR = "clamp"
FAMILY = "elementwise"
LEVEL = 1
DESCRIPTION = (
    "min(max(x, min_value), max_value) elementwise on a (batch_size, dim) tensor; the bounds "
    "are inside the input's spread, so both clipped sides and the pass-through middle occur."
)

batch_size = 1024
dim = 7168
min_value = -0.5
max_value = 0.5
DTYPE = "float32"

CASES = [
    {"name": "1024x7168", "batch_size": 1024, "dim": 7168, "min_value": -0.5, "max_value": 0.5,
     "DTYPE": "float32"},
    {"name": "2560x2880", "batch_size": 2560, "dim": 2880, "min_value": -0.5, "max_value": 0.5,
     "DTYPE": "float32"},
    {"name": "1x7340033-asym", "batch_size": 1, "dim": 7340033, "min_value": -1.5, "max_value": 0.25,
     "DTYPE": "float32"},
    {"name": "1023x7177", "batch_size": 1023, "dim": 7177, "min_value": -0.5, "max_value": 0.5,
     "DTYPE": "float32"},
    {"name": "7x1048573", "batch_size": 7, "dim": 1048573, "min_value": 0.0, "max_value": 1.0,
     "DTYPE": "float32"},
    {"name": "512x7168-f64", "batch_size": 512, "dim": 7168, "min_value": -0.5, "max_value": 0.5,
     "DTYPE": "float64"},
    {"name": "257x14281-f64", "batch_size": 257, "dim": 14281, "min_value": -2.0, "max_value": 1.0,
     "DTYPE": "float64"},
    {"name": "1024x14336-bf16", "batch_size": 1024, "dim": 14336, "min_value": -0.5, "max_value": 0.5,
     "DTYPE": "bfloat16"},
    {"name": "1x14680067-bf16", "batch_size": 1, "dim": 14680067, "min_value": -1.0, "max_value": 0.75,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x9973", "batch_size": 333, "dim": 9973, "min_value": -0.3, "max_value": 0.8,
     "DTYPE": "float32"},
    {"name": "heldout-f64-3x400009", "batch_size": 3, "dim": 400009, "min_value": -0.3, "max_value": 0.8,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-1000x3001", "batch_size": 1000, "dim": 3001, "min_value": -0.3, "max_value": 0.8,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, min_value: float, max_value: float):
        super().__init__()
        self.min_value = min_value
        self.max_value = max_value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, self.min_value, self.max_value)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [min_value, max_value]
