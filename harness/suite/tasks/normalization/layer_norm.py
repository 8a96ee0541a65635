"""LayerNorm over the last dimension with a learned (randomised) scale and shift."""

import torch
import torch.nn as nn

OPERATOR = "layer_norm"
FAMILY = "normalization"
LEVEL = 1
DESCRIPTION = ("nn.LayerNorm(hidden, eps) over the last dimension of a (batch, tokens, hidden) tensor; "
               "weight and bias are random, not 1 and 0; float32 and float64.")
DTYPE = "float32"
batch_size = 32
tokens = 256
hidden = 1024
EPS = 1e-5

CASES = [
    {"name": "32x256x1024", "batch_size": 32, "tokens": 256, "hidden": 1024},
    {"name": "16x512x768", "batch_size": 16, "tokens": 512, "hidden": 768},
    {"name": "odd-11x333x1023", "batch_size": 11, "tokens": 333, "hidden": 1023},
    {"name": "narrow-256x257x65", "batch_size": 256, "tokens": 257, "hidden": 65},
    {"name": "wide-8x7x65537", "batch_size": 8, "tokens": 7, "hidden": 65537},
    {"name": "eps1e-3-16x100x4095", "batch_size": 16, "tokens": 100, "hidden": 4095, "EPS": 1e-3},
    {"name": "f64-16x128x1024", "batch_size": 16, "tokens": 128, "hidden": 1024, "DTYPE": "float64"},
    {"name": "f64-odd-10x77x2049", "batch_size": 10, "tokens": 77, "hidden": 2049, "DTYPE": "float64"},
    {"name": "offset-32x64x2048", "batch_size": 32, "tokens": 64, "hidden": 2048, "OFFSET": 100.0},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-7x129x1531", "batch_size": 7, "tokens": 129, "hidden": 1531, "DTYPE": "float32"},
    {"name": "heldout-3x5x100003", "batch_size": 3, "tokens": 5, "hidden": 100003, "DTYPE": "float32"},
    {"name": "heldout-f64-9x61x769", "batch_size": 9, "tokens": 61, "hidden": 769, "DTYPE": "float64"},
]
OFFSET = 0.0  # inputs are randn + OFFSET: a large mean breaks one-pass E[x^2]-E[x]^2 variance


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float, dtype: str):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps, dtype=getattr(torch, dtype))
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.5)
            self.norm.bias.normal_(0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, tokens, hidden, dtype=getattr(torch, DTYPE)) + OFFSET]


def get_init_inputs():
    return [hidden, EPS, DTYPE]
