"""Elementwise operators in Triton: one flat, masked block of elements per program (or a persistent grid).

More on it: docs/templates.md, "Template notes", templates/triton/pointwise.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.suite.templates.triton._triton import NUM_WARPS, candidate

FAMILY = "elementwise"
TARGET = "triton"


class Op(NamedTuple):
    expr: str  # Triton expression of x (and y for binary operators), p0, p1 (compute dtype)
    params: tuple[str, ...] = ()  # constructor arguments, passed to the kernel as p0, p1
    binary: bool = False


OPS = {
    "relu": Op("tl.where(x > 0, x, 0.0)"),
    "leaky_relu": Op("tl.where(x > 0, x, x * p0)", ("negative_slope",)),
    "clamp": Op("tl.minimum(tl.maximum(x, p0), p1)", ("min_value", "max_value")),
    "hardswish": Op("x * tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0"),
    "add_scaled": Op("x + p0 * y", ("alpha",), binary=True),
    "gelu": Op("0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))"),
    "sigmoid": Op("1.0 / (1.0 + tl.exp(-x))"),
    "silu": Op("x / (1.0 + tl.exp(-x))"),
    "tanh": Op("1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)"),
    "elu": Op("tl.where(x > 0, x, p0 * (tl.exp(tl.minimum(x, 0.0)) - 1.0))", ("alpha",)),
}
OPERATORS = list(OPS)
KNOBS = [
    {
        "name": "BLOCK",
        "values": [1024, 4096, 16384],
        "default": 1024,
        "layer": "tiling",
        "doc": "elements per program (per loop step with the persistent grid)",
    },
    NUM_WARPS,
    {
        "name": "grid",
        "values": ["blocks", "persistent"],
        "default": "blocks",
        "layer": "scheduling",
        "doc": "'blocks': one program per block; 'persistent': 4 programs per SM striding over the blocks",
    },
]


def _kernel(op: Op, persistent: bool) -> str:
    y_arg = "y_ptr, " if op.binary else ""
    load_y = "y = tl.load(y_ptr + offs, mask=mask).to(COMPUTE)\n" if op.binary else ""
    body = f"""offs = (tl.zeros((BLOCK,), tl.int64) + block) * BLOCK + tl.arange(0, BLOCK)  # 64-bit offsets
mask = offs < n
x = tl.load(x_ptr + offs, mask=mask).to(COMPUTE)
{load_y}out = {op.expr}
tl.store(out_ptr + offs, out.to(out_ptr.dtype.element_ty), mask=mask)"""
    if persistent:
        head = "    for block in range(tl.program_id(0), (n + BLOCK - 1) // BLOCK, tl.num_programs(0)):\n"
        body = "".join("        " + line + "\n" for line in body.splitlines())
    else:
        head = "    block = tl.program_id(0)\n"
        body = "".join("    " + line + "\n" for line in body.splitlines())
    return f"""
@triton.jit
def _kernel(x_ptr, {y_arg}out_ptr, n, p0, p1, BLOCK: tl.constexpr, COMPUTE: tl.constexpr):
{head}{body}"""


def _model(op: Op, settings: dict) -> str:
    params = ", ".join(f"{p}: float" for p in op.params)
    init = "".join(f"        self.{p} = {p}\n" for p in op.params) or "        pass\n"
    scalars = [f"float(self.{p})" for p in op.params] + ["0.0"] * (2 - len(op.params))
    inputs = "x: torch.Tensor, y: torch.Tensor" if op.binary else "x: torch.Tensor"
    contig = "x, y = x.contiguous(), y.contiguous()" if op.binary else "x = x.contiguous()"
    grid = "min(blocks, _programs(x.device))" if settings["grid"] == "persistent" else "blocks"
    return f"""
def _programs(device):
    # 4 programs per SM on a GPU; under the interpreter (CPU tensors) a fixed 64
    if device.type == "cuda":
        return 4 * torch.cuda.get_device_properties(device).multi_processor_count
    return 64


class ModelNew(nn.Module):
    def __init__(self{", " + params if params else ""}):
        super().__init__()
{init}
    def forward(self, {inputs}) -> torch.Tensor:
        {contig}
        out = torch.empty_like(x)
        n = x.numel()
        blocks = triton.cdiv(n, {settings["BLOCK"]})
        if blocks:
            _kernel[({grid},)](
                x, {"y, " if op.binary else ""}out, n, {", ".join(scalars)}, BLOCK={settings["BLOCK"]},
                COMPUTE=_compute_dtype(x.dtype), num_warps={settings["num_warps"]},
            )
        return out
"""


def render(operator: str, settings: dict) -> str:
    op = OPS[operator]
    summary = (
        f"out = {op.expr} per element, computed in float32 (float64 for float64 inputs); "
        f"{settings['BLOCK']} elements per program, {settings['num_warps']} warps, grid={settings['grid']}."
    )
    return candidate(
        "pointwise", operator, settings, summary, _kernel(op, settings["grid"] == "persistent"), _model(op, settings)
    )
