"""GEMM template for the matmul family: one packed, cache-blocked, register-blocked kernel for all six.

More on it: docs/templates.md, "Template notes", templates/cpu/gemm.
"""

from collections.abc import Callable

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC, PRELUDE, isa_define

FAMILY = "matmul"
OPERATORS = ["matmul", "batched_matmul", "matvec", "matmul_transposed_a", "tall_skinny_matmul", "linear"]
KNOBS = [
    core.knob("micro_kernel"),
    core.knob("isa", ISA_DOC),
    core.knob("tiles"),
    {
        "name": "pack_a",
        "values": [False, True],
        "default": False,
        "layer": "memory_layout",
        "doc": "copy each MR-row panel of A into contiguous scratch before the micro-kernel (False: read A in place)",
    },
    core.knob("parallel"),
]

ENTRY = entry_macro(
    "gemm",
    "const PT* a, const PT* b, const PT* bias, PT* c, int64_t batch, int64_t M, int64_t N, int64_t K, "
    "int64_t a_bs, int64_t a_rs, int64_t a_cs, int64_t b_bs, int64_t b_rs, int64_t b_cs",
    """
StridedA<T> A{{cptr<T>(a), a_rs, a_cs, a_bs}};
StridedB<T> B{{cptr<T>(b), b_rs, b_cs, b_bs}};
StoreRows<T> epi{wptr<T>(c), cptr<T>(bias), M, N, acc_alias(wptr<T>(c))};
gemm(batch, M, N, K, A, B, epi);
""",
)

# Per operator: (__init__ arguments, __init__ body, forward) of ModelNew. The gemm entry takes
# (a, b, bias, c, batch, M, N, K, a_bs, a_rs, a_cs, b_bs, b_rs, b_cs): element (i, k) of A[b] is
# a[b*a_bs + i*a_rs + k*a_cs], element (k, j) of B[b] is b[b*b_bs + k*b_rs + j*b_cs].
_NO_PARAMS = ("", "pass")
MODELS = {
    "matmul": (
        _NO_PARAMS,
        """
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        m, k = a.shape
        n = b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype)
        _KERNELS[a.dtype](a, b, None, c, 1, m, n, k, 0, k, 1, 0, n, 1)
        return c
""",
    ),
    "batched_matmul": (
        _NO_PARAMS,
        """
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        batch, m, k = a.shape
        n = b.shape[2]
        c = torch.empty(batch, m, n, dtype=a.dtype)
        _KERNELS[a.dtype](a, b, None, c, batch, m, n, k, m * k, k, 1, k * n, n, 1)
        return c
""",
    ),
    "matvec": (
        _NO_PARAMS,
        """
    def forward(self, a, x):
        a, x = a.contiguous(), x.contiguous()
        m, k = a.shape
        y = torch.empty(m, dtype=a.dtype)
        _KERNELS[a.dtype](a, x, None, y, 1, m, 1, k, 0, k, 1, 0, 1, 1)  # x is a k x 1 matrix
        return y
""",
    ),
    "matmul_transposed_a": (
        _NO_PARAMS,
        """
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        k, m = a.shape  # A is stored (k, m): element (i, kk) of A.T is a[kk * m + i]
        n = b.shape[1]
        c = torch.empty(m, n, dtype=a.dtype)
        _KERNELS[a.dtype](a, b, None, c, 1, m, n, k, 0, 1, m, 0, n, 1)
        return c
""",
    ),
    "linear": (
        (
            "in_features, out_features, dtype",
            """
        # The reference's module, so the harness copies its parameters in by name.
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))""",
        ),
        """
    def forward(self, x):
        x = x.contiguous()
        w = self.fc.weight.detach().contiguous()  # (out, in): B[k, j] = w[j * in + k]
        bias = self.fc.bias.detach().contiguous()
        batch, k = x.shape
        n = w.shape[0]
        y = torch.empty(batch, n, dtype=x.dtype)
        _KERNELS[x.dtype](x, w, bias, y, 1, batch, n, k, 0, k, 1, 0, 1, k)
        return y
""",
    ),
}
MODELS["tall_skinny_matmul"] = MODELS["matmul"]  # the same computation


def render(operator: str, settings: dict) -> str:
    cpp = (
        isa_define(settings["isa"])
        + core.defines(settings["micro_kernel"], settings["tiles"], settings["pack_a"], settings["parallel"])
        + PRELUDE
        + core.GEMM
        + CASTS
        + ENTRY
    )
    (init_args, init_body), forward = MODELS[operator]
    args = f", {init_args}" if init_args else ""
    body = (
        kernel_table("gemm") + "\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__(self{args}):\n        super().__init__()\n        {init_body.strip()}\n" + forward
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template gemm.py ({settings_line(settings)}).\n\n"
        f"{core.SUMMARY}"
    )
    return module(doc, cpp, body)


