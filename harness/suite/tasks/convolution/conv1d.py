"""1-D convolution over a (batch, channels, length) signal, with bias."""

import torch
import torch.nn as nn

OPERATOR = "conv1d"
FAMILY = "convolution"
LEVEL = 1
DESCRIPTION = (
    "nn.Conv1d forward (cross-correlation, dilation 1, groups 1, with bias) of a "
    "(batch_size, in_channels, length) tensor with a given kernel_size, stride and zero padding."
)

batch_size = 8
in_channels = 64
out_channels = 128
length = 2048
kernel_size = 3
stride = 1
padding = 1
DTYPE = "float32"

CASES = [
    {"name": "8x64x128-L2048-k3", "batch_size": 8, "in_channels": 64, "out_channels": 128, "length": 2048,
     "kernel_size": 3, "stride": 1, "padding": 1, "DTYPE": "float32"},
    {"name": "1x256x256-L8192-k5", "batch_size": 1, "in_channels": 256, "out_channels": 256, "length": 8192,
     "kernel_size": 5, "stride": 1, "padding": 2, "DTYPE": "float32"},
    {"name": "32x3x64-L8191-k7s2", "batch_size": 32, "in_channels": 3, "out_channels": 64, "length": 8191,
     "kernel_size": 7, "stride": 2, "padding": 3, "DTYPE": "float32"},
    {"name": "8x127x129-L2047-k3p0", "batch_size": 8, "in_channels": 127, "out_channels": 129,
     "length": 2047, "kernel_size": 3, "stride": 1, "padding": 0, "DTYPE": "float32"},
    {"name": "4x512x512-L1023-k1", "batch_size": 4, "in_channels": 512, "out_channels": 512, "length": 1023,
     "kernel_size": 1, "stride": 1, "padding": 0, "DTYPE": "float32"},
    {"name": "64x32x32-L1025-k9", "batch_size": 64, "in_channels": 32, "out_channels": 32, "length": 1025,
     "kernel_size": 9, "stride": 1, "padding": 4, "DTYPE": "float32"},
    {"name": "4x64x128-L2048-k3-f64", "batch_size": 4, "in_channels": 64, "out_channels": 128,
     "length": 2048, "kernel_size": 3, "stride": 1, "padding": 1, "DTYPE": "float64"},
    {"name": "4x33x65-L8191-k5s3-f64", "batch_size": 4, "in_channels": 33, "out_channels": 65,
     "length": 8191, "kernel_size": 5, "stride": 3, "padding": 2, "DTYPE": "float64"},
    {"name": "8x64x128-L2048-k3-bf16", "batch_size": 8, "in_channels": 64, "out_channels": 128,
     "length": 2048, "kernel_size": 3, "stride": 1, "padding": 1, "DTYPE": "bfloat16"},
    {"name": "1x129x127-L8191-k7-bf16", "batch_size": 1, "in_channels": 129, "out_channels": 127,
     "length": 8191, "kernel_size": 7, "stride": 1, "padding": 3, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x29x61-L3001-k5", "batch_size": 3, "in_channels": 29, "out_channels": 61, "length": 3001,
     "kernel_size": 5, "stride": 1, "padding": 2, "DTYPE": "float32"},
    {"name": "heldout-f64-2x16x33-L1023-k3s2", "batch_size": 2, "in_channels": 16, "out_channels": 33,
     "length": 1023, "kernel_size": 3, "stride": 2, "padding": 0, "DTYPE": "float64"},
    {"name": "heldout-bf16-4x64x48-L777-k7", "batch_size": 4, "in_channels": 64, "out_channels": 48, "length": 777,
     "kernel_size": 7, "stride": 1, "padding": 3, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dtype):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.conv.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, DTYPE]
