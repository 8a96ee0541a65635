"""BatchNorm2d in inference mode: normalise with fixed running statistics."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "batch_norm"
FAMILY = "normalization"
LEVEL = 1
DESCRIPTION = (
    "Inference BatchNorm2d of an NCHW tensor: (x - running_mean[c]) / sqrt(running_var[c] + eps) "
    "* weight[c] + bias[c], eps = 1e-5; statistics and affine parameters are fixed random buffers "
    "(never updated, whatever the module's train/eval mode)."
)

batch_size = 8
channels = 64
height = 112
width = 112
DTYPE = "float32"

CASES = [
    {"name": "8x64x112x112", "batch_size": 8, "channels": 64, "height": 112, "width": 112, "DTYPE": "float32"},
    {"name": "32x256x28x28", "batch_size": 32, "channels": 256, "height": 28, "width": 28, "DTYPE": "float32"},
    {"name": "1x64x320x320", "batch_size": 1, "channels": 64, "height": 320, "width": 320, "DTYPE": "float32"},
    {"name": "4x3x769x769", "batch_size": 4, "channels": 3, "height": 769, "width": 769, "DTYPE": "float32"},
    {"name": "16x97x67x67", "batch_size": 16, "channels": 97, "height": 67, "width": 67, "DTYPE": "float32"},
    {"name": "4x1023x41x41", "batch_size": 4, "channels": 1023, "height": 41, "width": 41, "DTYPE": "float32"},
    {"name": "4x64x112x112-f64", "batch_size": 4, "channels": 64, "height": 112, "width": 112, "DTYPE": "float64"},
    {"name": "1x129x159x159-f64", "batch_size": 1, "channels": 129, "height": 159, "width": 159, "DTYPE": "float64"},
    {"name": "16x64x112x112-bf16", "batch_size": 16, "channels": 64, "height": 112, "width": 112, "DTYPE": "bfloat16"},
    {"name": "64x256x28x28-bf16", "batch_size": 64, "channels": 256, "height": 28, "width": 28, "DTYPE": "bfloat16"},
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
        self.register_buffer("running_mean", (0.5 * torch.randn(channels)).to(dt))
        self.register_buffer("running_var", (0.5 + torch.rand(channels)).to(dt))
        self.weight = nn.Parameter((1.0 + 0.2 * torch.randn(channels)).to(dt))
        self.bias = nn.Parameter((0.2 * torch.randn(channels)).to(dt))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(
            x, self.running_mean, self.running_var, self.weight, self.bias, training=False, eps=self.eps
        )


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [channels, DTYPE]
