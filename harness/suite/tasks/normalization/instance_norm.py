"""InstanceNorm2d with affine parameters: each (sample, channel) plane normalised on its own."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "instance_norm"
FAMILY = "normalization"
LEVEL = 1
DESCRIPTION = (
    "InstanceNorm2d of an NCHW tensor: every (n, c) plane normalised by its own mean and "
    "variance (eps = 1e-5), then per-channel weight and bias; no running statistics."
)

batch_size = 8
channels = 64
height = 96
width = 96
DTYPE = "float32"

CASES = [
    {"name": "8x64x96x96", "batch_size": 8, "channels": 64, "height": 96, "width": 96, "DTYPE": "float32"},
    {"name": "32x256x28x28", "batch_size": 32, "channels": 256, "height": 28, "width": 28, "DTYPE": "float32"},
    {"name": "1x64x224x224", "batch_size": 1, "channels": 64, "height": 224, "width": 224, "DTYPE": "float32"},
    {"name": "4x3x513x513", "batch_size": 4, "channels": 3, "height": 513, "width": 513, "DTYPE": "float32"},
    {"name": "16x97x47x47", "batch_size": 16, "channels": 97, "height": 47, "width": 47, "DTYPE": "float32"},
    {"name": "64x1023x7x7", "batch_size": 64, "channels": 1023, "height": 7, "width": 7, "DTYPE": "float32"},
    {"name": "4x64x96x96-f64", "batch_size": 4, "channels": 64, "height": 96, "width": 96, "DTYPE": "float64"},
    {"name": "1x129x127x127-f64", "batch_size": 1, "channels": 129, "height": 127, "width": 127, "DTYPE": "float64"},
    {"name": "16x64x96x96-bf16", "batch_size": 16, "channels": 64, "height": 96, "width": 96, "DTYPE": "bfloat16"},
    {"name": "32x256x28x28-bf16", "batch_size": 32, "channels": 256, "height": 28, "width": 28, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x48x77x91", "batch_size": 3, "channels": 48, "height": 77, "width": 91, "DTYPE": "float32"},
    {"name": "heldout-f64-2x40x45x47", "batch_size": 2, "channels": 40, "height": 45, "width": 47,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-5x96x33x29", "batch_size": 5, "channels": 96, "height": 33, "width": 29,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, channels: int, dtype: str):
        super().__init__()
        dt = getattr(torch, dtype)
        self.eps = 1e-5
        self.weight = nn.Parameter((1.0 + 0.2 * torch.randn(channels)).to(dt))
        self.bias = nn.Parameter((0.2 * torch.randn(channels)).to(dt))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.instance_norm(x, weight=self.weight, bias=self.bias, eps=self.eps)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [channels, DTYPE]
