"""Index of the maximum of a 3-D tensor over one dimension."""

import torch
import torch.nn as nn

OPERATOR = "argmax_dim"
FAMILY = "reduction"
LEVEL = 1
DESCRIPTION = (
    "argmax of a (batch_size, dim1, dim2) tensor over dimension reduce_dim, as int64 indices "
    "with that dimension dropped; on ties any maximal index is right (the harness checks the "
    "input values the indices point at; with continuous random inputs ties are practically absent)."
)

batch_size = 64
dim1 = 256
dim2 = 256
reduce_dim = 1
DTYPE = "float32"
# The output holds indices into input 0 along reduce_dim: checked by the values they point at, so a tie
# broken another way passes and an index that does not point at a maximum fails (harness.index_check).
INDEX_OUTPUTS = [{"output": 0, "input": 0, "dim": "reduce_dim"}]

CASES = [
    {"name": "64x256x256-d1", "batch_size": 64, "dim1": 256, "dim2": 256, "reduce_dim": 1, "DTYPE": "float32"},
    {"name": "64x256x256-d2", "batch_size": 64, "dim1": 256, "dim2": 256, "reduce_dim": 2, "DTYPE": "float32"},
    {"name": "8x512x512-d0", "batch_size": 8, "dim1": 512, "dim2": 512, "reduce_dim": 0, "DTYPE": "float32"},
    {"name": "1x2048x2048-d2", "batch_size": 1, "dim1": 2048, "dim2": 2048, "reduce_dim": 2, "DTYPE": "float32"},
    {"name": "61x257x255-d2", "batch_size": 61, "dim1": 257, "dim2": 255, "reduce_dim": 2, "DTYPE": "float32"},
    {"name": "31x1023x127-d1", "batch_size": 31, "dim1": 1023, "dim2": 127, "reduce_dim": 1, "DTYPE": "float32"},
    {"name": "32x256x257-d1-f64", "batch_size": 32, "dim1": 256, "dim2": 257, "reduce_dim": 1, "DTYPE": "float64"},
    {"name": "16x255x1023-d2-f64", "batch_size": 16, "dim1": 255, "dim2": 1023, "reduce_dim": 2, "DTYPE": "float64"},
    {"name": "3x4093x509-d1", "batch_size": 3, "dim1": 4093, "dim2": 509, "reduce_dim": 1, "DTYPE": "float32"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-37x511x263-d1", "batch_size": 37, "dim1": 511, "dim2": 263, "reduce_dim": 1,
     "DTYPE": "float32"},
    {"name": "heldout-129x65x1021-d2", "batch_size": 129, "dim1": 65, "dim2": 1021, "reduce_dim": 2,
     "DTYPE": "float32"},
    {"name": "heldout-f64-97x127x255-d0", "batch_size": 97, "dim1": 127, "dim2": 255, "reduce_dim": 0,
     "DTYPE": "float64"},
]


class Model(nn.Module):
    def __init__(self, reduce_dim: int):
        super().__init__()
        self.reduce_dim = reduce_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(x, dim=self.reduce_dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [reduce_dim]
