"""Convolution-with-epilogue template for the fused family: relu(conv2d(x, W) + bias).

The convolution is the one of the conv.py template (``harness/suite/cpp_kit/conv.py``:
direct, im2col + GEMM or implicit GEMM); the bias add and ReLU are either a
second pass over the output ('separate', as PyTorch runs them) or applied to
each finished value before it is stored ('fused').
"""

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit import conv as conv_kit
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.candidate import kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC

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


def _conv_call(relu: int, fused: str) -> Call:
    """A 1-D or 2-D convolution (1-D as one-row images) with optional bias, stride and padding per dim."""
    body = f"""
x = x.contiguous()
w = weight.contiguous()
b = bias.reshape(-1).contiguous() if bias is not None else None
stride, padding = tuple(stride), tuple(padding)
if x.dim() == 3:
    n, c, length = x.shape
    o, k = w.shape[0], w.shape[2]
    out_len = (length + 2 * padding[0] - k) // stride[0] + 1
    y = torch.empty(n, o, out_len, dtype=x.dtype)
    _KERNELS[x.dtype](x, w, b, y, n, c, 1, length, o, 1, k, 1, stride[0], 0, padding[0], 1, out_len, {relu}, {fused})
    return y
n, c, h, wd = x.shape
o, kh, kw = w.shape[0], w.shape[2], w.shape[3]
oh = (h + 2 * padding[0] - kh) // stride[0] + 1
ow = (wd + 2 * padding[1] - kw) // stride[1] + 1
y = torch.empty(n, o, oh, ow, dtype=x.dtype)
_KERNELS[x.dtype](x, w, b, y, n, c, h, wd, o, kh, kw, stride[0], stride[1], padding[0], padding[1], oh, ow, {relu}, {fused})
return y
"""
    return Call(("x", "weight", "bias", "stride", "padding"), body)


def _plain_conv(found: Found) -> str | None:
    """Conditions of the conv2d kernel: groups 1, dilation 1, a 1-D or 2-D convolution."""
    if found.get("groups") != 1:
        return f"groups={found.get('groups')} (the kernel computes dense convolutions)"
    if any(d != 1 for d in found.get("dilation") or ()):
        return f"dilation={found.get('dilation')}"
    if found.get("spatial") not in (1, 2):
        return f"a {found.get('spatial')}-D convolution"
    return None


def _bias_where(found: Found) -> str | None:
    why = _plain_conv(found)
    if why:
        return why
    o = found.shapes["weight"][0]
    if found.get("spatial") != 2:
        return "a 1-D convolution (the fused template is 2-D)"
    if "bias" in found.tensors and found.shapes["bias"] not in ((o,), (o, 1, 1), (1, o, 1, 1)):
        return f"a bias of shape {found.shapes['bias']} (one per output channel is fused)"
    return None


_DT = ("float32", "float64", "bfloat16")
_CONV = {
    "info": {"groups": "groups", "dilation": "dilation", "spatial": "spatial"},
    "scalars": {"stride": "stride", "padding": "padding"},
}
PATTERNS = [
    pattern(
        "conv2d_bias_relu",
        ("conv:conv", ["x", "weight", "-"], _CONV),
        ("binary:add", ["$0", "bias"]),
        ("unary:relu", ["$1"]),
        call=lambda found: _conv_call(1, "_FUSED"),
        where=_bias_where,
        dtypes=_DT,
    ),
    pattern(
        "conv2d_bias_relu",
        ("conv:conv", ["x", "weight", "bias"], _CONV),
        ("unary:relu", ["$0"]),
        call=lambda found: _conv_call(1, "_FUSED"),
        where=_bias_where,
        dtypes=_DT,
    ),
]
