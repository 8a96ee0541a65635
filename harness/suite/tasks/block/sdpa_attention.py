"""Multi-head scaled dot-product attention core (no projections), optionally causal."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "sdpa_attention"
FAMILY = "block"
LEVEL = 3
DESCRIPTION = (
    "softmax(q @ k.T / sqrt(head_dim) [+ causal mask]) @ v per (batch, head) for q of shape "
    "(batch_size, num_heads, q_len, head_dim) and k, v of shape (batch_size, num_heads, kv_len, "
    "head_dim); causal masks key j > query i (aligned at the top-left, as PyTorch does)."
)

batch_size = 4
num_heads = 8
q_len = 512
kv_len = 512
head_dim = 64
causal = False
DTYPE = "float32"

CASES = [
    {"name": "4x8x512x512x64", "batch_size": 4, "num_heads": 8, "q_len": 512, "kv_len": 512, "head_dim": 64,
     "causal": False, "DTYPE": "float32"},
    {"name": "4x8x512x512x64-causal", "batch_size": 4, "num_heads": 8, "q_len": 512, "kv_len": 512,
     "head_dim": 64, "causal": True, "DTYPE": "float32"},
    {"name": "1x16x1024x1024x64-causal", "batch_size": 1, "num_heads": 16, "q_len": 1024, "kv_len": 1024,
     "head_dim": 64, "causal": True, "DTYPE": "float32"},
    {"name": "2x12x257x257x64", "batch_size": 2, "num_heads": 12, "q_len": 257, "kv_len": 257,
     "head_dim": 64, "causal": False, "DTYPE": "float32"},
    {"name": "8x4x127x1023x32", "batch_size": 8, "num_heads": 4, "q_len": 127, "kv_len": 1023,
     "head_dim": 32, "causal": False, "DTYPE": "float32"},
    {"name": "3x5x333x333x80-causal", "batch_size": 3, "num_heads": 5, "q_len": 333, "kv_len": 333,
     "head_dim": 80, "causal": True, "DTYPE": "float32"},
    {"name": "2x8x512x512x64-f64", "batch_size": 2, "num_heads": 8, "q_len": 512, "kv_len": 512,
     "head_dim": 64, "causal": False, "DTYPE": "float64"},
    {"name": "2x4x255x257x96-f64", "batch_size": 2, "num_heads": 4, "q_len": 255, "kv_len": 257,
     "head_dim": 96, "causal": False, "DTYPE": "float64"},
    {"name": "4x8x512x512x64-causal-bf16", "batch_size": 4, "num_heads": 8, "q_len": 512, "kv_len": 512,
     "head_dim": 64, "causal": True, "DTYPE": "bfloat16"},
    {"name": "2x12x1000x1000x64-bf16", "batch_size": 2, "num_heads": 12, "q_len": 1000, "kv_len": 1000,
     "head_dim": 64, "causal": False, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x5x383x511x48", "batch_size": 3, "num_heads": 5, "q_len": 383, "kv_len": 511, "head_dim": 48,
     "causal": False, "DTYPE": "float32"},
    {"name": "heldout-2x6x257x257x80-causal", "batch_size": 2, "num_heads": 6, "q_len": 257, "kv_len": 257,
     "head_dim": 80, "causal": True, "DTYPE": "float32"},
    {"name": "heldout-f64-1x3x129x193x32", "batch_size": 1, "num_heads": 3, "q_len": 129, "kv_len": 193,
     "head_dim": 32, "causal": False, "DTYPE": "float64"},
    {"name": "heldout-bf16-2x4x300x300x64-causal", "batch_size": 2, "num_heads": 4, "q_len": 300, "kv_len": 300,
     "head_dim": 64, "causal": True, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, causal):
        super().__init__()
        self.causal = causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [
        torch.randn(batch_size, num_heads, q_len, head_dim, dtype=dtype),
        torch.randn(batch_size, num_heads, kv_len, head_dim, dtype=dtype),
        torch.randn(batch_size, num_heads, kv_len, head_dim, dtype=dtype),
    ]


def get_init_inputs():
    return [causal]
