"""Transformer MLP-block template for the block family: mlp_block, transformer_ffn, rmsnorm_swiglu.

More on it: docs/templates.md, "Template notes", templates/cpu/mlp.
"""

from harness.structure.patterns import whole_graph
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.blocks import BLOCKS, FUSION_DOC, FUSION_VALUES
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC, PRELUDE, isa_define

FAMILY = "block"
OPERATORS = ["mlp_block", "transformer_ffn", "rmsnorm_swiglu"]
KNOBS = [
    {"name": "fusion", "values": FUSION_VALUES, "default": "separate", "layer": "fusion", "doc": FUSION_DOC},
    core.knob("micro_kernel"),
    core.knob("isa", ISA_DOC),
    core.knob("tiles"),
    core.knob("parallel"),
]
FUSION_CODES = {v: i for i, v in enumerate(FUSION_VALUES)}

MLP = r"""
// ==== the blocks ============================================================================
// y = x + fc2(gelu(fc1(layer_norm(x))))
template <class T>
static void gelu_mlp(const T* x, const T* g, const T* beta, const T* w1, const T* b1, const T* w2, const T* b2, T* y,
                     i64 rows, i64 dim, i64 hidden, double eps) {
    typedef typename AccOf<T>::type Acc;
    Acc* mean = scratch<Acc, 10>(size_t(rows));
    Acc* rstd = scratch<Acc, 11>(size_t(rows));
    T* h = scratch<T, 12>(size_t(rows * hidden));
    const bool fused = KOPE_FUSION >= 1;
    row_stats(x, rows, dim, eps, false, mean, rstd);
#if KOPE_FUSION == 2
    NormA<T> A{x, dim, mean, rstd, g, beta};
    linear_from<EPI_GELU>(A, w1, b1, (const T*)nullptr, h, rows, hidden, dim, true);
#else
    T* n = scratch<T, 13>(size_t(rows * dim));
    normalize_rows(x, rows, dim, mean, rstd, g, beta, n);
    linear<EPI_GELU>(n, w1, b1, (const T*)nullptr, h, rows, hidden, dim, fused);
#endif
    linear<EPI_RESIDUAL>(h, w2, b2, x, y, rows, dim, hidden, fused);
}

// y = x + down(silu(gate(h)) * up(h)), h = rms_norm(x) * g
template <class T>
static void swiglu_mlp(const T* x, const T* g, const T* wg, const T* wu, const T* wd, T* y, i64 rows, i64 dim, i64 ff,
                       double eps) {
    typedef typename AccOf<T>::type Acc;
    Acc* mean = scratch<Acc, 10>(size_t(rows));
    Acc* rstd = scratch<Acc, 11>(size_t(rows));
    T* G = scratch<T, 12>(size_t(rows * ff));
    T* H = scratch<T, 14>(size_t(rows * ff));
    const T* none = nullptr;
    row_stats(x, rows, dim, eps, true, mean, rstd);
#if KOPE_FUSION == 2
    NormA<T> A{x, dim, mean, rstd, g, none};
    linear_from<EPI_STORE>(A, wg, none, none, G, rows, ff, dim, true);
    linear_from<EPI_SILU_MUL>(A, wu, none, G, H, rows, ff, dim, true);
#else
    T* n = scratch<T, 13>(size_t(rows * dim));
    normalize_rows(x, rows, dim, mean, rstd, g, none, n);
    linear<EPI_STORE>(n, wg, none, none, G, rows, ff, dim, KOPE_FUSION == 1);
#if KOPE_FUSION == 1
    linear<EPI_SILU_MUL>(n, wu, none, G, H, rows, ff, dim, true);
#else
    linear<EPI_STORE>(n, wu, none, none, H, rows, ff, dim, false);
    #pragma omp parallel for simd schedule(static)
    for (i64 i = 0; i < rows * ff; ++i) put(H + i, rounded<T>(fsilu(to_acc(G[i]))) * to_acc(H[i]));
#endif
#endif
    linear<EPI_RESIDUAL>(H, wd, none, x, y, rows, dim, ff, KOPE_FUSION >= 1);
}
"""

