"""Leaky ReLU with a configurable negative slope, elementwise on a 2-D tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "leaky_relu"
FAMILY = "elementwise"
LEVEL = 1
DESCRIPTION = "Leaky ReLU, x if x > 0 else negative_slope * x, elementwise on a (batch_size, dim) tensor."

batch_size = 1024
dim = 7168
negative_slope = 0.01
DTYPE = "float32"

CASES = [
    {"name": "1024x7168", "batch_size": 1024, "dim": 7168, "negative_slope": 0.01, "DTYPE": "float32"},
    {"name": "2560x2880", "batch_size": 2560, "dim": 2880, "negative_slope": 0.01, "DTYPE": "float32"},
    {"name": "1x7340033-s0.2", "batch_size": 1, "dim": 7340033, "negative_slope": 0.2, "DTYPE": "float32"},
    {"name": "1023x7177", "batch_size": 1023, "dim": 7177, "negative_slope": 0.01, "DTYPE": "float32"},
    {"name": "7x1048573-s0.1", "batch_size": 7, "dim": 1048573, "negative_slope": 0.1, "DTYPE": "float32"},
    {"name": "512x7168-f64", "batch_size": 512, "dim": 7168, "negative_slope": 0.01, "DTYPE": "float64"},
    {"name": "257x14281-f64", "batch_size": 257, "dim": 14281, "negative_slope": 0.3, "DTYPE": "float64"},
    {"name": "1024x14336-bf16", "batch_size": 1024, "dim": 14336, "negative_slope": 0.01, "DTYPE": "bfloat16"},
    {"name": "1x14680067-bf16", "batch_size": 1, "dim": 14680067, "negative_slope": 0.2, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x9973", "batch_size": 333, "dim": 9973, "negative_slope": 0.05, "DTYPE": "float32"},
    {"name": "heldout-f64-3x400009", "batch_size": 3, "dim": 400009, "negative_slope": 0.05, "DTYPE": "float64"},
    {"name": "heldout-bf16-1000x3001", "batch_size": 1000, "dim": 3001, "negative_slope": 0.05,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, dim, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [negative_slope]
