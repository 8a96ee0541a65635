"""2-D average pooling over square windows."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "avg_pool2d"
FAMILY = "convolution"
LEVEL = 1
DESCRIPTION = (
    "Average pooling of an NCHW tensor with a square window (kernel_size), stride and zero "
    "padding; padded zeros count in the divisor (count_include_pad=True), floor output size."
)

batch_size = 16
channels = 64
height = 112
width = 112
kernel_size = 3
stride = 2
padding = 1
DTYPE = "float32"

CASES = [
    {"name": "16x64x112x112-k3s2", "batch_size": 16, "channels": 64, "height": 112, "width": 112,
     "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "1x64x224x224-k3s2", "batch_size": 1, "channels": 64, "height": 224, "width": 224,
     "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "16x96x57x57-k3s2", "batch_size": 16, "channels": 96, "height": 57, "width": 57,
     "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "32x32x64x64-k2s2", "batch_size": 32, "channels": 32, "height": 64, "width": 64,
     "kernel_size": 2, "stride": 2, "padding": 0, "DTYPE": "float32"},
    {"name": "4x3x513x511-k5s1", "batch_size": 4, "channels": 3, "height": 513, "width": 511,
     "kernel_size": 5, "stride": 1, "padding": 2, "DTYPE": "float32"},
    {"name": "256x1024x7x7-k7s1p0", "batch_size": 256, "channels": 1024, "height": 7, "width": 7,
     "kernel_size": 7, "stride": 1, "padding": 0, "DTYPE": "float32"},
    {"name": "8x64x112x112-k3s2-f64", "batch_size": 8, "channels": 64, "height": 112, "width": 112,
     "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float64"},
    {"name": "16x64x112x112-k3s2-bf16", "batch_size": 16, "channels": 64, "height": 112, "width": 112,
     "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "bfloat16"},
    {"name": "7x33x127x129-k2s2-bf16", "batch_size": 7, "channels": 33, "height": 127, "width": 129,
     "kernel_size": 2, "stride": 2, "padding": 0, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x48x77x91-k3s2", "batch_size": 3, "channels": 48, "height": 77, "width": 91,
     "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "heldout-f64-2x40x45x47-k5s3", "batch_size": 2, "channels": 40, "height": 45, "width": 47,
     "kernel_size": 5, "stride": 3, "padding": 2, "DTYPE": "float64"},
    {"name": "heldout-bf16-5x96x33x29-k2s1", "batch_size": 5, "channels": 96, "height": 33, "width": 29,
     "kernel_size": 2, "stride": 1, "padding": 0, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, kernel_size, stride, padding):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [kernel_size, stride, padding]
