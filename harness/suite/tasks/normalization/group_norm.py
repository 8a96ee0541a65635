"""GroupNorm over channel groups of an NCHW tensor, with affine parameters."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "group_norm"
FAMILY = "normalization"
LEVEL = 1
DESCRIPTION = (
    "GroupNorm of an NCHW tensor: channels split into num_groups groups, each (sample, group) "
    "normalised by its own mean and variance (eps = 1e-5), then per-channel weight and bias."
)

batch_size = 8
channels = 64
num_groups = 8
height = 112
width = 112
DTYPE = "float32"

CASES = [
    {"name": "8x64x112x112-g8", "batch_size": 8, "channels": 64, "num_groups": 8, "height": 112,
     "width": 112, "DTYPE": "float32"},
    {"name": "16x256x40x40-g32", "batch_size": 16, "channels": 256, "num_groups": 32, "height": 40,
     "width": 40, "DTYPE": "float32"},
    {"name": "1x128x224x224-g32", "batch_size": 1, "channels": 128, "num_groups": 32, "height": 224,
     "width": 224, "DTYPE": "float32"},
    {"name": "4x96x131x131-g3", "batch_size": 4, "channels": 96, "num_groups": 3, "height": 131,
     "width": 131, "DTYPE": "float32"},
    {"name": "7x60x127x127-g15", "batch_size": 7, "channels": 60, "num_groups": 15, "height": 127,
     "width": 127, "DTYPE": "float32"},
    {"name": "32x32x79x79-g1", "batch_size": 32, "channels": 32, "num_groups": 1, "height": 79, "width": 79,
     "DTYPE": "float32"},
    {"name": "4x64x112x112-g8-f64", "batch_size": 4, "channels": 64, "num_groups": 8, "height": 112,
     "width": 112, "DTYPE": "float64"},
    {"name": "3x48x151x151-g16-f64", "batch_size": 3, "channels": 48, "num_groups": 16, "height": 151,
     "width": 151, "DTYPE": "float64"},
    {"name": "16x64x112x112-g8-bf16", "batch_size": 16, "channels": 64, "num_groups": 8, "height": 112,
     "width": 112, "DTYPE": "bfloat16"},
    {"name": "4x320x97x97-g32-bf16", "batch_size": 4, "channels": 320, "num_groups": 32, "height": 97,
     "width": 97, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x48x77x91-g12", "batch_size": 3, "channels": 48, "num_groups": 12, "height": 77, "width": 91,
     "DTYPE": "float32"},
    {"name": "heldout-f64-2x40x45x47-g5", "batch_size": 2, "channels": 40, "num_groups": 5, "height": 45,
     "width": 47, "DTYPE": "float64"},
    {"name": "heldout-bf16-5x96x33x29-g3", "batch_size": 5, "channels": 96, "num_groups": 3, "height": 33,
     "width": 29, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, num_groups: int, channels: int, dtype: str):
        super().__init__()
        dt = getattr(torch, dtype)
        self.num_groups = num_groups
        self.eps = 1e-5
        self.weight = nn.Parameter((1.0 + 0.2 * torch.randn(channels)).to(dt))
        self.bias = nn.Parameter((0.2 * torch.randn(channels)).to(dt))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [num_groups, channels, DTYPE]