ENTRIES = {
    "gelu": entry_macro(
        "gelu_mlp",
        "const PT* x, const PT* g, const PT* beta, const PT* w1, const PT* b1, const PT* w2, const PT* b2, PT* y, "
        "int64_t rows, int64_t dim, int64_t hidden, double eps",
        "gelu_mlp(cptr<T>(x), cptr<T>(g), cptr<T>(beta), cptr<T>(w1), cptr<T>(b1), cptr<T>(w2), cptr<T>(b2), "
        "wptr<T>(y), rows, dim, hidden, eps);",
    ),
    "swiglu": entry_macro(
        "swiglu_mlp",
        "const PT* x, const PT* g, const PT* wg, const PT* wu, const PT* wd, PT* y, int64_t rows, int64_t dim, "
        "int64_t ff, double eps",
        "swiglu_mlp(cptr<T>(x), cptr<T>(g), cptr<T>(wg), cptr<T>(wu), cptr<T>(wd), wptr<T>(y), rows, dim, ff, eps);",
    ),
}

_GELU_FORWARD = """
    def forward(self, x):
        x = x.contiguous()
        dim = x.shape[-1]
        hidden = self.fc1.weight.shape[0]
        y = torch.empty_like(x)
        p = [t.detach().contiguous() for t in (self.norm.weight, self.norm.bias, self.fc1.weight, self.fc1.bias,
                                               self.fc2.weight, self.fc2.bias)]
        _KERNELS[x.dtype](x, *p, y, x.numel() // dim, dim, hidden, float(self.norm.eps))
        return y
"""
# Per operator: (kernel, __init__ arguments, __init__ body with the reference's modules, forward).
MODELS = {
    "mlp_block": (
        "gelu_mlp",
        "dim, hidden, dtype",
        """
        dtype = getattr(torch, dtype)
        self.norm = nn.LayerNorm(dim, dtype=dtype)
        self.fc1 = nn.Linear(dim, hidden, dtype=dtype)
        self.fc2 = nn.Linear(hidden, dim, dtype=dtype)""",
        _GELU_FORWARD,
    ),
    "transformer_ffn": (
        "gelu_mlp",
        "d_model, d_ff, dtype",
        """
        self.norm = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        self.to(getattr(torch, dtype))""",
        _GELU_FORWARD,
    ),
    "rmsnorm_swiglu": (
        "swiglu_mlp",
        "d_model, d_ff, dtype",
        """
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(d_model))
        self.gate = nn.Linear(d_model, d_ff, bias=False)
        self.up = nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)
        self.to(getattr(torch, dtype))""",
        """
    def forward(self, x):
        x = x.contiguous()
        dim = x.shape[-1]
        ff = self.gate.weight.shape[0]
        y = torch.empty_like(x)
        p = [t.detach().contiguous() for t in (self.norm_weight, self.gate.weight, self.up.weight, self.down.weight)]
        _KERNELS[x.dtype](x, *p, y, x.numel() // dim, dim, ff, 1e-6)
        return y
""",
    ),
}


def render(operator: str, settings: dict) -> str:
    kernel, init_args, init_body, forward = MODELS[operator]
    cpp = (
        isa_define(settings["isa"])
        + core.defines(settings["micro_kernel"], settings["tiles"], True, settings["parallel"])
        + f"#define KOPE_FUSION {FUSION_CODES[settings['fusion']]}  // fusion={settings['fusion']}\n"
        + PRELUDE
        + core.GEMM
        + BLOCKS
        + MLP
        + CASTS
        + ENTRIES[kernel.split("_")[0]]
    )
    body = (
        kernel_table(kernel) + "\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__(self, {init_args}):\n        super().__init__()\n"
        "        # The reference's modules, so the harness copies its parameters in by name.\n"
        f"        {init_body.strip()}\n" + forward
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template mlp.py ({settings_line(settings)}).\n\n"
        "Row statistics, then GEMMs with fused epilogues (harness/suite/cpp_kit/gemm.py, blocks.py); the knobs\n"
        "are the #defines at the top of _SOURCE."
    )
    return module(doc, cpp, body)


# -- structure: the built-in operators' traced graphs (this template serves only its own operators) ----------
PATTERNS = [
    whole_graph("mlp_block", "layer_norm:layer_norm", "matmul:matmul", "unary:gelu", "matmul:matmul", "binary:add"),
    whole_graph(
        "transformer_ffn", "layer_norm:layer_norm", "matmul:matmul", "unary:gelu", "matmul:matmul", "binary:add"
    ),
    whole_graph(
        "rmsnorm_swiglu",
        "unary:square",
        "reduce:mean",
        "binary:add",
        "unary:rsqrt",
        "binary:mul",
        "binary:mul",
        "matmul:matmul",
        "unary:silu",
        "matmul:matmul",
        "binary:mul",
        "matmul:matmul",
        "binary:add",
    ),
]
