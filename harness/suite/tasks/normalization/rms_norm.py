"""RMSNorm over the hidden dimension with a learned per-channel scale."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "rms_norm"
FAMILY = "normalization"
LEVEL = 1
DESCRIPTION = (
    "RMSNorm of a (batch_size, seq_len, hidden) tensor over its last dimension: "
    "x / sqrt(mean(x ** 2) + eps) * weight, eps = 1e-6, weight of shape (hidden,)."
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
    {"name": "3x1000x1537-bf16", "batch_size": 3, "seq_len": 1000, "hidden": 1537, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x257x1531", "batch_size": 3, "seq_len": 257, "hidden": 1531, "DTYPE": "float32"},
    {"name": "heldout-1x7x65539", "batch_size": 1, "seq_len": 7, "hidden": 65539, "DTYPE": "float32"},
    {"name": "heldout-f64-5x63x769", "batch_size": 5, "seq_len": 63, "hidden": 769, "DTYPE": "float64"},
    {"name": "heldout-bf16-2x300x1000", "batch_size": 2, "seq_len": 300, "hidden": 1000, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, hidden: int, dtype: str):
        super().__init__()
        self.eps = 1e-6
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [hidden, DTYPE]
