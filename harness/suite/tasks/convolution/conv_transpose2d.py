"""Transposed 2-D convolution (upsampling), with bias."""

import torch
import torch.nn as nn

OPERATOR = "conv_transpose2d"
FAMILY = "convolution"
LEVEL = 1
DESCRIPTION = (
    "nn.ConvTranspose2d forward (square kernel, stride, padding, output_padding, with bias) of an "
    "NCHW tensor; output size (H - 1) * stride - 2 * padding + kernel_size + output_padding."
)

batch_size = 8
in_channels = 128
out_channels = 64
height = 32
width = 32
kernel_size = 4
stride = 2
padding = 1
output_padding = 0
DTYPE = "float32"

CASES = [
    {"name": "8x128x64-32-k4s2", "batch_size": 8, "in_channels": 128, "out_channels": 64, "height": 32,
     "width": 32, "kernel_size": 4, "stride": 2, "padding": 1, "output_padding": 0, "DTYPE": "float32"},
    {"name": "1x64x32-64-k3s2op1", "batch_size": 1, "in_channels": 64, "out_channels": 32, "height": 64,
     "width": 64, "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1, "DTYPE": "float32"},
    {"name": "16x64x64-28-k3s1", "batch_size": 16, "in_channels": 64, "out_channels": 64, "height": 28,
     "width": 28, "kernel_size": 3, "stride": 1, "padding": 1, "output_padding": 0, "DTYPE": "float32"},
    {"name": "4x256x128-15-k4s2", "batch_size": 4, "in_channels": 256, "out_channels": 128, "height": 15,
     "width": 15, "kernel_size": 4, "stride": 2, "padding": 1, "output_padding": 0, "DTYPE": "float32"},
    {"name": "2x33x17-63x65-k5s3", "batch_size": 2, "in_channels": 33, "out_channels": 17, "height": 63,
     "width": 65, "kernel_size": 5, "stride": 3, "padding": 2, "output_padding": 0, "DTYPE": "float32"},
    {"name": "32x16x8-31-k2s2p0", "batch_size": 32, "in_channels": 16, "out_channels": 8, "height": 31,
     "width": 31, "kernel_size": 2, "stride": 2, "padding": 0, "output_padding": 0, "DTYPE": "float32"},
    {"name": "2x64x32-32-k4s2-f64", "batch_size": 2, "in_channels": 64, "out_channels": 32, "height": 32,
     "width": 32, "kernel_size": 4, "stride": 2, "padding": 1, "output_padding": 0, "DTYPE": "float64"},
    {"name": "2x32x16-95-k3s2-f64", "batch_size": 2, "in_channels": 32, "out_channels": 16, "height": 95,
     "width": 95, "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 0, "DTYPE": "float64"},
    {"name": "8x128x64-32-k4s2-bf16", "batch_size": 8, "in_channels": 128, "out_channels": 64, "height": 32,
     "width": 32, "kernel_size": 4, "stride": 2, "padding": 1, "output_padding": 0, "DTYPE": "bfloat16"},
    {"name": "4x256x128-15-k4s2-bf16", "batch_size": 4, "in_channels": 256, "out_channels": 128,
     "height": 15, "width": 15, "kernel_size": 4, "stride": 2, "padding": 1, "output_padding": 0,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x48x24-29-k4s2", "batch_size": 3, "in_channels": 48, "out_channels": 24, "height": 29,
     "width": 29, "kernel_size": 4, "stride": 2, "padding": 1, "output_padding": 0, "DTYPE": "float32"},
    {"name": "heldout-f64-2x16x8-23-k3s2op1", "batch_size": 2, "in_channels": 16, "out_channels": 8, "height": 23,
     "width": 23, "kernel_size": 3, "stride": 2, "padding": 1, "output_padding": 1, "DTYPE": "float64"},
    {"name": "heldout-bf16-4x64x32-17-k3s1", "batch_size": 4, "in_channels": 64, "out_channels": 32, "height": 17,
     "width": 17, "kernel_size": 3, "stride": 1, "padding": 1, "output_padding": 0, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, dtype):
        super().__init__()
        self.conv = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, output_padding=output_padding
        )
        self.conv.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding, DTYPE]
