"""Reductions over one axis in Triton: sum_dim, mean_dim, max_dim.

More on it: docs/templates.md, "Template notes", templates/triton/axis_reduce.
"""

from __future__ import annotations

from harness.suite.templates.triton._triton import NUM_WARPS, candidate

FAMILY = "reduction"
TARGET = "triton"
# operator: (constructor argument naming the axis, keepdim, combine, finish)
OPS = {
    "sum_dim": ("dim", True, "sum", ""),
    "mean_dim": ("reduce_dim", False, "sum", " / R"),
    "max_dim": ("reduce_dim", False, "max", ""),
}
OPERATORS = list(OPS)
KNOBS = [
    {
        "name": "BLOCK_R",
        "values": [64, 16, 256],
        "default": 64,
        "layer": "tiling",
        "doc": "elements of the reduced axis per loop step",
    },
    {
        "name": "BLOCK_OUT",
        "values": [32, 8, 128],
        "default": 32,
        "layer": "tiling",
        "doc": "outputs per program (consecutive positions of the kept axes)",
    },
    NUM_WARPS,
]


def _kernel(combine: str, finish: str) -> str:
    init = (
        "tl.full((BLOCK_R, BLOCK_OUT), float('-inf'), COMPUTE)"
        if combine == "max"
        else ("tl.zeros((BLOCK_R, BLOCK_OUT), COMPUTE)")
    )
    other = "float('-inf')" if combine == "max" else "0.0"
    step = "acc = tl.maximum(acc, x)" if combine == "max" else "acc += x"
    reduce = "tl.max(acc, axis=0)" if combine == "max" else "tl.sum(acc, axis=0)"
    return f"""
@triton.jit
def _kernel(x_ptr, out_ptr, outputs, R, inner, BLOCK_R: tl.constexpr, BLOCK_OUT: tl.constexpr,
            COMPUTE: tl.constexpr):
    j = tl.program_id(0).to(tl.int64) * BLOCK_OUT + tl.arange(0, BLOCK_OUT)   # output positions
    jmask = j < outputs
    base = (j // inner) * R * inner + j % inner                                # element (outer, 0, inner)
    acc = {init}
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        mask = (r < R)[:, None] & jmask[None, :]
        x = tl.load(x_ptr + base[None, :] + r.to(tl.int64)[:, None] * inner, mask=mask, other={other}).to(COMPUTE)
        {step}
    out = {reduce}{finish}
    tl.store(out_ptr + j, out.to(out_ptr.dtype.element_ty), mask=jmask)
"""


def _model(operator: str, settings: dict) -> str:
    arg, keepdim, _, _ = OPS[operator]
    return f"""
class ModelNew(nn.Module):
    def __init__(self, {arg}: int):
        super().__init__()
        self.{arg} = {arg}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        axis = self.{arg} % x.dim()
        shape = list(x.shape)
        R = shape[axis]
        inner = 1
        for s in shape[axis + 1:]:
            inner *= s
        kept = shape[:axis] + ([1] if {keepdim} else []) + shape[axis + 1:]
        out = torch.empty(kept, dtype=x.dtype, device=x.device)
        outputs = out.numel()
        if outputs:
            _kernel[(triton.cdiv(outputs, {settings["BLOCK_OUT"]}),)](
                x, out, outputs, R, inner, BLOCK_R={settings["BLOCK_R"]}, BLOCK_OUT={settings["BLOCK_OUT"]},
                COMPUTE=_compute_dtype(x.dtype), num_warps={settings["num_warps"]},
            )
        return out
"""


def render(operator: str, settings: dict) -> str:
    _, _, combine, finish = OPS[operator]
    summary = (
        f"A {combine} over one axis of the (outer, R, inner) view; {settings['BLOCK_OUT']} outputs per program, "
        f"{settings['BLOCK_R']} reduced elements per step, {settings['num_warps']} warps."
    )
    return candidate("axis_reduce", operator, settings, summary, _kernel(combine, finish), _model(operator, settings))
