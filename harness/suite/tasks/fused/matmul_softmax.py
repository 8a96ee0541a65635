"""Scaled query-key scores followed by a row softmax (attention probabilities)."""

import math

import torch
import torch.nn as nn

OPERATOR = "matmul_softmax"
FAMILY = "fused"
LEVEL = 2
DESCRIPTION = (
    "softmax(q @ k.transpose(-2, -1) / sqrt(head_dim), dim=-1) for q of shape "
    "(batch_size, q_len, head_dim) and k of shape (batch_size, kv_len, head_dim); no mask."
)

batch_size = 8
q_len = 512
kv_len = 512
head_dim = 64
DTYPE = "float32"

CASES = [
    {"name": "8x512x512x64", "batch_size": 8, "q_len": 512, "kv_len": 512, "head_dim": 64,
     "DTYPE": "float32"},
    {"name": "1x2048x2048x128", "batch_size": 1, "q_len": 2048, "kv_len": 2048, "head_dim": 128,
     "DTYPE": "float32"},
    {"name": "16x257x255x64", "batch_size": 16, "q_len": 257, "kv_len": 255, "head_dim": 64,
     "DTYPE": "float32"},
    {"name": "32x128x1023x32", "batch_size": 32, "q_len": 128, "kv_len": 1023, "head_dim": 32,
     "DTYPE": "float32"},
    {"name": "1024x64x64x16", "batch_size": 1024, "q_len": 64, "kv_len": 64, "head_dim": 16, "DTYPE": "float32"},
    {"name": "4x1x65537x64", "batch_size": 4, "q_len": 1, "kv_len": 65537, "head_dim": 64,
     "DTYPE": "float32"},
    {"name": "4x512x512x64-f64", "batch_size": 4, "q_len": 512, "kv_len": 512, "head_dim": 64,
     "DTYPE": "float64"},
    {"name": "2x1021x1019x80-f64", "batch_size": 2, "q_len": 1021, "kv_len": 1019, "head_dim": 80,
     "DTYPE": "float64"},
    {"name": "8x512x512x64-bf16", "batch_size": 8, "q_len": 512, "kv_len": 512, "head_dim": 64,
     "DTYPE": "bfloat16"},
    {"name": "3x1000x1001x96-bf16", "batch_size": 3, "q_len": 1000, "kv_len": 1001, "head_dim": 96,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x383x511x48", "batch_size": 3, "q_len": 383, "kv_len": 511, "head_dim": 48,
     "DTYPE": "float32"},
    {"name": "heldout-1x1x4099x128", "batch_size": 1, "q_len": 1, "kv_len": 4099, "head_dim": 128,
     "DTYPE": "float32"},
    {"name": "heldout-f64-2x129x257x32", "batch_size": 2, "q_len": 129, "kv_len": 257, "head_dim": 32,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-4x255x193x80", "batch_size": 4, "q_len": 255, "kv_len": 193, "head_dim": 80,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return torch.softmax(scores, dim=-1)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [
        torch.randn(batch_size, q_len, head_dim, dtype=dtype),
        torch.randn(batch_size, kv_len, head_dim, dtype=dtype),
    ]


def get_init_inputs():
    return []
