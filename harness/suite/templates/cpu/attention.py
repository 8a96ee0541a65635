"""Attention template for the block family: sdpa_attention, multi_head_attention and transformer_layer.

More on it: docs/templates.md, "Template notes", templates/cpu/attention.
"""

from harness.structure.patterns import whole_graph
from harness.suite.cpp_kit import attention as attn
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.blocks import BLOCKS
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC, PRELUDE, isa_define

FAMILY = "block"
OPERATORS = ["sdpa_attention", "multi_head_attention", "transformer_layer"]
KNOBS = [
    {
        "name": "algorithm",
        "values": ["two_pass", "online"],
        "default": "two_pass",
        "layer": "algorithm",
        "doc": attn.ALGORITHM_DOC,
    },
    core.knob("micro_kernel"),
    core.knob("isa", ISA_DOC),
    {
        "name": "tiles",
        "values": ["32x64", "64x128", "128x256"],
        "default": "32x64",
        "layer": "tiling",
        "doc": "BQxBK: query rows per block x keys per block (BK: online algorithm only)",
    },
    {
        "name": "parallel",
        "values": ["bh", "bhq"],
        "default": "bh",
        "layer": "parallelization",
        "doc": "OpenMP tasks: (batch, head) pairs, or (batch, head, query block) scheduled dynamically",
    },
]

ENTRIES = {
    "sdpa_attention": entry_macro(
        "sdpa",
        "const PT* q, const PT* k, const PT* v, PT* o, int64_t B, int64_t H, int64_t Lq, int64_t Lkv, int64_t D, "
        "int causal",
        """
AttnArgs<T> a{cptr<T>(q), cptr<T>(k), cptr<T>(v), wptr<T>(o), B, H, Lq, Lkv, D,
              H * Lq * D, Lq * D, D, H * Lkv * D, Lkv * D, D, H * Lkv * D, Lkv * D, D, H * Lq * D, Lq * D, D,
              causal, 1.0 / std::sqrt(double(D))};
attention(a);
""",
    ),
    "multi_head_attention": entry_macro(
        "mha",
        "const PT* x, const PT* wqkv, const PT* bqkv, const PT* wout, const PT* bout, PT* y, int64_t B, int64_t L, "
        "int64_t Dm, int64_t H, int causal",
        """
T* qkv = scratch<T, 20>(static_cast<size_t>(B * L * 3 * Dm));
T* heads = scratch<T, 21>(static_cast<size_t>(B * L * Dm));
const T* none = nullptr;
linear<EPI_STORE>(cptr<T>(x), cptr<T>(wqkv), cptr<T>(bqkv), none, qkv, B * L, 3 * Dm, Dm, true);
const i64 Dh = Dm / H;
AttnArgs<T> a{qkv, qkv + Dm, qkv + 2 * Dm, heads, B, H, L, L, Dh,
              L * 3 * Dm, Dh, 3 * Dm, L * 3 * Dm, Dh, 3 * Dm, L * 3 * Dm, Dh, 3 * Dm, L * Dm, Dh, Dm,
              causal, 1.0 / std::sqrt(double(Dh))};
attention(a);
linear<EPI_STORE>(heads, cptr<T>(wout), cptr<T>(bout), none, wptr<T>(y), B * L, Dm, Dm, true);
""",
    ),
}

ENTRIES["transformer_layer"] = entry_macro(
    "transformer_layer",
    "const PT* x, const PT* ln1_w, const PT* ln1_b, const PT* wqkv, const PT* bqkv, const PT* wproj, const PT* bproj, "
    "const PT* ln2_w, const PT* ln2_b, const PT* w1, const PT* b1, const PT* w2, const PT* b2, PT* y, int64_t B, "
    "int64_t L, int64_t Dm, int64_t H",
    """
typedef typename AccOf<T>::type Acc;
const i64 rows = B * L, Dh = Dm / H;
Acc* mean = scratch<Acc, 10>(static_cast<size_t>(rows));
Acc* rstd = scratch<Acc, 11>(static_cast<size_t>(rows));
T* qkv = scratch<T, 20>(static_cast<size_t>(rows * 3 * Dm));
T* heads = scratch<T, 21>(static_cast<size_t>(rows * Dm));
T* h = scratch<T, 12>(static_cast<size_t>(rows * Dm));
T* ff = scratch<T, 13>(static_cast<size_t>(rows * 4 * Dm));
const T* none = nullptr;
row_stats(cptr<T>(x), rows, Dm, 1e-5, false, mean, rstd);
NormA<T> n1{cptr<T>(x), Dm, mean, rstd, cptr<T>(ln1_w), cptr<T>(ln1_b)};
linear_from<EPI_STORE>(n1, cptr<T>(wqkv), cptr<T>(bqkv), none, qkv, rows, 3 * Dm, Dm, true);
AttnArgs<T> a{qkv, qkv + Dm, qkv + 2 * Dm, heads, B, H, L, L, Dh,
              L * 3 * Dm, Dh, 3 * Dm, L * 3 * Dm, Dh, 3 * Dm, L * 3 * Dm, Dh, 3 * Dm, L * Dm, Dh, Dm,
              1, 1.0 / std::sqrt(double(Dh))};
attention(a);
linear<EPI_RESIDUAL>(heads, cptr<T>(wproj), cptr<T>(bproj), cptr<T>(x), h, rows, Dm, Dm, true);
row_stats(h, rows, Dm, 1e-5, false, mean, rstd);
NormA<T> n2{h, Dm, mean, rstd, cptr<T>(ln2_w), cptr<T>(ln2_b)};
linear_from<EPI_GELU>(n2, cptr<T>(w1), cptr<T>(b1), none, ff, rows, 4 * Dm, Dm, true);
linear<EPI_RESIDUAL>(ff, cptr<T>(w2), cptr<T>(b2), h, wptr<T>(y), rows, Dm, 4 * Dm, true);
""",
)

