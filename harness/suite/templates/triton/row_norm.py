"""Row normalisations in Triton: layer_norm and rms_norm, one program per row.

More on it: docs/templates.md, "Template notes", templates/triton/row_norm.
"""

from __future__ import annotations

from harness.suite.templates.triton._triton import NUM_WARPS, candidate

FAMILY = "normalization"
TARGET = "triton"
OPERATORS = ["layer_norm", "rms_norm"]
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
        "name": "variance",
        "values": ["two_pass", "welford"],
        "default": "two_pass",
        "layer": "algorithm",
        "doc": "'two_pass': mean, then mean squared deviation; 'welford': per-lane running mean/M2, merged",
    },
]

_STATS = {
    ("layer_norm", "two_pass"): """
    acc = tl.zeros((BLOCK,), COMPUTE)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(row + cols, mask=cols < n, other=0.0).to(COMPUTE)
    mean = tl.sum(acc, axis=0) / n
    acc = tl.zeros((BLOCK,), COMPUTE)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        d = tl.where(cols < n, tl.load(row + cols, mask=cols < n, other=0.0).to(COMPUTE) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
""",
    ("layer_norm", "welford"): """
    mean_l = tl.zeros((BLOCK,), COMPUTE)
    m2_l = tl.zeros((BLOCK,), COMPUTE)
    count = tl.zeros((BLOCK,), COMPUTE)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        x = tl.load(row + cols, mask=mask, other=0.0).to(COMPUTE)
        count_new = count + tl.where(mask, 1.0, 0.0)
        delta = x - mean_l
        mean_l = tl.where(mask, mean_l + delta / tl.maximum(count_new, 1.0), mean_l)
        m2_l = tl.where(mask, m2_l + delta * (x - mean_l), m2_l)
        count = count_new
    mean = tl.sum(mean_l * count, axis=0) / n                       # merge the lanes (Chan et al.)
    dev = mean_l - mean
    rstd = 1.0 / tl.sqrt((tl.sum(m2_l, axis=0) + tl.sum(count * dev * dev, axis=0)) / n + eps)
""",
}
_RMS_STATS = """
    acc = tl.zeros((BLOCK,), COMPUTE)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(row + cols, mask=cols < n, other=0.0).to(COMPUTE)
        acc += x * x
    mean = 0.0
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
"""


def _kernel(operator: str, variance: str) -> str:
    stats = _RMS_STATS if operator == "rms_norm" else _STATS[(operator, variance)]
    shift = " + tl.load(b_ptr + cols, mask=mask, other=0.0).to(COMPUTE)" if operator == "layer_norm" else ""
    return f"""
@triton.jit
def _kernel(x_ptr, w_ptr, b_ptr, out_ptr, n, eps, BLOCK: tl.constexpr, COMPUTE: tl.constexpr):
    row = x_ptr + tl.program_id(0).to(tl.int64) * n
    dst = out_ptr + tl.program_id(0).to(tl.int64) * n
{stats.strip(chr(10))}
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        x = tl.load(row + cols, mask=mask, other=0.0).to(COMPUTE)
        y = (x - mean) * rstd * tl.load(w_ptr + cols, mask=mask, other=0.0).to(COMPUTE){shift}
        tl.store(dst + cols, y.to(out_ptr.dtype.element_ty), mask=mask)
"""


_MODELS = {
    "layer_norm": (
        "hidden: int, eps: float, dtype: str",
        """
        # The reference's module, so the harness copies its parameters in by name.
        self.norm = nn.LayerNorm(hidden, eps=eps, dtype=getattr(torch, dtype))""",
        "self.norm.weight, self.norm.bias, float(self.norm.eps)",
    ),
    "rms_norm": (
        "hidden: int, dtype: str",
        """
        self.eps = 1e-6
        self.weight = nn.Parameter(torch.ones(hidden, dtype=getattr(torch, dtype)))""",
        "self.weight, self.weight, float(self.eps)",
    ),
}


def render(operator: str, settings: dict) -> str:
    args, init, params = _MODELS[operator]
    model = f"""
class ModelNew(nn.Module):
    def __init__(self, {args}):
        super().__init__()
        {init.strip()}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n if n else 0
        w, b, eps = {params}
        if rows:
            _kernel[(rows,)](x, w.detach().contiguous(), b.detach().contiguous(), out, n, eps,
                             BLOCK={settings["BLOCK"]}, COMPUTE=_compute_dtype(x.dtype),
                             num_warps={settings["num_warps"]})
        return out
"""
    summary = (
        f"{operator} over the last axis, a program per row, {settings['BLOCK']} elements per step, "
        f"variance={settings['variance']}"
        + (" (not used: rms_norm needs only the mean square)" if operator == "rms_norm" else "")
        + f", {settings['num_warps']} warps."
    )
    return candidate("row_norm", operator, settings, summary, _kernel(operator, settings["variance"]), model)