# -- structure: what this template computes, for any task whose reference does the same ----------------------
_MATMUL = """
def strided(t):
    # (tensor to pass, batch, row and column strides): the kernel reads any strides of a contiguous buffer
    bs, rs, cs = t.stride()
    bs = 0 if t.shape[0] == 1 else bs
    if t.is_contiguous():
        return t, bs, rs, cs
    if t.transpose(-2, -1).is_contiguous():
        return t.transpose(-2, -1), bs, rs, cs
    if bs == 0 and t[0].is_contiguous():
        return t[0], 0, rs, cs
    if bs == 0 and t[0].t().is_contiguous():
        return t[0].t(), 0, rs, cs
    t = t.contiguous()
    bs, rs, cs = t.stride()
    return t, 0 if t.shape[0] == 1 else bs, rs, cs


vector_a, vector_b = a.dim() == 1, b.dim() == 1
a = a.unsqueeze(0) if vector_a else a
b = b.unsqueeze(-1) if vector_b else b
batch_shape = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
pa, a_bs, a_rs, a_cs = strided(a.expand(*batch_shape, m, k).reshape(-1, m, k))
pb, b_bs, b_rs, b_cs = strided(b.expand(*batch_shape, k, n).reshape(-1, k, n))
batch = 1
for size in batch_shape:
    batch *= size
c = torch.empty(batch, m, n, dtype=a.dtype)
bias = bias.reshape(-1).contiguous() if bias is not None else None
_KERNELS[a.dtype](pa, pb, bias, c, batch, m, n, k, a_bs, a_rs, a_cs, b_bs, b_rs, b_cs)
c = c.reshape(*batch_shape, m, n)
c = c.squeeze(-2) if vector_a else c
return c.squeeze(-1) if vector_b else c
"""


def _call(found: Found) -> Call:
    """torch.matmul semantics (1-D operands, broadcast batch dims, any strides) plus an optional bias per column."""
    return Call(("a", "b", "bias"), _MATMUL)


def _rank(a: int | None, b: int | None) -> Callable[[Found], str | None]:
    def where(found: Found) -> str | None:
        ra, rb = len(found.shapes["a"]), len(found.shapes["b"])
        if (a is not None and ra != a) or (b is not None and rb != b):
            return f"operands of rank {ra} and {rb}"
        return None

    return where


_DT = ("float32", "float64", "bfloat16")
PATTERNS = [
    pattern("matmul", ("matmul", ["a", "b", "-"]), call=_call, where=_rank(2, 2), dtypes=_DT, roles=("a", "b", "bias")),
    pattern(
        "tall_skinny_matmul",
        ("matmul", ["a", "b", "-"]),
        call=_call,
        where=_rank(2, 2),
        dtypes=_DT,
        roles=("a", "b", "bias"),
    ),
    pattern(
        "batched_matmul",
        ("matmul", ["a", "b", "-"]),
        call=_call,
        where=_rank(3, 3),
        dtypes=_DT,
        roles=("a", "b", "bias"),
    ),
    pattern("matvec", ("matmul", ["a", "b", "-"]), call=_call, where=_rank(2, 1), dtypes=_DT, roles=("a", "b", "bias")),
    pattern(
        "matmul_transposed_a",
        ("matmul", ["a^T", "b", "-"]),
        call=lambda found: Call(("a", "b", "bias"), "a = a.transpose(-2, -1)\n" + _MATMUL),
        where=_rank(2, 2),
        dtypes=_DT,
        roles=("a", "b", "bias"),
    ),
    pattern(
        "linear",
        ("matmul", ["a", "b^T", "bias"]),
        call=lambda found: Call(("a", "b", "bias"), "b = b.transpose(-2, -1)\n" + _MATMUL),
        dtypes=_DT,
    ),
    pattern(
        "linear",
        ("matmul", ["a", "b^T", "-"]),
        call=lambda found: Call(("a", "b", "bias"), "b = b.transpose(-2, -1)\n" + _MATMUL),
        dtypes=_DT,
        roles=("a", "b", "bias"),
    ),
    # any other operand layout: the transposes are views the forward passes in
    pattern(
        "matmul",
        ("matmul", ["a^T", "b^T", "-"]),
        call=lambda found: Call(("a", "b", "bias"), "a, b = a.transpose(-2, -1), b.transpose(-2, -1)\n" + _MATMUL),
        dtypes=_DT,
        roles=("a", "b", "bias"),
    ),
    pattern("matmul", ("matmul", ["a", "b", "-"]), call=_call, dtypes=_DT, roles=("a", "b", "bias")),
    pattern("matmul", ("matmul", ["a", "b", "bias"]), call=_call, dtypes=_DT),
    pattern(
        "matmul",
        ("matmul", ["a^T", "b", "bias"]),
        call=lambda found: Call(("a", "b", "bias"), "a = a.transpose(-2, -1)\n" + _MATMUL),
        dtypes=_DT,
    ),
    pattern(
        "matmul",
        ("matmul", ["a^T", "b^T", "bias"]),
        call=lambda found: Call(("a", "b", "bias"), "a, b = a.transpose(-2, -1), b.transpose(-2, -1)\n" + _MATMUL),
        dtypes=_DT,
    ),
    pattern(
        "matmul",
        ("matmul", ["a^T", "b", "-"]),
        call=lambda found: Call(("a", "b", "bias"), "a = a.transpose(-2, -1)\n" + _MATMUL),
        dtypes=_DT,
        roles=("a", "b", "bias"),
    ),
]
