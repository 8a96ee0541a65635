"""RMSNorm followed by a SwiGLU MLP with a residual connection (LLaMA-style FFN sub-layer)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

OPERATOR = "rmsnorm_swiglu"
FAMILY = "block"
LEVEL = 3
DESCRIPTION = (
    "x + W_down @ (silu(W_gate @ h) * (W_up @ h)) with h = rms_norm(x) * g (eps 1e-6), for x of "
    "shape (batch_size, seq_len, d_model); bias-free projections d_model -> d_ff -> d_model."
)

batch_size = 4
seq_len = 128
d_model = 512
d_ff = 1376
DTYPE = "float32"

CASES = [
    {"name": "4x128x512x1376", "batch_size": 4, "seq_len": 128, "d_model": 512, "d_ff": 1376,
     "DTYPE": "float32"},
    {"name": "1x256x1024x2752", "batch_size": 1, "seq_len": 256, "d_model": 1024, "d_ff": 2752,
     "DTYPE": "float32"},
    {"name": "1x1x2048x5504", "batch_size": 1, "seq_len": 1, "d_model": 2048, "d_ff": 5504,
     "DTYPE": "float32"},
    {"name": "16x65x384x1024", "batch_size": 16, "seq_len": 65, "d_model": 384, "d_ff": 1024,
     "DTYPE": "float32"},
    {"name": "3x127x513x1367", "batch_size": 3, "seq_len": 127, "d_model": 513, "d_ff": 1367,
     "DTYPE": "float32"},
    {"name": "64x32x256x688", "batch_size": 64, "seq_len": 32, "d_model": 256, "d_ff": 688,
     "DTYPE": "float32"},
    {"name": "2x128x512x1376-f64", "batch_size": 2, "seq_len": 128, "d_model": 512, "d_ff": 1376,
     "DTYPE": "float64"},
    {"name": "1x99x257x683-f64", "batch_size": 1, "seq_len": 99, "d_model": 257, "d_ff": 683,
     "DTYPE": "float64"},
    {"name": "8x128x512x1376-bf16", "batch_size": 8, "seq_len": 128, "d_model": 512, "d_ff": 1376,
     "DTYPE": "bfloat16"},
    {"name": "5x77x769x2053-bf16", "batch_size": 5, "seq_len": 77, "d_model": 769, "d_ff": 2053,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-3x77x384x1029", "batch_size": 3, "seq_len": 77, "d_model": 384, "d_ff": 1029,
     "DTYPE": "float32"},
    {"name": "heldout-1x3x1536x4099", "batch_size": 1, "seq_len": 3, "d_model": 1536, "d_ff": 4099,
     "DTYPE": "float32"},
    {"name": "heldout-f64-2x31x192x515", "batch_size": 2, "seq_len": 31, "d_model": 192, "d_ff": 515,
     "DTYPE": "float64"},
    {"name": "heldout-bf16-2x129x320x861", "batch_size": 2, "seq_len": 129, "d_model": 320, "d_ff": 861,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, d_model, d_ff, dtype):
        super().__init__()
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(d_model))
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)
        self.to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.rms_norm(x, (x.shape[-1],), self.norm_weight, 1e-6)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model, dtype=getattr(torch, DTYPE))]


def get_init_inputs():
    return [d_model, d_ff, DTYPE]
