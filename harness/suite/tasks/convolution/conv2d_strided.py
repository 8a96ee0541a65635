"""2-D convolution with stride > 1 (downsampling), zero padding and bias."""

import torch
import torch.nn as nn

OPERATOR = "conv2d_strided"
FAMILY = "convolution"
LEVEL = 1
DESCRIPTION = (
    "nn.Conv2d forward with a square kernel, stride >= 2 and zero padding, with bias, on an NCHW "
    "tensor: downsampling convolutions, stems and non-overlapping patch embeddings (kernel = stride)."
)

batch_size = 16
in_channels = 64
out_channels = 128
height = 56
width = 56
kernel_size = 3
stride = 2
padding = 1
DTYPE = "float32"

CASES = [
    {"name": "16x64x128-56-k3s2", "batch_size": 16, "in_channels": 64, "out_channels": 128, "height": 56,
     "width": 56, "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "1x3x64-448-k7s2", "batch_size": 1, "in_channels": 3, "out_channels": 64, "height": 448,
     "width": 448, "kernel_size": 7, "stride": 2, "padding": 3, "DTYPE": "float32"},
    {"name": "8x128x128-57-k3s2", "batch_size": 8, "in_channels": 128, "out_channels": 128, "height": 57,
     "width": 57, "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "4x256x512-28-k3s2", "batch_size": 4, "in_channels": 256, "out_channels": 512, "height": 28,
     "width": 28, "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "16x3x96-224-k16s16", "batch_size": 16, "in_channels": 3, "out_channels": 96, "height": 224,
     "width": 224, "kernel_size": 16, "stride": 16, "padding": 0, "DTYPE": "float32"},
    {"name": "4x33x65-127x129-k5s3", "batch_size": 4, "in_channels": 33, "out_channels": 65, "height": 127,
     "width": 129, "kernel_size": 5, "stride": 3, "padding": 2, "DTYPE": "float32"},
    {"name": "4x64x128-56-k3s2-f64", "batch_size": 4, "in_channels": 64, "out_channels": 128, "height": 56,
     "width": 56, "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float64"},
    {"name": "1x3x64-224-k7s2-f64", "batch_size": 1, "in_channels": 3, "out_channels": 64, "height": 224,
     "width": 224, "kernel_size": 7, "stride": 2, "padding": 3, "DTYPE": "float64"},
    {"name": "16x64x128-56-k3s2-bf16", "batch_size": 16, "in_channels": 64, "out_channels": 128,
     "height": 56, "width": 56, "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "bfloat16"},
    {"name": "8x127x129-57-k3s2-bf16", "batch_size": 8, "in_channels": 127, "out_channels": 129,
     "height": 57, "width": 57, "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x40x72-45-k3s2", "batch_size": 3, "in_channels": 40, "out_channels": 72, "height": 45,
     "width": 45, "kernel_size": 3, "stride": 2, "padding": 1, "DTYPE": "float32"},
    {"name": "heldout-f64-2x16x24-39-k5s3", "batch_size": 2, "in_channels": 16, "out_channels": 24, "height": 39,
     "width": 39, "kernel_size": 5, "stride": 3, "padding": 2, "DTYPE": "float64"},
    {"name": "heldout-bf16-4x32x48-63-k3s2", "batch_size": 4, "in_channels": 32, "out_channels": 48, "height": 63,
     "width": 63, "kernel_size": 3, "stride": 2, "padding": 0, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dtype):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.conv.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, DTYPE]
