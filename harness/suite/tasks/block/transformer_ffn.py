"""Pre-LayerNorm transformer feed-forward sub-layer with its residual connection."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "transformer_ffn"
FAMILY = "block"
LEVEL = 3
DESCRIPTION = (
    "x + W2 @ gelu(W1 @ layer_norm(x) + b1) + b2 for x of shape (batch_size, seq_len, d_model): "
    "LayerNorm (eps 1e-5, affine), Linear d_model -> d_ff, exact GELU, Linear d_ff -> d_model, "
    "residual add."
)

batch_size = 4
seq_len = 128
d_model = 512
d_ff = 2048
DTYPE = "float32"

CASES = [
    {"name": "4x128x512x2048", "batch_size": 4, "seq_len": 128, "d_model": 512, "d_ff": 2048,
     "DTYPE": "float32"},
    {"name": "1x256x1024x4096", "batch_size": 1, "seq_len": 256, "d_model": 1024, "d_ff": 4096,
     "DTYPE": "float32"},
    {"name": "1x1x2048x8192", "batch_size": 1, "seq_len": 1, "d_model": 2048, "d_ff": 8192,
     "DTYPE": "float32"},
    {"name": "16x65x384x1536", "batch_size": 16, "seq_len": 65, "d_model": 384, "d_ff": 1536,
     "DTYPE": "float32"},
    {"name": "3x127x513x2051", "batch_size": 3, "seq_len": 127, "d_model": 513, "d_ff": 2051,
     "DTYPE": "float32"},
    {"name": "64x32x256x1024", "batch_size": 64, "seq_len": 32, "d_model": 256, "d_ff": 1024,
     "DTYPE": "float32"},
    {"name": "2x128x512x2048-f64", "batch_size": 2, "seq_len": 128, "d_model": 512, "d_ff": 2048,
     "DTYPE": "float64"},
    {"name": "1x99x257x1031-f64", "batch_size": 1, "seq_len": 99, "d_model": 257, "d_ff": 1031,
     "DTYPE": "float64"},
    {"name": "8x128x512x2048-bf16", "batch_size": 8, "seq_len": 128, "d_model": 512, "d_ff": 2048,
     "DTYPE": "bfloat16"},
    {"name": "5x77x769x3079-bf16", "batch_size": 5, "seq_len": 77, "d_model": 769, "d_ff": 3079,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x77x384x1531", "batch_size": 3, "seq_len": 77, "d_model": 384, "d_ff": 1531,
     "DTYPE": "float32"},
    {"name": "heldout-1x3x1536x6143", "batch_size": 1, "seq_len": 3, "d_model": 1536, "d_ff": 6143,
     "DTYPE": "float32"},
    {"name": "heldout-f64-2x31x192x767", "batch_size": 2, "seq_len": 31, "d_model": 192, "d_ff": 767,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-2x129x320x1283", "batch_size": 2, "seq_len": 129, "d_model": 320, "d_ff": 1283,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, d_model, d_ff, dtype):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        with torch.no_grad():  # non-trivial affine parameters
            self.norm.weight.add_(0.1 * torch.randn(d_model))
            self.norm.bias.add_(0.1 * torch.randn(d_model))
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [d_model, d_ff, DTYPE]
