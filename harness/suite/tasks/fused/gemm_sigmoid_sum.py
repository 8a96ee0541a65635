"""Linear layer, then sigmoid, then a sum over the features (KernelBench level-2 style)."""

import torch
import torch.nn as nn

OPERATOR = "gemm_sigmoid_sum"
FAMILY = "fused"
LEVEL = 2
DESCRIPTION = (
    "sum(sigmoid(x @ W.T + b), dim=1, keepdim=True) for x of shape (batch_size, in_features) and "
    "an nn.Linear (in_features -> out_features); the output has shape (batch_size, 1), so the "
    "(batch_size, out_features) intermediate need never be written to memory."
)

batch_size = 1024
in_features = 1024
out_features = 1024
DTYPE = "float32"

CASES = [
    {"name": "1024x1024x1024", "batch_size": 1024, "in_features": 1024, "out_features": 1024,
     "DTYPE": "float32"},
    {"name": "1x4096x4096", "batch_size": 1, "in_features": 4096, "out_features": 4096, "DTYPE": "float32"},
    {"name": "4096x512x512", "batch_size": 4096, "in_features": 512, "out_features": 512, "DTYPE": "float32"},
    {"name": "257x1023x1025", "batch_size": 257, "in_features": 1023, "out_features": 1025,
     "DTYPE": "float32"},
    {"name": "33x4096x4097", "batch_size": 33, "in_features": 4096, "out_features": 4097, "DTYPE": "float32"},
    {"name": "16384x64x255", "batch_size": 16384, "in_features": 64, "out_features": 255, "DTYPE": "float32"},
    {"name": "512x1024x1024-f64", "batch_size": 512, "in_features": 1024, "out_features": 1024,
     "DTYPE": "float64"},
    {"name": "7x2049x2047-f64", "batch_size": 7, "in_features": 2049, "out_features": 2047,
     "DTYPE": "float64"},
    {"name": "2048x2048x2048-bf16", "batch_size": 2048, "in_features": 2048, "out_features": 2048,
     "DTYPE": "bfloat16"},
    {"name": "1x8191x4097-bf16", "batch_size": 1, "in_features": 8191, "out_features": 4097,
     "DTYPE": "bfloat16"},
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
    def __init__(self, in_features, out_features, dtype):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc(x)).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_features, out_features, DTYPE]
