"""Residual add followed by LayerNorm ("add & norm" of a transformer sub-layer)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "residual_layer_norm"
FAMILY = "fused"
LEVEL = 2
DESCRIPTION = (
    "layer_norm(x + residual) over the last dimension (eps = 1e-5) with learned weight and bias of "
    "shape (hidden,), for x and residual of shape (batch_size, seq_len, hidden)."
)

batch_size = 8
seq_len = 512
hidden = 1024
DTYPE = "float32"

CASES = [
    {"name": "8x512x1024", "batch_size": 8, "seq_len": 512, "hidden": 1024, "DTYPE": "float32"},
    {"name": "1x1024x4096", "batch_size": 1, "seq_len": 1024, "hidden": 4096, "DTYPE": "float32"},
    {"name": "64x128x768", "batch_size": 64, "seq_len": 128, "hidden": 768, "DTYPE": "float32"},
    {"name": "4x1021x1023", "batch_size": 4, "seq_len": 1021, "hidden": 1023, "DTYPE": "float32"},
    {"name": "32x129x1025", "batch_size": 32, "seq_len": 129, "hidden": 1025, "DTYPE": "float32"},
    {"name": "2048x1x2049", "batch_size": 2048, "seq_len": 1, "hidden": 2049, "DTYPE": "float32"},
    {"name": "4x512x1024-f64", "batch_size": 4, "seq_len": 512, "hidden": 1024, "DTYPE": "float64"},
    {"name": "3x509x1021-f64", "batch_size": 3, "seq_len": 509, "hidden": 1021, "DTYPE": "float64"},
    {"name": "8x512x1024-bf16", "batch_size": 8, "seq_len": 512, "hidden": 1024, "DTYPE": "bfloat16"},
    {"name": "7x1000x1537-bf16", "batch_size": 7, "seq_len": 1000, "hidden": 1537, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x257x1531", "batch_size": 3, "seq_len": 257, "hidden": 1531, "DTYPE": "float32"},
    {"name": "heldout-1x7x65539", "batch_size": 1, "seq_len": 7, "hidden": 65539, "DTYPE": "float32"},
    {"name": "heldout-f64-5x63x769", "batch_size": 5, "seq_len": 63, "hidden": 769, "DTYPE": "float64"},
    {"name": "heldout-bf16-2x300x1000", "batch_size": 2, "seq_len": 300, "hidden": 1000, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, hidden, dtype):
        super().__init__()
        dt = getattr(torch, dtype)
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(dt))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden)).to(dt))

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x + residual, (x.shape[-1],), self.weight, self.bias, eps=1e-5)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [
        torch.randn(batch_size, seq_len, hidden, dtype=dtype),
        torch.randn(batch_size, seq_len, hidden, dtype=dtype),
    ]


def get_init_inputs():
    return [hidden, DTYPE]
