"""Row softmax and log-softmax in Triton: one program per row, the row walked in blocks of ``BLOCK``.

``algorithm``: 'online' reads the row twice (a running max and a rescaled
running sum per lane, then the output pass); 'three_pass' reads it three
times (max, sum of exponentials, output), the textbook order. Statistics are
kept in float32 (float64 for float64 inputs).
"""

from __future__ import annotations

from harness.suite.templates.triton._triton import NUM_WARPS, candidate

FAMILY = "normalization"
TARGET = "triton"
OPERATORS = ["softmax", "log_softmax"]
KNOBS = [
    {
        "name": "BLOCK",
        "values": [1024, 256, 4096],
        "default": 1024,
        "layer": "tiling",
        "doc": "row elements per loop step",
    },
    NUM_WARPS,
    {
        "name": "algorithm",
        "values": ["online", "three_pass"],
        "default": "online",
        "layer": "algorithm",
        "doc": "'online': running max and rescaled sum in one read, then the output; 'three_pass': max, sum, output",
    },
]

_STATS = {
    "online": """
    m = tl.full((BLOCK,), float("-inf"), COMPUTE)
    s = tl.zeros((BLOCK,), COMPUTE)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row + cols, mask=cols < n, other=float("-inf")).to(COMPUTE)
        m_new = tl.maximum(m, x)
        live = m_new != float("-inf")                      # lanes that have seen a value
        s = tl.where(live, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
        m = m_new
    mx = tl.max(m, axis=0)
    total = tl.sum(tl.where(m != float("-inf"), s * tl.exp(m - mx), 0.0), axis=0)
""",
    "three_pass": """
    m = tl.full((BLOCK,), float("-inf"), COMPUTE)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(row + cols, mask=cols < n, other=float("-inf")).to(COMPUTE))
    mx = tl.max(m, axis=0)
    s = tl.zeros((BLOCK,), COMPUTE)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row + cols, mask=cols < n, other=float("-inf")).to(COMPUTE)
        s += tl.exp(x - mx)
    total = tl.sum(s, axis=0)
""",
}


def _kernel(operator: str, algorithm: str) -> str:
    out = "x - mx - tl.log(total)" if operator == "log_softmax" else "tl.exp(x - mx) / total"
    return f"""
@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, COMPUTE: tl.constexpr):
    row = x_ptr + tl.program_id(0).to(tl.int64) * n
    dst = out_ptr + tl.program_id(0).to(tl.int64) * n
{_STATS[algorithm].strip(chr(10))}
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        x = tl.load(row + cols, mask=mask, other=0.0).to(COMPUTE)
        tl.store(dst + cols, ({out}).to(out_ptr.dtype.element_ty), mask=mask)
"""


def render(operator: str, settings: dict) -> str:
    model = f"""
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n if n else 0
        if rows:
            _kernel[(rows,)](x, out, n, BLOCK={settings["BLOCK"]}, COMPUTE=_compute_dtype(x.dtype),
                             num_warps={settings["num_warps"]})
        return out
"""
    summary = (
        f"{operator} over the last axis, a program per row, {settings['BLOCK']} elements per step, "
        f"{settings['algorithm']} statistics, {settings['num_warps']} warps."
    )
    return candidate("row_softmax", operator, settings, summary, _kernel(operator, settings["algorithm"]), model)
