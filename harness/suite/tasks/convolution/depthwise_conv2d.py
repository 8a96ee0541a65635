"""Depthwise 2-D convolution: one filter per channel (groups = channels), with bias."""

import torch
import torch.nn as nn

OPERATOR = "depthwise_conv2d"
FAMILY = "convolution"
LEVEL = 1
DESCRIPTION = (
    "nn.Conv2d with groups = in_channels = out_channels (MobileNet-style depthwise), square "
    "kernel, given stride and zero padding, with bias, on an NCHW tensor. float64 is left out: "
    "PyTorch's CPU depthwise path for it is a slow fallback (seconds per call)."
)

batch_size = 8
channels = 64
height = 112
width = 112
kernel_size = 3
stride = 1
padding = 1
DTYPE = "float32"

CASES = [
    {"name": "8x64x112x112-k3", "batch_size": 8, "channels": 64, "height": 112, "width": 112,
     "kernel_size": 3, "stride": 1, "padding": 1, "DTYPE": "float32"},
    {"name": "1x256x128x128-k5", "batch_size": 1, "channels": 256, "height": 128, "width": 128,
     "kernel_size": 5, "stride": 1, "padding": 2, "DTYPE": "float32"},
    {"name": "16x96x57x57-k3", "batch_size": 16, "channels": 96, "height": 57, "width": 57, "kernel_size": 3,
     "stride": 1, "padding": 1, "DTYPE": "float32"},
    {"name": "32x32x64x64-k7", "batch_size": 32, "channels": 32, "height": 64, "width": 64, "kernel_size": 7,
     "stride": 1, "padding": 3, "DTYPE": "float32"},
    {"name": "8x144x113x111-k3s2", "batch_size": 8, "channels": 144, "height": 113, "width": 111,
     "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "2x1023x31x33-k3", "batch_size": 2, "channels": 1023, "height": 31, "width": 33,
     "kernel_size": 3, "stride": 1, "padding": 1, "DTYPE": "float32"},
    {"name": "8x960x14x14-k5", "batch_size": 8, "channels": 960, "height": 14, "width": 14, "kernel_size": 5,
     "stride": 1, "padding": 2, "DTYPE": "float32"},
    {"name": "8x64x112x112-k3-bf16", "batch_size": 8, "channels": 64, "height": 112, "width": 112,
     "kernel_size": 3, "stride": 1, "padding": 1, "DTYPE": "bfloat16"},
    {"name": "1x256x127x127-k5-bf16", "batch_size": 1, "channels": 256, "height": 127, "width": 127,
     "kernel_size": 5, "stride": 1, "padding": 2, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x48x77x91-k3", "batch_size": 3, "channels": 48, "height": 77, "width": 91, "kernel_size": 3,
     "stride": 1, "padding": 1, "DTYPE": "float32"},
    {"name": "heldout-2x40x45x47-k5s2", "batch_size": 2, "channels": 40, "height": 45, "width": 47,
     "kernel_size": 5, "stride": 2, "padding": 2, "DTYPE": "float32"},
    {"name": "heldout-bf16-5x96x33x29-k3", "batch_size": 5, "channels": 96, "height": 33, "width": 29,
     "kernel_size": 3, "stride": 1, "padding": 0, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, channels, kernel_size, stride, padding, dtype):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, stride=stride, padding=padding, groups=channels)
        self.conv.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [channels, kernel_size, stride, padding, DTYPE]
