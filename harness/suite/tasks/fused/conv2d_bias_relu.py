"""Convolution, then a per-channel bias add, then ReLU (KernelBench level-2 style)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "conv2d_bias_relu"
FAMILY = "fused"
LEVEL = 2
DESCRIPTION = (
    "relu(conv2d(x, W) + bias) on an NCHW tensor: a bias-free square-kernel convolution "
    "(stride 1, 'same' zero padding), a separately learned per-channel bias of shape "
    "(out_channels, 1, 1), then ReLU. Fusing the epilogue into the convolution is the point."
)

batch_size = 8
in_channels = 64
out_channels = 64
height = 56
width = 56
kernel_size = 3
DTYPE = "float32"

CASES = [
    {"name": "8x64x64-56-k3", "batch_size": 8, "in_channels": 64, "out_channels": 64, "height": 56,
     "width": 56, "kernel_size": 3, "DTYPE": "float32"},
    {"name": "1x3x32-224-k3", "batch_size": 1, "in_channels": 3, "out_channels": 32, "height": 224,
     "width": 224, "kernel_size": 3, "DTYPE": "float32"},
    {"name": "8x128x128-28-k3", "batch_size": 8, "in_channels": 128, "out_channels": 128, "height": 28,
     "width": 28, "kernel_size": 3, "DTYPE": "float32"},
    {"name": "4x33x65-127x129-k3", "batch_size": 4, "in_channels": 33, "out_channels": 65, "height": 127,
     "width": 129, "kernel_size": 3, "DTYPE": "float32"},
    {"name": "16x16x32-63-k5", "batch_size": 16, "in_channels": 16, "out_channels": 32, "height": 63,
     "width": 63, "kernel_size": 5, "DTYPE": "float32"},
    {"name": "8x256x255-28-k1", "batch_size": 8, "in_channels": 256, "out_channels": 255, "height": 28,
     "width": 28, "kernel_size": 1, "DTYPE": "float32"},
    {"name": "4x64x64-56-k3-f64", "batch_size": 4, "in_channels": 64, "out_channels": 64, "height": 56,
     "width": 56, "kernel_size": 3, "DTYPE": "float64"},
    {"name": "2x31x17-65x63-k5-f64", "batch_size": 2, "in_channels": 31, "out_channels": 17, "height": 65,
     "width": 63, "kernel_size": 5, "DTYPE": "float64"},
    {"name": "16x64x64-56-k3-bf16", "batch_size": 16, "in_channels": 64, "out_channels": 64, "height": 56,
     "width": 56, "kernel_size": 3, "DTYPE": "bfloat16"},
    {"name": "4x33x65-127x129-k3-bf16", "batch_size": 4, "in_channels": 33, "out_channels": 65,
     "height": 127, "width": 129, "kernel_size": 3, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x24x40-45-k3", "batch_size": 3, "in_channels": 24, "out_channels": 40, "height": 45,
     "width": 47, "kernel_size": 3, "DTYPE": "float32"},
    {"name": "heldout-f64-1x8x16-33-k5", "batch_size": 1, "in_channels": 8, "out_channels": 16, "height": 33,
     "width": 31, "kernel_size": 5, "DTYPE": "float64"},
    {"name": "heldout-bf16-2x32x48-29-k3", "batch_size": 2, "in_channels": 32, "out_channels": 48, "height": 29,
     "width": 27, "kernel_size": 3, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dtype):
        super().__init__()
        dt = getattr(torch, dtype)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False).to(dt)
        self.bias = nn.Parameter((0.1 * torch.randn(out_channels, 1, 1)).to(dt))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, DTYPE]