MODELS = {
    "sdpa_attention": (
        "sdpa",
        "causal",
        """
        self.causal = causal""",
        """
    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        b, h, lq, d = q.shape
        o = torch.empty_like(q)
        _KERNELS[q.dtype](q, k, v, o, b, h, lq, k.shape[2], d, int(bool(self.causal)))
        return o
""",
    ),
    "multi_head_attention": (
        "mha",
        "d_model, num_heads, causal, dtype",
        """
        # The reference's modules, so the harness copies its parameters in by name.
        self.num_heads = num_heads
        self.causal = causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.to(getattr(torch, dtype))""",
        """
    def forward(self, x):
        x = x.contiguous()
        b, t, d = x.shape
        y = torch.empty_like(x)
        p = [w.detach().contiguous() for w in (self.qkv.weight, self.qkv.bias, self.out.weight, self.out.bias)]
        _KERNELS[x.dtype](x, *p, y, b, t, d, self.num_heads, int(bool(self.causal)))
        return y
""",
    ),
    "transformer_layer": (
        "transformer_layer",
        "d_model, num_heads, dtype",
        """
        # The reference's modules, so the harness copies its parameters in by name.
        self.num_heads = num_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)
        self.to(getattr(torch, dtype))""",
        """
    def forward(self, x):
        x = x.contiguous()
        b, t, d = x.shape
        y = torch.empty_like(x)
        modules = (self.ln1, self.qkv, self.proj, self.ln2, self.fc1, self.fc2)
        p = [w.detach().contiguous() for m in modules for w in (m.weight, m.bias)]
        _KERNELS[x.dtype](x, *p, y, b, t, d, self.num_heads)
        return y
""",
    ),
}


def render(operator: str, settings: dict) -> str:
    kernel, init_args, init_body, forward = MODELS[operator]
    cpp = (
        isa_define(settings["isa"])
        + core.defines(settings["micro_kernel"], "auto", True, "grid")  # the projections' GEMMs
        + attn.defines(
            settings["algorithm"], settings["tiles"], settings["parallel"], round_p=operator != "sdpa_attention"
        )
        + PRELUDE
        + core.GEMM
        + BLOCKS
        + attn.ATTENTION
        + CASTS
        + ENTRIES[operator]
    )
    body = (
        kernel_table(kernel) + "\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__(self, {init_args}):\n        super().__init__()\n        {init_body.strip()}\n" + forward
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template attention.py ({settings_line(settings)}).\n\n"
        "Attention a block of query rows at a time, both products on the GEMM micro-kernel (see\n"
        "harness/suite/cpp_kit/attention.py); the knobs are the #defines at the top of _SOURCE."
    )
    return module(doc, cpp, body)


# -- structure: the built-in operators' traced graphs (this template serves only its own operators) ----------
PATTERNS = [
    whole_graph("sdpa_attention", "sdpa:sdpa"),
    whole_graph(
        "multi_head_attention",
        "matmul:matmul",
        "view:view",
        "view:permute",
        "other:aten.unbind.int",
        "sdpa:sdpa",
        "view:transpose",
        "view:view",
        "matmul:matmul",
    ),
    whole_graph(
        "transformer_layer",
        "layer_norm:layer_norm",
        "matmul:matmul",
        "view:view",
        "view:permute",
        "other:aten.unbind.int",
        "sdpa:sdpa",
        "view:transpose",
        "view:view",
        "matmul:matmul",
        "binary:add",
        "layer_norm:layer_norm",
        "matmul:matmul",
        "unary:gelu",
        "matmul:matmul",
        "binary:add",
    ),
]
