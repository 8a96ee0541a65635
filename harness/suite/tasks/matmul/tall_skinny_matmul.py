"""Matrix multiplication with very unequal dimensions (tall-skinny, small-k, long-k)."""

import torch
import torch.nn as nn

OPERATOR = "tall_skinny_matmul"
FAMILY = "matmul"
LEVEL = 1
DESCRIPTION = (
    "C = A @ B for A of shape (m, k) and B of shape (k, n) where the shapes are far from square: "
    "tall A with small k and n, tiny k (outer-product-like, write-bound), a long k with a "
    "tiny output (reduction-bound), or a single row (vector-matrix product)."
)

m = 65536
k = 64
n = 64
DTYPE = "float32"

CASES = [
    {"name": "65536x64x64", "m": 65536, "k": 64, "n": 64, "DTYPE": "float32"},
    {"name": "1x262143x64", "m": 1, "k": 262143, "n": 64, "DTYPE": "float32"},
    {"name": "4096x8x4096", "m": 4096, "k": 8, "n": 4096, "DTYPE": "float32"},
    {"name": "131071x127x33", "m": 131071, "k": 127, "n": 33, "DTYPE": "float32"},
    {"name": "1048575x7x7", "m": 1048575, "k": 7, "n": 7, "DTYPE": "float32"},
    {"name": "64x65536x64", "m": 64, "k": 65536, "n": 64, "DTYPE": "float32"},
    {"name": "7x1048573x9", "m": 7, "k": 1048573, "n": 9, "DTYPE": "float32"},
    {"name": "65536x64x64-f64", "m": 65536, "k": 64, "n": 64, "DTYPE": "float64"},
    {"name": "131071x127x33-bf16", "m": 131071, "k": 127, "n": 33, "DTYPE": "bfloat16"},
    {"name": "1048575x7x7-bf16", "m": 1048575, "k": 7, "n": 7, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-30001x33x31", "m": 30001, "k": 33, "n": 31, "DTYPE": "float32"},
    {"name": "heldout-3x100003x17", "m": 3, "k": 100003, "n": 17, "DTYPE": "float32"},
    {"name": "heldout-f64-8191x7x129", "m": 8191, "k": 7, "n": 129, "DTYPE": "float64"},
    {"name": "heldout-bf16-20011x63x65", "m": 20011, "k": 63, "n": 65, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)]


def get_init_inputs():
    return []
