"""Attention template for the block family: sdpa_attention and multi_head_attention.

The attention core (``harness/suite/cpp_kit/attention.py``) runs both of its
products on the GEMM micro-kernel, a block of query rows at a time, either
keeping the block's scores against every key (two-pass) or streaming key
blocks with a running softmax (online, flash-attention style); causal masks
skip the key blocks past the diagonal. multi_head_attention adds the fused
QKV projection and the output projection (GEMM core, bias in the epilogue)
and reads the heads straight out of the QKV buffer by strides.

Knobs: ``algorithm``; ``micro_kernel`` and ``isa`` (the micro-kernel of both
products and of the projections); ``tiles`` (query rows x key block: BQxBK;
BK applies to the online algorithm); ``parallel`` ('bh': a thread per
(batch, head), 'bhq': per (batch, head, query block), dynamically scheduled
so causal blocks of unequal cost balance).
"""

from harness.suite.cpp_kit import attention as attn
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.blocks import BLOCKS
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC, PRELUDE, isa_define

FAMILY = "block"
OPERATORS = ["sdpa_attention", "multi_head_attention"]
KNOBS = [
    {"name": "algorithm", "values": ["two_pass", "online"], "default": "two_pass", "layer": "algorithm",
     "doc": attn.ALGORITHM_DOC},
    {"name": "micro_kernel", "values": ["4x1", "6x2", "8x3"], "default": "4x1", "layer": "instruction",
     "doc": core.MICRO_DOC},
    {"name": "isa", "values": ["omp_simd", "avx2", "avx512"], "default": "omp_simd", "layer": "vectorization",
     "doc": ISA_DOC},
    {"name": "tiles", "values": ["32x64", "64x128", "128x256"], "default": "32x64", "layer": "tiling",
     "doc": "BQxBK: query rows per block x keys per block (BK: online algorithm only)"},
    {"name": "parallel", "values": ["bh", "bhq"], "default": "bh", "layer": "parallelization",
     "doc": "OpenMP tasks: (batch, head) pairs, or (batch, head, query block) scheduled dynamically"},
]

ENTRIES = {
    "sdpa_attention": entry_macro(
        "sdpa",
        "const PT* q, const PT* k, const PT* v, PT* o, int64_t B, int64_t H, int64_t Lq, int64_t Lkv, int64_t D, "
        "int causal", """
AttnArgs<T> a{cptr<T>(q), cptr<T>(k), cptr<T>(v), wptr<T>(o), B, H, Lq, Lkv, D,
              H * Lq * D, Lq * D, D, H * Lkv * D, Lkv * D, D, H * Lkv * D, Lkv * D, D, H * Lq * D, Lq * D, D,
              causal, 1.0 / std::sqrt(double(D))};
attention(a);
"""),
    "multi_head_attention": entry_macro(
        "mha",
        "const PT* x, const PT* wqkv, const PT* bqkv, const PT* wout, const PT* bout, PT* y, int64_t B, int64_t L, "
        "int64_t Dm, int64_t H, int causal", """
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
"""),
}

MODELS = {
    "sdpa_attention": ("sdpa", "causal", """
        self.causal = causal""", """
    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        b, h, lq, d = q.shape
        o = torch.empty_like(q)
        _KERNELS[q.dtype](q, k, v, o, b, h, lq, k.shape[2], d, int(bool(self.causal)))
        return o
"""),
    "multi_head_attention": ("mha", "d_model, num_heads, causal, dtype", """
        # The reference's modules, so the harness copies its parameters in by name.
        self.num_heads = num_heads
        self.causal = causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.to(getattr(torch, dtype))""", """
    def forward(self, x):
        x = x.contiguous()
        b, t, d = x.shape
        y = torch.empty_like(x)
        p = [w.detach().contiguous() for w in (self.qkv.weight, self.qkv.bias, self.out.weight, self.out.bias)]
        _KERNELS[x.dtype](x, *p, y, b, t, d, self.num_heads, int(bool(self.causal)))
        return y
"""),
}


def render(operator: str, settings: dict) -> str:
    kernel, init_args, init_body, forward = MODELS[operator]
    cpp = (isa_define(settings["isa"])
           + core.defines(settings["micro_kernel"], "96x256x1024", True, "mn")
           + attn.defines(settings["algorithm"], settings["tiles"], settings["parallel"])
           + PRELUDE + core.GEMM + BLOCKS + attn.ATTENTION + CASTS + ENTRIES[operator])
    body = (kernel_table(kernel) + "\n\nclass ModelNew(nn.Module):\n"
            f"    def __init__(self, {init_args}):\n        super().__init__()\n        {init_body.strip()}\n" + forward)
    doc = (f"{operator} on the CPU, rendered from the kernel template attention.py ({settings_line(settings)}).\n\n"
           "Attention a block of query rows at a time, both products on the GEMM micro-kernel (see\n"
           "harness/suite/cpp_kit/attention.py); the knobs are the #defines at the top of _SOURCE.")
    return module(doc, cpp, body)
