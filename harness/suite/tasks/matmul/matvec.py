"""Matrix-vector product (GEMV), memory-bound."""

import torch
import torch.nn as nn

OPERATOR = "matvec"
FAMILY = "matmul"
LEVEL = 1
DESCRIPTION = "y = A @ x for a matrix A of shape (m, k) and a vector x of shape (k,); y has shape (m,)."

m = 4096
k = 4096
DTYPE = "float32"

CASES = [
    {"name": "4096x4096", "m": 4096, "k": 4096, "DTYPE": "float32"},
    {"name": "2048x8192", "m": 2048, "k": 8192, "DTYPE": "float32"},
    {"name": "1x8388608", "m": 1, "k": 8388608, "DTYPE": "float32"},
    {"name": "1048575x7", "m": 1048575, "k": 7, "DTYPE": "float32"},
    {"name": "4097x4095", "m": 4097, "k": 4095, "DTYPE": "float32"},
    {"name": "16381x1021", "m": 16381, "k": 1021, "DTYPE": "float32"},
    {"name": "2896x2896-f64", "m": 2896, "k": 2896, "DTYPE": "float64"},
    {"name": "2047x4099-f64", "m": 2047, "k": 4099, "DTYPE": "float64"},
    {"name": "8192x4096-bf16", "m": 8192, "k": 4096, "DTYPE": "bfloat16"},
    {"name": "4093x8191-bf16", "m": 4093, "k": 8191, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3001x2999", "m": 3001, "k": 2999, "DTYPE": "float32"},
    {"name": "heldout-7x1000003", "m": 7, "k": 1000003, "DTYPE": "float32"},
    {"name": "heldout-f64-1025x2047", "m": 1025, "k": 2047, "DTYPE": "float64"},
    {"name": "heldout-bf16-2047x1023", "m": 2047, "k": 1023, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.mv(a, x)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [torch.randn(m, k, dtype=dtype), torch.randn(k, dtype=dtype)]


def get_init_inputs():
    return []
