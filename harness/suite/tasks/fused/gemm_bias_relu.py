"""Linear layer (no bias) + separate bias + ReLU (KernelBench level 2 style: three ops to fuse)."""

import torch
import torch.nn as nn

OPERATOR = "gemm_bias_relu"
FAMILY = "fused"
LEVEL = 2
DESCRIPTION = "y = relu(x @ W.T + b): nn.Linear(in_features, out_features, bias=False), then + bias, then ReLU."
DTYPE = "float32"
batch_size = 512
in_features = 1024
out_features = 512

CASES = [
    {"name": "512x1024->512", "batch_size": 512, "in_features": 1024, "out_features": 512},
    {"name": "128x4096->1024", "batch_size": 128, "in_features": 4096, "out_features": 1024},
    {"name": "odd-257x1023->511", "batch_size": 257, "in_features": 1023, "out_features": 511},
    {"name": "odd-1000x255->1001", "batch_size": 1000, "in_features": 255, "out_features": 1001},
    {"name": "deep-64x8192->256", "batch_size": 64, "in_features": 8192, "out_features": 256},
    {"name": "wide-2048x256->256", "batch_size": 2048, "in_features": 256, "out_features": 256},
    {"name": "single-1x4096->4096", "batch_size": 1, "in_features": 4096, "out_features": 4096},
    {"name": "f64-512x512->256", "batch_size": 512, "in_features": 512, "out_features": 256, "DTYPE": "float64"},
    {"name": "f64-odd-177x1001->333", "batch_size": 177, "in_features": 1001, "out_features": 333, "DTYPE": "float64"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x767->513", "batch_size": 333, "in_features": 767, "out_features": 513,
     "DTYPE": "float32"},
    {"name": "heldout-3x2049->1531", "batch_size": 3, "in_features": 2049, "out_features": 1531,
     "DTYPE": "float32"},
    {"name": "heldout-f64-97x511->255", "batch_size": 97, "in_features": 511, "out_features": 255,
     "DTYPE": "float64"},
]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, dtype: str):
        super().__init__()
        dtype = getattr(torch, dtype)
        self.gemm = nn.Linear(in_features, out_features, bias=False, dtype=dtype)
        self.bias = nn.Parameter(torch.randn(out_features, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x + self.bias
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_features, out_features, DTYPE]
