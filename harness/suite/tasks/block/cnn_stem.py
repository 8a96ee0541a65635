"""ResNet-style CNN stem (inference): 7x7/2 convolution, batch norm, ReLU, 3x3/2 max pool."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "cnn_stem"
FAMILY = "block"
LEVEL = 3
DESCRIPTION = (
    "maxpool3x3/2(relu(bn(conv7x7/2(x)))) with padding 3 and 1, mapping an (N, in_channels, H, W) "
    "image batch to (N, out_channels, ~H/4, ~W/4); bias-free conv, inference batch norm with fixed "
    "random statistics."
)

batch_size = 4
in_channels = 3
out_channels = 64
height = 224
width = 224
DTYPE = "float32"

CASES = [
    {"name": "4x3x64-224", "batch_size": 4, "in_channels": 3, "out_channels": 64, "height": 224,
     "width": 224, "DTYPE": "float32"},
    {"name": "1x3x64-384", "batch_size": 1, "in_channels": 3, "out_channels": 64, "height": 384,
     "width": 384, "DTYPE": "float32"},
    {"name": "16x3x32-128", "batch_size": 16, "in_channels": 3, "out_channels": 32, "height": 128,
     "width": 128, "DTYPE": "float32"},
    {"name": "2x3x64-225x301", "batch_size": 2, "in_channels": 3, "out_channels": 64, "height": 225,
     "width": 301, "DTYPE": "float32"},
    {"name": "2x1x48-193", "batch_size": 2, "in_channels": 1, "out_channels": 48, "height": 193,
     "width": 193, "DTYPE": "float32"},
    {"name": "2x4x96-159x161", "batch_size": 2, "in_channels": 4, "out_channels": 96, "height": 159,
     "width": 161, "DTYPE": "float32"},
    {"name": "1x3x64-224-f64", "batch_size": 1, "in_channels": 3, "out_channels": 64, "height": 224,
     "width": 224, "DTYPE": "float64"},
    {"name": "1x3x33-149x151-f64", "batch_size": 1, "in_channels": 3, "out_channels": 33, "height": 149,
     "width": 151, "DTYPE": "float64"},
    {"name": "4x3x64-224-bf16", "batch_size": 4, "in_channels": 3, "out_channels": 64, "height": 224,
     "width": 224, "DTYPE": "bfloat16"},
    {"name": "1x3x64-333x257-bf16", "batch_size": 1, "in_channels": 3, "out_channels": 64, "height": 333,
     "width": 257, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-2x3x48-161x173", "batch_size": 2, "in_channels": 3, "out_channels": 48, "height": 161,
     "width": 173, "DTYPE": "float32"},
    {"name": "heldout-f64-1x3x24-97x101", "batch_size": 1, "in_channels": 3, "out_channels": 24, "height": 97,
     "width": 101, "DTYPE": "float64"},
    {"name": "heldout-bf16-3x3x40-129x131", "batch_size": 3, "in_channels": 3, "out_channels": 40, "height": 129,
     "width": 131, "DTYPE": "bfloat16"},
]


class FrozenBatchNorm2d(nn.Module):
    """Batch norm with fixed random statistics; inference semantics in train and eval mode alike."""

    def __init__(self, channels):
        super().__init__()
        self.register_buffer("mean", 0.1 * torch.randn(channels))
        self.register_buffer("var", 0.5 + torch.rand(channels))
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))

    def forward(self, x):
        return F.batch_norm(x, self.mean, self.var, self.weight, self.bias, training=False, eps=1e-5)


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, dtype):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 7, stride=2, padding=3, bias=False)
        self.bn = FrozenBatchNorm2d(out_channels)
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(F.relu(self.bn(self.conv(x))), 3, stride=2, padding=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [in_channels, out_channels, DTYPE]
