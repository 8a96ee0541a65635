"""One time step of a GRU cell: new hidden state from input and previous hidden state."""

import torch
import torch.nn as nn

OPERATOR = "gru_cell"
FAMILY = "block"
LEVEL = 3
DESCRIPTION = (
    "nn.GRUCell step: r = sigmoid(W_ir x + b_ir + W_hr h + b_hr), z = sigmoid(W_iz x + b_iz + W_hz h "
    "+ b_hz), n = tanh(W_in x + b_in + r * (W_hn h + b_hn)), h' = (1 - z) * n + z * h; output of "
    "shape (batch_size, hidden_size)."
)

batch_size = 64
input_size = 1024
hidden_size = 1024
DTYPE = "float32"

CASES = [
    {"name": "64x1024x1024", "batch_size": 64, "input_size": 1024, "hidden_size": 1024, "DTYPE": "float32"},
    {"name": "1x2048x2048", "batch_size": 1, "input_size": 2048, "hidden_size": 2048, "DTYPE": "float32"},
    {"name": "256x512x512", "batch_size": 256, "input_size": 512, "hidden_size": 512, "DTYPE": "float32"},
    {"name": "33x1023x1025", "batch_size": 33, "input_size": 1023, "hidden_size": 1025, "DTYPE": "float32"},
    {"name": "512x257x255", "batch_size": 512, "input_size": 257, "hidden_size": 255, "DTYPE": "float32"},
    {"name": "7x2048x2047", "batch_size": 7, "input_size": 2048, "hidden_size": 2047, "DTYPE": "float32"},
    {"name": "64x1024x1024-f64", "batch_size": 64, "input_size": 1024, "hidden_size": 1024,
     "DTYPE": "float64"},
    {"name": "17x511x767-f64", "batch_size": 17, "input_size": 511, "hidden_size": 767, "DTYPE": "float64"},
    {"name": "128x1024x1024-bf16", "batch_size": 128, "input_size": 1024, "hidden_size": 1024,
     "DTYPE": "bfloat16"},
    {"name": "1x2047x2049-bf16", "batch_size": 1, "input_size": 2047, "hidden_size": 2049,
     "DTYPE": "bfloat16"},
]

# Held-out cases: only the final evaluation runs them; no prompt, template or proposer sees them.
HELDOUT_CASES = [
    {"name": "heldout-37x767x1531", "batch_size": 37, "input_size": 767, "hidden_size": 1531, "DTYPE": "float32"},
    {"name": "heldout-3x3001x511", "batch_size": 3, "input_size": 3001, "hidden_size": 511, "DTYPE": "float32"},
    {"name": "heldout-f64-9x383x257", "batch_size": 9, "input_size": 383, "hidden_size": 257, "DTYPE": "float64"},
    {"name": "heldout-bf16-65x1023x767", "batch_size": 65, "input_size": 1023, "hidden_size": 767,
     "DTYPE": "bfloat16"},
]


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, dtype):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden_size).to(getattr(torch, dtype))

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return self.cell(x, h)


def get_inputs():
    dtype = getattr(torch, DTYPE)
    return [torch.randn(batch_size, input_size, dtype=dtype), torch.randn(batch_size, hidden_size, dtype=dtype)]


def get_init_inputs():
    return [input_size, hidden_size, DTYPE]
