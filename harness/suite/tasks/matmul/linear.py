"""Fully connected layer: y = x @ W.T + b with learned weight and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "linear"
FAMILY = "matmul"
LEVEL = 1
DESCRIPTION = (
    "nn.Linear forward: y = x @ W.T + b for x of shape (batch_size, in_features), "
    "W of shape (out_features, in_features) and b of shape (out_features,)."
)

batch_size = 1024
in_features = 1024
out_features = 1024
DTYPE = "float32"

CASES = [
    {"name": "1024x1024x1024", "batch_size": 1024, "in_features": 1024, "out_features": 1024, "DTYPE": "float32"},
    {"name": "1x4096x4096", "batch_size": 1, "in_features": 4096, "out_features": 4096, "DTYPE": "float32"},
    {"name": "2048x512x2048", "batch_size": 2048, "in_features": 512, "out_features": 2048, "DTYPE": "float32"},
    {"name": "257x1023x1025", "batch_size": 257, "in_features": 1023, "out_features": 1025, "DTYPE": "float32"},
    {"name": "33x4096x4097", "batch_size": 33, "in_features": 4096, "out_features": 4097, "DTYPE": "float32"},
    {"name": "8192x256x255", "batch_size": 8192, "in_features": 256, "out_features": 255, "DTYPE": "float32"},
    {"name": "512x1024x1024-f64", "batch_size": 512, "in_features": 1024, "out_features": 1024, "DTYPE": "float64"},
    {"name": "7x2049x2047-f64", "batch_size": 7, "in_features": 2049, "out_features": 2047, "DTYPE": "float64"},
    {"name": "2048x2048x2048-bf16", "batch_size": 2048, "in_features": 2048, "out_features": 2048, "DTYPE": "bfloat16"},
    {"name": "1x8192x4096-bf16", "batch_size": 1, "in_features": 8192, "out_features": 4096, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x767x513", "batch_size": 333, "in_features": 767, "out_features": 513, "DTYPE": "float32"},
    {"name": "heldout-3x2049x1531", "batch_size": 3, "in_features": 2049, "out_features": 1531, "DTYPE": "float32"},
    {"name": "heldout-f64-97x511x255", "batch_size": 97, "in_features": 511, "out_features": 255,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-129x1023x257", "batch_size": 129, "in_features": 1023, "out_features": 257,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, dtype: str):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.fc.weight, self.fc.bias)


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_features, out_features, DTYPE]
