"""GEMM template for the matmul family: one packed, cache-blocked, register-blocked kernel for all six.

Every operator is the same computation ``C[b] = A[b] @ B[b] (+ bias)`` with
the operands' layouts expressed as strides (a transposed A, nn.Linear's
(out, in) weight and the batch dimension are just strides), so one C++ core
(``harness/suite/cpp_kit/gemm.py``) serves them all. Shapes with one output
row or column (matvec, a batch of one through a linear layer, a vector-matrix
product) take the core's matrix-vector kernels, which are memory-bound: dot
products along contiguous rows, or streaming rows with K split over threads.

Knobs: the micro-kernel's register tile, the instruction set, the cache
blocks, whether A is packed, and how OpenMP splits the work. The defaults are
a plain baseline (4x1 tile, compiler vectorisation, small blocks, A read in
place, threads over row blocks); larger tiles with AVX-512, packing and a 2-D
or K split are what the proposer should find.
"""

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
