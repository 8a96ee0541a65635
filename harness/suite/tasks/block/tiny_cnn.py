"""A small image classifier (inference): three conv-BN-ReLU stages, pooling and a linear head."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "tiny_cnn"
FAMILY = "block"
LEVEL = 4
DESCRIPTION = (
    "Logits of shape (batch_size, num_classes) for images (batch_size, 3, height, width): three stages "
    "of bias-free 3x3 conv (padding 1) + inference batch norm (fixed random statistics) + ReLU with "
    "widths width, 2*width, 4*width, a 2x2 max pool after the first two stages, global average "
    "pooling and a Linear classifier."
)

batch_size = 16
height = 64
width = 64
base_width = 32
num_classes = 10
DTYPE = "float32"

CASES = [
    {"name": "16x64x64-w32", "batch_size": 16, "height": 64, "width": 64, "base_width": 32,
     "num_classes": 10, "DTYPE": "float32"},
    {"name": "1x224x224-w32", "batch_size": 1, "height": 224, "width": 224, "base_width": 32,
     "num_classes": 1000, "DTYPE": "float32"},
    {"name": "64x32x32-w32", "batch_size": 64, "height": 32, "width": 32, "base_width": 32,
     "num_classes": 10, "DTYPE": "float32"},
    {"name": "8x65x63-w24", "batch_size": 8, "height": 65, "width": 63, "base_width": 24, "num_classes": 7,
     "DTYPE": "float32"},
    {"name": "4x97x129-w48", "batch_size": 4, "height": 97, "width": 129, "base_width": 48,
     "num_classes": 100, "DTYPE": "float32"},
    {"name": "32x28x28-w16", "batch_size": 32, "height": 28, "width": 28, "base_width": 16,
     "num_classes": 10, "DTYPE": "float32"},
    {"name": "4x64x64-w32-f64", "batch_size": 4, "height": 64, "width": 64, "base_width": 32,
     "num_classes": 10, "DTYPE": "float64"},
    {"name": "2x57x59-w16-f64", "batch_size": 2, "height": 57, "width": 59, "base_width": 16,
     "num_classes": 11, "DTYPE": "float64"},
    {"name": "16x64x64-w32-bf16", "batch_size": 16, "height": 64, "width": 64, "base_width": 32,
     "num_classes": 10, "DTYPE": "bfloat16"},
    {"name": "3x127x131-w40-bf16", "batch_size": 3, "height": 127, "width": 131, "base_width": 40,
     "num_classes": 37, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-5x77x91-w24", "batch_size": 5, "height": 77, "width": 91, "base_width": 24, "num_classes": 13,
     "DTYPE": "float32"},
    {"name": "heldout-f64-1x45x47-w8", "batch_size": 1, "height": 45, "width": 47, "base_width": 8,
     "num_classes": 7, "DTYPE": "float64"},
    {"name": "heldout-bf16-3x65x63-w16", "batch_size": 3, "height": 65, "width": 63, "base_width": 16,
     "num_classes": 29, "DTYPE": "bfloat16"},
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
    def __init__(self, base_width, num_classes, dtype):
        super().__init__()
        widths = [3, base_width, 2 * base_width, 4 * base_width]
        self.convs = nn.ModuleList(nn.Conv2d(a, b, 3, padding=1, bias=False) for a, b in zip(widths, widths[1:]))
        self.norms = nn.ModuleList(FrozenBatchNorm2d(b) for b in widths[1:])
        self.head = nn.Linear(widths[-1], num_classes)
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            x = F.relu(norm(conv(x)))
            if i < 2:
                x = F.max_pool2d(x, 2)
        return self.head(x.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(batch_size, 3, height, width, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [base_width, num_classes, DTYPE]
