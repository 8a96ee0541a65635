"""Matmul family in Triton: matmul, batched_matmul, matmul_transposed_a and linear on one tiled kernel.

Every operator is ``C[b] = A[b] @ B[b] (+ bias)`` with the layouts as strides
(``_matmul.py``). Knobs: the C tile and K step, the program grouping, warps
and software-pipelining stages.
"""

from __future__ import annotations

from harness.suite.templates.triton import _matmul
from harness.suite.templates.triton._triton import NUM_STAGES, NUM_WARPS, candidate

FAMILY = "matmul"
TARGET = "triton"
OPERATORS = ["matmul", "batched_matmul", "matmul_transposed_a", "linear"]
KNOBS = [_matmul.TILES, _matmul.GROUP_M, NUM_WARPS, NUM_STAGES]

_PLAIN = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
"""
MODELS = {
    "matmul": _PLAIN
    + """
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        (m, k), n = a.shape, b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        _launch(a, b, None, c, 1, m, n, k, (0, k, 1), (0, n, 1), (0, n, 1), 0)
        return c
""",
    "batched_matmul": _PLAIN
    + """
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        (batch, m, k), n = a.shape, b.shape[2]
        c = torch.empty(batch, m, n, dtype=a.dtype, device=a.device)
        _launch(a, b, None, c, batch, m, n, k, (m * k, k, 1), (k * n, n, 1), (m * n, n, 1), 0)
        return c
""",
    "matmul_transposed_a": _PLAIN
    + """
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        (k, m), n = a.shape, b.shape[1]   # A is stored (k, m): element (i, kk) of A.T is a[kk * m + i]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        _launch(a, b, None, c, 1, m, n, k, (0, 1, m), (0, n, 1), (0, n, 1), 0)
        return c
""",
    "linear": """
class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, dtype):
        super().__init__()
        # The reference's module, so the harness copies its parameters in by name.
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))

    def forward(self, x):
        x = x.contiguous()
        w = self.fc.weight.detach().contiguous()   # (out, in): B[k, j] = w[j * in + k]
        bias = self.fc.bias.detach().contiguous()
        (m, k), n = x.shape, w.shape[0]
        y = torch.empty(m, n, dtype=x.dtype, device=x.device)
        _launch(x, w, bias, y, 1, m, n, k, (0, k, 1), (0, 1, k), (0, n, 1), 1)
        return y
""",
}


def render(operator: str, settings: dict) -> str:
    summary = (
        f"C = A @ B{' + bias' if operator == 'linear' else ''} on a tiled Triton kernel: {settings['tiles']} tiles, "
        f"GROUP_M={settings['GROUP_M']}, {settings['num_warps']} warps, {settings['num_stages']} stages."
    )
    kernels = _matmul.settings_code(settings) + _matmul.KERNEL
    return candidate("matmul", operator, settings, summary, kernels, MODELS[operator])
