"""Batched matrix multiplication of two 3-D tensors."""

import torch
import torch.nn as nn

OPERATOR = "batched_matmul"
FAMILY = "matmul"
LEVEL = 1
DESCRIPTION = "C[b] = A[b] @ B[b] for A of shape (batch_size, m, k) and B of shape (batch_size, k, n)."

batch_size = 32
m = 256
k = 256
n = 256
DTYPE = "float32"

CASES = [
    {"name": "32x256x256x256", "batch_size": 32, "m": 256, "k": 256, "n": 256, "DTYPE": "float32"},
    {"name": "1x1024x1024x1024", "batch_size": 1, "m": 1024, "k": 1024, "n": 1024, "DTYPE": "float32"},
    {"name": "16x257x255x263", "batch_size": 16, "m": 257, "k": 255, "n": 263, "DTYPE": "float32"},
    {"name": "128x127x129x65", "batch_size": 128, "m": 127, "k": 129, "n": 65, "DTYPE": "float32"},
    {"name": "4096x32x32x32", "batch_size": 4096, "m": 32, "k": 32, "n": 32, "DTYPE": "float32"},
    {"name": "8x511x513x257", "batch_size": 8, "m": 511, "k": 513, "n": 257, "DTYPE": "float32"},
    {"name": "16x256x256x256-f64", "batch_size": 16, "m": 256, "k": 256, "n": 256, "DTYPE": "float64"},
    {"name": "16x255x257x129-f64", "batch_size": 16, "m": 255, "k": 257, "n": 129, "DTYPE": "float64"},
    {"name": "128x256x256x256-bf16", "batch_size": 128, "m": 256, "k": 256, "n": 256, "DTYPE": "bfloat16"},
    {"name": "16x511x513x257-bf16", "batch_size": 16, "m": 511, "k": 513, "n": 257, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-7x191x383x127", "batch_size": 7, "m": 191, "k": 383, "n": 127, "DTYPE": "float32"},
    {"name": "heldout-3x1x2049x511", "batch_size": 3, "m": 1, "k": 2049, "n": 511, "DTYPE": "float32"},
    {"name": "heldout-f64-5x129x65x257", "batch_size": 5, "m": 129, "k": 65, "n": 257, "DTYPE": "float64"},
    {"name": "heldout-bf16-4x255x129x193", "batch_size": 4, "m": 255, "k": 129, "n": 193, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.bmm(a, b)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [torch.randn(batch_size, m, k, dtype=dtype), torch.randn(batch_size, k, n, dtype=dtype)]


def get_init_inputs():
    return []
