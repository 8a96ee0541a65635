"""Scaled addition of two tensors, out = x + alpha * y (axpy)."""

import torch
import torch.nn as nn

OPERATOR = "add_scaled"
FAMILY = "elementwise"
LEVEL = 1
DESCRIPTION = "out = x + alpha * y for two (batch_size, dim) tensors (BLAS axpy, out of place)."

batch_size = 1024
dim = 7168
alpha = 0.5
DTYPE = "float32"

CASES = [
    {"name": "1024x7168", "batch_size": 1024, "dim": 7168, "alpha": 0.5, "DTYPE": "float32"},
    {"name": "2560x2880", "batch_size": 2560, "dim": 2880, "alpha": 0.5, "DTYPE": "float32"},
    {"name": "1x7340033", "batch_size": 1, "dim": 7340033, "alpha": -1.25, "DTYPE": "float32"},
    {"name": "1023x7177", "batch_size": 1023, "dim": 7177, "alpha": 0.5, "DTYPE": "float32"},
    {"name": "7x1048573", "batch_size": 7, "dim": 1048573, "alpha": 3.0, "DTYPE": "float32"},
    {"name": "512x7168-f64", "batch_size": 512, "dim": 7168, "alpha": 0.5, "DTYPE": "float64"},
    {"name": "257x14281-f64", "batch_size": 257, "dim": 14281, "alpha": -0.75, "DTYPE": "float64"},
    {"name": "1024x14336-bf16", "batch_size": 1024, "dim": 14336, "alpha": 0.5, "DTYPE": "bfloat16"},
    {"name": "1x14680067-bf16", "batch_size": 1, "dim": 14680067, "alpha": 2.0, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x9973", "batch_size": 333, "dim": 9973, "alpha": 0.75, "DTYPE": "float32"},
    {"name": "heldout-f64-3x400009", "batch_size": 3, "dim": 400009, "alpha": 0.75, "DTYPE": "float64"},
    {"name": "heldout-bf16-1000x3001", "batch_size": 1000, "dim": 3001, "alpha": 0.75, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.add(x, y, alpha=self.alpha)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [torch.randn(batch_size, dim, dtype=dtype), torch.randn(batch_size, dim, dtype=dtype)]


def get_init_inputs():
    return [alpha]
