"""Pre-norm transformer MLP block: x + fc2(gelu(fc1(layer_norm(x)))) (level 3 style)."""

import torch
import torch.nn as nn

OPERATOR = "mlp_block"
FAMILY = "block"
LEVEL = 3
DESCRIPTION = ("Pre-norm transformer MLP: y = x + fc2(gelu(fc1(ln(x)))) on (batch, tokens, dim); "
               "LayerNorm(dim), Linear(dim, hidden), exact (erf) GELU, Linear(hidden, dim); float32 and float64.")
DTYPE = "float32"
batch_size = 2
tokens = 128
dim = 256
hidden = 1024

CASES = [
    {"name": "2x128-d256-h1024", "batch_size": 2, "tokens": 128, "dim": 256, "hidden": 1024},
    {"name": "1x512-d384-h1536", "batch_size": 1, "tokens": 512, "dim": 384, "hidden": 1536},
    {"name": "odd-3x77-d320-h1000", "batch_size": 3, "tokens": 77, "dim": 320, "hidden": 1000},
    {"name": "decode-8x1-d1024-h4096", "batch_size": 8, "tokens": 1, "dim": 1024, "hidden": 4096},
    {"name": "narrow-4x250-d96-h384", "batch_size": 4, "tokens": 250, "dim": 96, "hidden": 384},
    {"name": "wide-1x128-d768-h3072", "batch_size": 1, "tokens": 128, "dim": 768, "hidden": 3072},
    {"name": "odd-10x65-d129-h515", "batch_size": 10, "tokens": 65, "dim": 129, "hidden": 515},
    {"name": "f64-4x64-d128-h512", "batch_size": 4, "tokens": 64, "dim": 128, "hidden": 512, "DTYPE": "float64"},
    {"name": "f64-odd-1x199-d200-h333", "batch_size": 1, "tokens": 199, "dim": 200, "hidden": 333, "DTYPE": "float64"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x91-d447-h1789", "batch_size": 3, "tokens": 91, "dim": 447, "hidden": 1789,
     "DTYPE": "float32"},
    {"name": "heldout-5x1-d1531-h2049", "batch_size": 5, "tokens": 1, "dim": 1531, "hidden": 2049,
     "DTYPE": "float32"},
    {"name": "heldout-f64-2x33-d161-h643", "batch_size": 2, "tokens": 33, "dim": 161, "hidden": 643,
     "DTYPE": "float64"},
]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int, dtype: str):
        super().__init__()
        dtype = getattr(torch, dtype)
        self.norm = nn.LayerNorm(dim, dtype=dtype)
        self.fc1 = nn.Linear(dim, hidden, dtype=dtype)
        self.fc2 = nn.Linear(hidden, dim, dtype=dtype)
        with torch.no_grad():
            self.norm.weight.normal_(1.0, 0.3)
            self.norm.bias.normal_(0.0, 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc1(self.norm(x))
        h = torch.nn.functional.gelu(h)
        return x + self.fc2(h)


def get_inputs():
    return [torch.randn(batch_size, tokens, dim, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [dim, hidden, DTYPE]
