"""ResNet basic block (inference): two 3x3 conv + batch-norm layers and an identity shortcut."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "residual_conv_block"
FAMILY = "block"
LEVEL = 3
DESCRIPTION = (
    "relu(bn2(conv2(relu(bn1(conv1(x))))) + x) on an NCHW tensor with channels in = out: bias-free "
    "3x3 convolutions (stride 1, padding 1) and inference batch norm with fixed random statistics."
)

batch_size = 8
channels = 64
height = 56
width = 56
DTYPE = "float32"

CASES = [
    {"name": "8x64x56x56", "batch_size": 8, "channels": 64, "height": 56, "width": 56, "DTYPE": "float32"},
    {"name": "1x64x112x112", "batch_size": 1, "channels": 64, "height": 112, "width": 112,
     "DTYPE": "float32"},
    {"name": "8x128x28x28", "batch_size": 8, "channels": 128, "height": 28, "width": 28, "DTYPE": "float32"},
    {"name": "4x256x14x14", "batch_size": 4, "channels": 256, "height": 14, "width": 14, "DTYPE": "float32"},
    {"name": "2x48x63x65", "batch_size": 2, "channels": 48, "height": 63, "width": 65, "DTYPE": "float32"},
    {"name": "16x33x31x31", "batch_size": 16, "channels": 33, "height": 31, "width": 31, "DTYPE": "float32"},
    {"name": "2x64x56x56-f64", "batch_size": 2, "channels": 64, "height": 56, "width": 56,
     "DTYPE": "float64"},
    {"name": "1x31x57x55-f64", "batch_size": 1, "channels": 31, "height": 57, "width": 55,
     "DTYPE": "float64"},
    {"name": "8x64x56x56-bf16", "batch_size": 8, "channels": 64, "height": 56, "width": 56,
     "DTYPE": "bfloat16"},
    {"name": "4x127x29x27-bf16", "batch_size": 4, "channels": 127, "height": 29, "width": 27,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x48x77x91", "batch_size": 3, "channels": 48, "height": 77, "width": 91, "DTYPE": "float32"},
    {"name": "heldout-f64-2x40x45x47", "batch_size": 2, "channels": 40, "height": 45, "width": 47,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-5x96x33x29", "batch_size": 5, "channels": 96, "height": 33, "width": 29,
     "DTYPE": "bfloat16"},
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
    def __init__(self, channels, dtype):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = FrozenBatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = FrozenBatchNorm2d(channels)
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [channels, DTYPE]
