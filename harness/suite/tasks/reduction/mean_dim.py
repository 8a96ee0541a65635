"""Mean of a 3-D tensor over one dimension."""

import torch
import torch.nn as nn

OPERATOR = "mean_dim"
FAMILY = "reduction"
LEVEL = 1
DESCRIPTION = (
    "Arithmetic mean of a (batch_size, dim1, dim2) tensor over dimension reduce_dim "
    "(0, 1 or 2), dropping that dimension."
)

batch_size = 128
dim1 = 256
dim2 = 512
reduce_dim = 1
DTYPE = "float32"

CASES = [
    {"name": "128x256x512-d1", "batch_size": 128, "dim1": 256, "dim2": 512, "reduce_dim": 1, "DTYPE": "float32"},
    {"name": "128x256x512-d2", "batch_size": 128, "dim1": 256, "dim2": 512, "reduce_dim": 2, "DTYPE": "float32"},
    {"name": "16x1024x1024-d0", "batch_size": 16, "dim1": 1024, "dim2": 1024, "reduce_dim": 0, "DTYPE": "float32"},
    {"name": "1x4096x4096-d1", "batch_size": 1, "dim1": 4096, "dim2": 4096, "reduce_dim": 1, "DTYPE": "float32"},
    {"name": "127x257x509-d2", "batch_size": 127, "dim1": 257, "dim2": 509, "reduce_dim": 2, "DTYPE": "float32"},
    {"name": "63x1023x255-d1", "batch_size": 63, "dim1": 1023, "dim2": 255, "reduce_dim": 1, "DTYPE": "float32"},
    {"name": "96x256x257-d1-f64", "batch_size": 96, "dim1": 256, "dim2": 257, "reduce_dim": 1, "DTYPE": "float64"},
    {"name": "32x255x1023-d2-f64", "batch_size": 32, "dim1": 255, "dim2": 1023, "reduce_dim": 2, "DTYPE": "float64"},
    {"name": "128x256x512-d2-bf16", "batch_size": 128, "dim1": 256, "dim2": 512, "reduce_dim": 2, "DTYPE": "bfloat16"},
    {"name": "7x1021x1023-d1-bf16", "batch_size": 7, "dim1": 1021, "dim2": 1023, "reduce_dim": 1, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-37x511x263-d1", "batch_size": 37, "dim1": 511, "dim2": 263, "reduce_dim": 1,
     "DTYPE": "float32"},
    {"name": "heldout-129x65x1021-d2", "batch_size": 129, "dim1": 65, "dim2": 1021, "reduce_dim": 2,
     "DTYPE": "float32"},
    {"name": "heldout-f64-97x127x255-d0", "batch_size": 97, "dim1": 127, "dim2": 255, "reduce_dim": 0,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-33x1025x129-d1", "batch_size": 33, "dim1": 1025, "dim2": 129, "reduce_dim": 1,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.reduce_dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [reduce_dim]
