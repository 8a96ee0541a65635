"""2-D convolution with bias, NCHW (KernelBench level 1 style)."""

import torch
import torch.nn as nn

OPERATOR = "conv2d"
FAMILY = "convolution"
LEVEL = 1
DESCRIPTION = ("nn.Conv2d(in_channels, out_channels, kernel, stride, padding, bias=True) on an NCHW input; "
               "square kernels, stride 1 or 2, zero padding; float32 and float64.")
DTYPE = "float32"
batch_size = 8
in_channels = 16
out_channels = 32
height = 64
width = 64
kernel = 3
stride = 1
padding = 1

CASES = [
    {"name": "8x16->32-64x64-k3", "batch_size": 8, "in_channels": 16, "out_channels": 32, "height": 64, "width": 64,
     "kernel": 3, "stride": 1, "padding": 1},
    {"name": "stem-4x3->64-128x128-k7s2", "batch_size": 4, "in_channels": 3, "out_channels": 64, "height": 128, "width": 128,
     "kernel": 7, "stride": 2, "padding": 3},
    {"name": "nopad-4x32->32-57x61-k3", "batch_size": 4, "in_channels": 32, "out_channels": 32, "height": 57, "width": 61,
     "kernel": 3, "stride": 1, "padding": 0},
    {"name": "k5-8x16->16-65x67", "batch_size": 8, "in_channels": 16, "out_channels": 16, "height": 65, "width": 67,
     "kernel": 5, "stride": 1, "padding": 2},
    {"name": "pointwise-4x64->64-56x56-k1", "batch_size": 4, "in_channels": 64, "out_channels": 64, "height": 56, "width": 56,
     "kernel": 1, "stride": 1, "padding": 0},
    {"name": "s2-8x32->48-80x81-k3", "batch_size": 8, "in_channels": 32, "out_channels": 48, "height": 80, "width": 81,
     "kernel": 3, "stride": 2, "padding": 1},
    {"name": "one-channel-2x1->8-255x257-k3", "batch_size": 2, "in_channels": 1, "out_channels": 8, "height": 255, "width": 257,
     "kernel": 3, "stride": 1, "padding": 1},
    {"name": "f64-4x16->16-63x61-k3s2", "batch_size": 4, "in_channels": 16, "out_channels": 16, "height": 63, "width": 61,
     "kernel": 3, "stride": 2, "padding": 1, "DTYPE": "float64"},
    {"name": "f64-2x16->16-96x96-k3", "batch_size": 2, "in_channels": 16, "out_channels": 16, "height": 96, "width": 96,
     "kernel": 3, "stride": 1, "padding": 1, "DTYPE": "float64"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x13->29-61x67-k3", "batch_size": 3, "in_channels": 13, "out_channels": 29, "height": 61,
     "width": 67, "kernel": 3, "stride": 1, "padding": 1, "DTYPE": "float32"},
    {"name": "heldout-2x24->40-45x47-k5s2", "batch_size": 2, "in_channels": 24, "out_channels": 40, "height": 45,
     "width": 47, "kernel": 5, "stride": 2, "padding": 2, "DTYPE": "float32"},
    {"name": "heldout-f64-1x8->12-33x31-k3", "batch_size": 1, "in_channels": 8, "out_channels": 12, "height": 33,
     "width": 31, "kernel": 3, "stride": 1, "padding": 0, "DTYPE": "float64"},
]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, padding: int, dtype: str):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=padding, bias=True,
                              dtype=getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_channels, out_channels, kernel, stride, padding, DTYPE]
