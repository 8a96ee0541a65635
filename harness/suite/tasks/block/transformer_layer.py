"""A tiny pre-LayerNorm decoder layer: causal multi-head self-attention and a GELU MLP, each residual."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "transformer_layer"
FAMILY = "block"
LEVEL = 4
DESCRIPTION = (
    "GPT-2-style block on x of shape (batch_size, seq_len, d_model): x = x + attn(ln1(x)) with "
    "causal multi-head self-attention (fused QKV Linear, output Linear), then x = x + "
    "fc2(gelu(fc1(ln2(x)))) with d_ff = 4 * d_model; LayerNorm eps 1e-5, exact GELU."
)

batch_size = 2
seq_len = 256
d_model = 512
num_heads = 8
DTYPE = "float32"

CASES = [
    {"name": "2x256x512h8", "batch_size": 2, "seq_len": 256, "d_model": 512, "num_heads": 8,
     "DTYPE": "float32"},
    {"name": "1x512x512h8", "batch_size": 1, "seq_len": 512, "d_model": 512, "num_heads": 8,
     "DTYPE": "float32"},
    {"name": "1x128x1024h16", "batch_size": 1, "seq_len": 128, "d_model": 1024, "num_heads": 16,
     "DTYPE": "float32"},
    {"name": "16x64x256h4", "batch_size": 16, "seq_len": 64, "d_model": 256, "num_heads": 4,
     "DTYPE": "float32"},
    {"name": "3x333x384h6", "batch_size": 3, "seq_len": 333, "d_model": 384, "num_heads": 6,
     "DTYPE": "float32"},
    {"name": "2x257x640h10", "batch_size": 2, "seq_len": 257, "d_model": 640, "num_heads": 10,
     "DTYPE": "float32"},
    {"name": "1x256x512h8-f64", "batch_size": 1, "seq_len": 256, "d_model": 512, "num_heads": 8,
     "DTYPE": "float64"},
    {"name": "1x129x320h5-f64", "batch_size": 1, "seq_len": 129, "d_model": 320, "num_heads": 5,
     "DTYPE": "float64"},
    {"name": "4x256x512h8-bf16", "batch_size": 4, "seq_len": 256, "d_model": 512, "num_heads": 8,
     "DTYPE": "bfloat16"},
    {"name": "2x511x768h12-bf16", "batch_size": 2, "seq_len": 511, "d_model": 768, "num_heads": 12,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x191x480h10", "batch_size": 3, "seq_len": 191, "d_model": 480, "num_heads": 10,
     "DTYPE": "float32"},
    {"name": "heldout-f64-1x65x192h3", "batch_size": 1, "seq_len": 65, "d_model": 192, "num_heads": 3,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-2x257x448h7", "batch_size": 2, "seq_len": 257, "d_model": 448, "num_heads": 7,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, d_model, num_heads, dtype):
        super().__init__()
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)
        with torch.no_grad():  # non-trivial LayerNorm affine parameters
            for ln in (self.ln1, self.ln2):
                ln.weight.add_(0.1 * torch.randn(d_model))
                ln.bias.add_(0.1 * torch.randn(d_model))
        self.to(getattr(torch, dtype))

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [d_model, num_heads, DTYPE]
