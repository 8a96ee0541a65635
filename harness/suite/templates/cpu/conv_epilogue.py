"""Convolution-with-epilogue template for the fused family: relu(conv2d(x, W) + bias).

The convolution is the one of the conv.py template (``harness/suite/cpp_kit/conv.py``:
direct, im2col + GEMM or implicit GEMM); the bias add and ReLU are either a
second pass over the output ('separate', as PyTorch runs them) or applied to
each finished value before it is stored ('fused').
"""

from harness.structure.patterns import Found, pattern
from harness.suite.cpp_kit import conv as conv_kit
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.candidate import kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC
from harness.suite.templates.cpu.conv import CONV_ARGS, CONV_DTYPES, conv_call, plain_conv

FAMILY = "fused"
OPERATORS = ["conv2d_bias_relu"]
KNOBS = [
    {
        "name": "fusion",
        "values": ["separate", "fused"],
        "default": "separate",
        "layer": "fusion",
        "doc": "'separate': bias and ReLU as a second pass over the output; 'fused': applied before each store",
    },
    {
        "name": "algorithm",
        "values": ["direct", "im2col", "implicit_gemm"],
        "default": "direct",
        "layer": "algorithm",
        "doc": conv_kit.ALGORITHM_DOC,
    },
    dict(core.knob("micro_kernel"), doc=core.MICRO_DOC + "; direct: MR output channels per task"),
    core.knob("isa", ISA_DOC),
]

BODY = """
class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dtype):
        super().__init__()
        # The reference's parameters (a bias-free convolution and a separate (O, 1, 1) bias), same names.
        dt = getattr(torch, dtype)
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False).to(dt)
        self.bias = nn.Parameter((0.1 * torch.randn(out_channels, 1, 1)).to(dt))

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.detach().contiguous()
        bias = self.bias.detach().contiguous()
        n, c, h, wd = x.shape
        o, _, k, _ = w.shape
        p = k // 2
        oh, ow = h + 2 * p - k + 1, wd + 2 * p - k + 1
        y = torch.empty(n, o, oh, ow, dtype=x.dtype)
        _KERNELS[x.dtype](x, w, bias, y, n, c, h, wd, o, k, k, 1, 1, p, p, oh, ow, 1, _FUSED)
        return y
"""


def render(operator: str, settings: dict) -> str:
    body = (
        kernel_table("conv2d")
        + f"_FUSED = {int(settings['fusion'] == 'fused')}  # fusion={settings['fusion']}\n"
        + "\n"
        + BODY
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template conv_epilogue.py "
        f"({settings_line(settings)}).\n\nConvolution as in harness/suite/cpp_kit/conv.py; bias + ReLU fused "
        "into its stores or run as a second pass\n(the knobs are the #defines at the top of _SOURCE)."
    )
    return module(doc, conv_kit.source(settings), body)


# -- structure: what this template computes, for any task whose reference does the same ----------------------


def _bias_where(found: Found) -> str | None:
    why = plain_conv(found)
    if why:
        return why
    o = found.shapes["weight"][0]
    if found.get("spatial") != 2:
        return "a 1-D convolution (the fused template is 2-D)"
    if "bias" in found.tensors and found.shapes["bias"] not in ((o,), (o, 1, 1), (1, o, 1, 1)):
        return f"a bias of shape {found.shapes['bias']} (one per output channel is fused)"
    return None


PATTERNS = [
    pattern(
        "conv2d_bias_relu",
        ("conv:conv", ["x", "weight", "-"], CONV_ARGS),
        ("binary:add", ["$0", "bias"]),
        ("unary:relu", ["$1"]),
        call=lambda found: conv_call(1, "_FUSED"),
        where=_bias_where,
        dtypes=CONV_DTYPES,
    ),
    pattern(
        "conv2d_bias_relu",
        ("conv:conv", ["x", "weight", "bias"], CONV_ARGS),
        ("unary:relu", ["$0"]),
        call=lambda found: conv_call(1, "_FUSED"),
        where=_bias_where,
        dtypes=CONV_DTYPES,
    ),
]
