"""Dense matrix multiplication C = A @ B (KernelBench level 1 style)."""

import torch
import torch.nn as nn

OPERATOR = "matmul"
FAMILY = "matmul"
LEVEL = 1
DESCRIPTION = "C = A @ B with A (M, K) and B (K, N), both row-major; float32 and float64."
DTYPE = "float32"
M = 512
K = 512
N = 512

CASES = [
    {"name": "512x512x512", "M": 512, "K": 512, "N": 512},
    {"name": "1024x1024x1024", "M": 1024, "K": 1024, "N": 1024},
    {"name": "odd-511x1023x257", "M": 511, "K": 1023, "N": 257},
    {"name": "odd-1000x999x1001", "M": 1000, "K": 999, "N": 1001},
    {"name": "tall-8192x64x512", "M": 8192, "K": 64, "N": 512},
    {"name": "deep-128x8192x128", "M": 128, "K": 8192, "N": 128},
    {"name": "gemv-1x4096x4096", "M": 1, "K": 4096, "N": 4096},
    {"name": "f64-512x512x512", "M": 512, "K": 512, "N": 512, "DTYPE": "float64"},
    {"name": "f64-odd-300x701x499", "M": 300, "K": 701, "N": 499, "DTYPE": "float64"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-383x767x191", "M": 383, "K": 767, "N": 191, "DTYPE": "float32"},
    {"name": "heldout-2049x33x1025", "M": 2049, "K": 33, "N": 1025, "DTYPE": "float32"},
    {"name": "heldout-f64-257x129x383", "M": 257, "K": 129, "N": 383, "DTYPE": "float64"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [torch.randn(M, K, dtype=dtype), torch.randn(K, N, dtype=dtype)]


def get_init_inputs():
    return []
