"""Matrix multiplication with the left operand stored transposed: C = A.T @ B."""

import torch
import torch.nn as nn

OPERATOR = "matmul_transposed_a"
FAMILY = "matmul"
LEVEL = 1
DESCRIPTION = (
    "C = A.T @ B where A is stored as a contiguous (k, m) tensor and B as (k, n); "
    "C has shape (m, n). The transpose is a view, so the kernel reads A column-wise."
)

m = 1024
k = 1024
n = 1024
DTYPE = "float32"

CASES = [
    {"name": "1024x1024x1024", "m": 1024, "k": 1024, "n": 1024, "DTYPE": "float32"},
    {"name": "4096x16x4096", "m": 4096, "k": 16, "n": 4096, "DTYPE": "float32"},
    {"name": "4096x2048x16", "m": 4096, "k": 2048, "n": 16, "DTYPE": "float32"},
    {"name": "65536x64x64", "m": 65536, "k": 64, "n": 64, "DTYPE": "float32"},
    {"name": "1023x1025x1027", "m": 1023, "k": 1025, "n": 1027, "DTYPE": "float32"},
    {"name": "1x4096x4096", "m": 1, "k": 4096, "n": 4096, "DTYPE": "float32"},
    {"name": "1024x1024x1024-f64", "m": 1024, "k": 1024, "n": 1024, "DTYPE": "float64"},
    {"name": "511x2047x257-f64", "m": 511, "k": 2047, "n": 257, "DTYPE": "float64"},
    {"name": "2048x2048x2048-bf16", "m": 2048, "k": 2048, "n": 2048, "DTYPE": "bfloat16"},
    {"name": "1023x1025x1027-bf16", "m": 1023, "k": 1025, "n": 1027, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-767x383x511", "m": 767, "k": 383, "n": 511, "DTYPE": "float32"},
    {"name": "heldout-2047x7x1023", "m": 2047, "k": 7, "n": 1023, "DTYPE": "float32"},
    {"name": "heldout-f64-255x257x129", "m": 255, "k": 257, "n": 129, "DTYPE": "float64"},
    {"name": "heldout-bf16-383x255x257", "m": 383, "k": 255, "n": 257, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a.T, b)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [torch.randn(k, m, dtype=dtype), torch.randn(k, n, dtype=dtype)]


def get_init_inputs():
    return []
