"""Numerically stable log-sum-exp of a 2-D tensor over its rows."""

import torch
import torch.nn as nn

OPERATOR = "logsumexp"
FAMILY = "reduction"
LEVEL = 1
DESCRIPTION = (
    "log(sum(exp(x))) over the last dimension of a (batch_size, dim) tensor, computed stably; "
    "inputs are scaled by 10 so a naive exp would overflow in float32 for some rows."
)

batch_size = 1024
dim = 4096
DTYPE = "float32"

CASES = [
    {"name": "1024x4096", "batch_size": 1024, "dim": 4096, "DTYPE": "float32"},
    {"name": "64x65536", "batch_size": 64, "dim": 65536, "DTYPE": "float32"},
    {"name": "1x4194305", "batch_size": 1, "dim": 4194305, "DTYPE": "float32"},
    {"name": "1023x4097", "batch_size": 1023, "dim": 4097, "DTYPE": "float32"},
    {"name": "16385x257", "batch_size": 16385, "dim": 257, "DTYPE": "float32"},
    {"name": "131071x7", "batch_size": 131071, "dim": 7, "DTYPE": "float32"},
    {"name": "512x4096-f64", "batch_size": 512, "dim": 4096, "DTYPE": "float64"},
    {"name": "257x8191-f64", "batch_size": 257, "dim": 8191, "DTYPE": "float64"},
    {"name": "1024x4096-bf16", "batch_size": 1024, "dim": 4096, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-777x2999", "batch_size": 777, "dim": 2999, "DTYPE": "float32"},
    {"name": "heldout-5x300007", "batch_size": 5, "dim": 300007, "DTYPE": "float32"},
    {"name": "heldout-f64-129x8191", "batch_size": 129, "dim": 8191, "DTYPE": "float64"},
    {"name": "heldout-bf16-1023x1025", "batch_size": 1023, "dim": 1025, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=-1)


def get_inputs():
    return [10.0 * torch.randn(batch_size, dim, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return []
