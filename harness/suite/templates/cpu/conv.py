"""Convolution template (NCHW, groups 1, with bias): conv2d, conv2d_strided and conv1d.

More on it: docs/templates.md, "Template notes", templates/cpu/conv.
"""

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit import conv as conv_kit
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.candidate import kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC

FAMILY = "convolution"
OPERATORS = ["conv2d", "conv2d_strided", "conv1d"]
KNOBS = [
    {
        "name": "algorithm",
        "values": ["direct", "im2col", "implicit_gemm"],
        "default": "direct",
        "layer": "algorithm",
        "doc": conv_kit.ALGORITHM_DOC,
    },
    dict(core.knob("micro_kernel"), doc=core.MICRO_DOC + "; direct: MR output channels per task"),
    core.knob("isa", ISA_DOC),
    dict(core.knob("tiles"), doc=core.TILES_DOC + " (GEMM algorithms only)"),
]

_CONV2D_FORWARD = """
    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.detach().contiguous()
        bias = self.conv.bias.detach().contiguous()
        n, c, h, wd = x.shape
        o, _, kh, kw = w.shape
        (sh, sw), (ph, pw) = self.conv.stride, self.conv.padding
        oh, ow = (h + 2 * ph - kh) // sh + 1, (wd + 2 * pw - kw) // sw + 1
        y = torch.empty(n, o, oh, ow, dtype=x.dtype)
        _KERNELS[x.dtype](x, w, bias, y, n, c, h, wd, o, kh, kw, sh, sw, ph, pw, oh, ow, 0, 1)
        return y
"""
# Per operator: (__init__ arguments, __init__ body creating the reference's parameters, forward).
MODELS = {
    "conv2d": (
        "in_channels, out_channels, kernel, stride, padding, dtype",
        """
        self.conv = nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=padding, bias=True,
                              dtype=getattr(torch, dtype))""",
        _CONV2D_FORWARD,
    ),
    "conv2d_strided": (
        "in_channels, out_channels, kernel_size, stride, padding, dtype",
        """
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.conv.to(getattr(torch, dtype))""",
        _CONV2D_FORWARD,
    ),
    "conv1d": (
        "in_channels, out_channels, kernel_size, stride, padding, dtype",
        """
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.conv.to(getattr(torch, dtype))""",
        """
    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.detach().contiguous()
        bias = self.conv.bias.detach().contiguous()
        n, c, length = x.shape
        o, _, k = w.shape
        s, p = self.conv.stride[0], self.conv.padding[0]
        out_len = (length + 2 * p - k) // s + 1
        y = torch.empty(n, o, out_len, dtype=x.dtype)
        # a 2-D convolution of one-row images
        _KERNELS[x.dtype](x, w, bias, y, n, c, 1, length, o, 1, k, 1, s, 0, p, 1, out_len, 0, 1)
        return y
""",
    ),
}


def render(operator: str, settings: dict) -> str:
    init_args, init_body, forward = MODELS[operator]
    body = (
        kernel_table("conv2d") + "\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__(self, {init_args}):\n        super().__init__()\n        {init_body.strip()}\n" + forward
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template conv.py ({settings_line(settings)}).\n\n"
        "Convolution by the algorithm the knob names (direct taps, im2col + GEMM or implicit GEMM; see\n"
        "harness/suite/cpp_kit/conv.py); the knobs are the #defines at the top of _SOURCE."
    )
    return module(doc, conv_kit.source(settings), body)


# -- structure: what this template computes, for any task whose reference does the same ----------------------


def conv_call(relu: int, fused: str) -> Call:
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


def plain_conv(found: Found) -> str | None:
    """Conditions of the conv2d kernel: groups 1, dilation 1, a 1-D or 2-D convolution."""
    if found.get("groups") != 1:
        return f"groups={found.get('groups')} (the kernel computes dense convolutions)"
    if any(d != 1 for d in found.get("dilation") or ()):
        return f"dilation={found.get('dilation')}"
    if found.get("spatial") not in (1, 2):
        return f"a {found.get('spatial')}-D convolution"
    return None


CONV_DTYPES = ("float32", "float64", "bfloat16")
CONV_ARGS = {
    "info": {"groups": "groups", "dilation": "dilation", "spatial": "spatial"},
    "scalars": {"stride": "stride", "padding": "padding"},
}
PATTERNS = [
    pattern(
        op,
        ("conv:conv", ["x", "weight", b], CONV_ARGS),
        call=lambda found: conv_call(0, "1"),
        where=plain_conv,
        dtypes=CONV_DTYPES,
        roles=("x", "weight", "bias"),
    )
    for op in ("conv2d", "conv2d_strided", "conv1d")
    for b in ("bias", "-")
]
