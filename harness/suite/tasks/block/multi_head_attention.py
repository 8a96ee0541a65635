"""Multi-head self-attention with fused QKV input projection and output projection."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "multi_head_attention"
FAMILY = "block"
LEVEL = 4
DESCRIPTION = (
    "Self-attention over x of shape (batch_size, seq_len, d_model): q, k, v = split(x @ W_qkv.T "
    "+ b_qkv) into num_heads heads of d_model / num_heads, scaled dot-product attention (causal "
    "or not), heads merged, then the output Linear d_model -> d_model."
)

batch_size = 4
seq_len = 256
d_model = 512
num_heads = 8
causal = True
DTYPE = "float32"

CASES = [
    {"name": "4x256x512h8-causal", "batch_size": 4, "seq_len": 256, "d_model": 512, "num_heads": 8,
     "causal": True, "DTYPE": "float32"},
    {"name": "4x256x512h8", "batch_size": 4, "seq_len": 256, "d_model": 512, "num_heads": 8, "causal": False,
     "DTYPE": "float32"},
    {"name": "1x512x768h12-causal", "batch_size": 1, "seq_len": 512, "d_model": 768, "num_heads": 12,
     "causal": True, "DTYPE": "float32"},
    {"name": "16x64x256h4", "batch_size": 16, "seq_len": 64, "d_model": 256, "num_heads": 4, "causal": False,
     "DTYPE": "float32"},
    {"name": "3x333x480h5-causal", "batch_size": 3, "seq_len": 333, "d_model": 480, "num_heads": 5,
     "causal": True, "DTYPE": "float32"},
    {"name": "2x257x1024h16", "batch_size": 2, "seq_len": 257, "d_model": 1024, "num_heads": 16,
     "causal": False, "DTYPE": "float32"},
    {"name": "2x256x512h8-causal-f64", "batch_size": 2, "seq_len": 256, "d_model": 512, "num_heads": 8,
     "causal": True, "DTYPE": "float64"},
    {"name": "1x129x384h6-f64", "batch_size": 1, "seq_len": 129, "d_model": 384, "num_heads": 6,
     "causal": False, "DTYPE": "float64"},
    {"name": "4x256x512h8-causal-bf16", "batch_size": 4, "seq_len": 256, "d_model": 512, "num_heads": 8,
     "causal": True, "DTYPE": "bfloat16"},
    {"name": "2x511x768h12-bf16", "batch_size": 2, "seq_len": 511, "d_model": 768, "num_heads": 12,
     "causal": False, "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x191x480h10", "batch_size": 3, "seq_len": 191, "d_model": 480, "num_heads": 10,
     "causal": False, "DTYPE": "float32"},
    {"name": "heldout-2x257x448h7-causal", "batch_size": 2, "seq_len": 257, "d_model": 448, "num_heads": 7,
     "causal": True, "DTYPE": "float32"},
    {"name": "heldout-f64-1x65x192h3", "batch_size": 1, "seq_len": 65, "d_model": 192, "num_heads": 3,
     "causal": True, "DTYPE": "float64"},
    {"name": "heldout-bf16-2x300x320h5", "batch_size": 2, "seq_len": 300, "d_model": 320, "num_heads": 5,
     "causal": False, "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, d_model, num_heads, causal, dtype):
        super().__init__()
        self.num_heads = num_heads
        self.causal = causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [d_model, num_heads, causal, DTYPE]
