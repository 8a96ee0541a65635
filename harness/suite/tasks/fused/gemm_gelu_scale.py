"""Linear layer, then GELU, then a constant scale (KernelBench level-2 style)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "gemm_gelu_scale"
FAMILY = "fused"
LEVEL = 2
DESCRIPTION = (
    "gelu(x @ W.T + b) * scale for x of shape (batch_size, in_features), an nn.Linear "
    "(in_features -> out_features) and exact (erf) GELU; scale is a constructor constant."
)

batch_size = 1024
in_features = 1024
out_features = 1024
scale = 0.5
DTYPE = "float32"

CASES = [
    {"name": "1024x1024x1024", "batch_size": 1024, "in_features": 1024, "out_features": 1024, "scale": 0.5,
     "DTYPE": "float32"},
    {"name": "1x4096x4096", "batch_size": 1, "in_features": 4096, "out_features": 4096, "scale": 2.0,
     "DTYPE": "float32"},
    {"name": "1024x512x2048", "batch_size": 1024, "in_features": 512, "out_features": 2048, "scale": 0.5,
     "DTYPE": "float32"},
    {"name": "257x1023x1025", "batch_size": 257, "in_features": 1023, "out_features": 1025, "scale": 1.5,
     "DTYPE": "float32"},
    {"name": "33x4096x4097", "batch_size": 33, "in_features": 4096, "out_features": 4097, "scale": 0.5,
     "DTYPE": "float32"},
    {"name": "8192x256x255", "batch_size": 8192, "in_features": 256, "out_features": 255, "scale": 0.25,
     "DTYPE": "float32"},
    {"name": "512x1024x1024-f64", "batch_size": 512, "in_features": 1024, "out_features": 1024, "scale": 0.5,
     "DTYPE": "float64"},
    {"name": "7x2049x2047-f64", "batch_size": 7, "in_features": 2049, "out_features": 2047, "scale": 3.0,
     "DTYPE": "float64"},
    {"name": "2048x2048x2048-bf16", "batch_size": 2048, "in_features": 2048, "out_features": 2048,
     "scale": 0.5, "DTYPE": "bfloat16"},
    {"name": "129x1023x4097-bf16", "batch_size": 129, "in_features": 1023, "out_features": 4097,
     "scale": 0.5, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-333x767x513", "batch_size": 333, "in_features": 767, "out_features": 513, "scale": 1.5,
     "DTYPE": "float32"},
    {"name": "heldout-3x2049x1531", "batch_size": 3, "in_features": 2049, "out_features": 1531, "scale": 0.25,
     "DTYPE": "float32"},
    {"name": "heldout-f64-97x511x255", "batch_size": 97, "in_features": 511, "out_features": 255, "scale": 1.5,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-129x1023x257", "batch_size": 129, "in_features": 1023, "out_features": 257, "scale": 0.5,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale, dtype):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.fc(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_features, out_features, scale, DTYPE]
