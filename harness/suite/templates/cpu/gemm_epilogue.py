"""GEMM-with-epilogue template for the fused family: a GEMM whose output goes through an epilogue.

More on it: docs/templates.md, "Template notes", templates/cpu/gemm_epilogue.
"""

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC, PRELUDE, isa_define

FAMILY = "fused"
OPERATORS = ["gemm_bias_relu", "gemm_gelu_scale", "gemm_sigmoid_sum", "matmul_softmax"]
KNOBS = [
    {
        "name": "fusion",
        "values": ["separate", "fused"],
        "default": "separate",
        "layer": "fusion",
        "doc": "'separate': C to scratch, then the epilogue as its own pass; 'fused': the epilogue runs on each "
        "register tile as it leaves the micro-kernel",
    },
    core.knob("micro_kernel"),
    core.knob("isa", ISA_DOC),
    core.knob("tiles"),
    core.knob("parallel"),
]

EPILOGUES = r"""
// ==== epilogues =============================================================================
// relu(C + bias[j])
template <class Out> struct BiasRelu {
    typedef typename AccOf<Out>::type Acc;
    static constexpr bool rows_hook = false;
    Out* out; const Out* bias; i64 M, N;
    Acc* accumulator;
    void row(i64 b, i64 i, i64 j0, const Acc* v, i64 n) const {
        Out* o = out + (b * M + i) * N + j0;
        const Out* bb = bias + j0;
        #pragma omp simd
        for (i64 j = 0; j < n; ++j) {
            const Acc x = v[j] + to_acc(bb[j]);
            put(o + j, x > Acc(0) ? x : Acc(0));
        }
    }
    void rows_done(i64, i64, i64) const {}
};

// gelu(C + bias[j]) * scale, exact (erf) GELU
template <class Out> struct BiasGeluScale {
    typedef typename AccOf<Out>::type Acc;
    static constexpr bool rows_hook = false;
    Out* out; const Out* bias; i64 M, N; Acc scale;
    Acc* accumulator;
    void row(i64 b, i64 i, i64 j0, const Acc* v, i64 n) const {
        Out* o = out + (b * M + i) * N + j0;
        const Out* bb = bias + j0;
        #pragma omp simd
        for (i64 j = 0; j < n; ++j) put(o + j, fgelu(v[j] + to_acc(bb[j])) * scale);
    }
    void rows_done(i64, i64, i64) const {}
};

// out[i] = sum_j sigmoid(C + bias[j]): one partial sum per NR-wide piece, added once the row is complete
template <class Out> struct BiasSigmoidSum {
    typedef typename AccOf<Out>::type Acc;
    static constexpr bool rows_hook = true;
    static constexpr int NR = Geo<Acc>::NR;
    Out* out; const Out* bias; i64 M, N; Acc* partial;   // partial: batch * M * pieces
    Acc* accumulator;
    i64 pieces() const { return cdiv(N, NR); }
    void row(i64 b, i64 i, i64 j0, const Acc* v, i64 n) const {
        const Out* bb = bias + j0;
        Acc s = 0;
        #pragma omp simd reduction(+ : s)
        for (i64 j = 0; j < n; ++j) s += fsigmoid(v[j] + to_acc(bb[j]));
        partial[(b * M + i) * pieces() + j0 / NR] = s;
    }
    void rows_done(i64 b, i64 i0, i64 i1) const {
        for (i64 i = i0; i < i1; ++i) {
            const Acc* p = partial + (b * M + i) * pieces();
            Acc s = 0;
            for (i64 q = 0; q < pieces(); ++q) s += p[q];
            put(out + b * M + i, s);
        }
    }
};

// softmax_j(C / denom): rows are stored scaled in S (the output itself when it has the accumulator's
// type), then normalised once complete. Like the reference, a bfloat16 C is rounded before and after
// the division (scores of magnitude 30 lose 0.1 there, which softmax turns into a 10% change).
template <class Out> struct ScaleSoftmax {
    typedef typename AccOf<Out>::type Acc;
    static constexpr bool rows_hook = true;
    Out* out; Acc* S; i64 M, N; Acc denom;
    Acc* accumulator;
    void row(i64 b, i64 i, i64 j0, const Acc* v, i64 n) const {
        Acc* s = S + (b * M + i) * N + j0;
        #pragma omp simd
        for (i64 j = 0; j < n; ++j) s[j] = rounded<Out>(rounded<Out>(v[j]) / denom);
    }
    void rows_done(i64 b, i64 i0, i64 i1) const {
        for (i64 i = i0; i < i1; ++i) {
            Acc* s = S + (b * M + i) * N;
            Out* o = out + (b * M + i) * N;
            Acc mx = s[0];
            #pragma omp simd reduction(max : mx)
            for (i64 j = 0; j < N; ++j) mx = s[j] > mx ? s[j] : mx;
            Acc sum = 0;
            #pragma omp simd reduction(+ : sum)
            for (i64 j = 0; j < N; ++j) {
                const Acc e = fexp(s[j] - mx);
                s[j] = e;
                sum += e;
            }
            const Acc inv = Acc(1) / sum;
            #pragma omp simd
            for (i64 j = 0; j < N; ++j) put(o + j, s[j] * inv);
        }
    }
};
"""

_LINEAR_PARAMS = "const PT* x, const PT* w, const PT* bias, PT* y, int64_t M, int64_t N, int64_t K"
_LINEAR_OPERANDS = """
StridedA<T> A{{cptr<T>(x), K, 1, 0}};
StridedB<T> B{{cptr<T>(w), 1, K, 0}};
"""
ENTRIES = {
    "gemm_bias_relu": entry_macro(
        "gemm_bias_relu",
        _LINEAR_PARAMS + ", int fused",
        _LINEAR_OPERANDS
        + """
BiasRelu<T> epi{wptr<T>(y), cptr<T>(bias), M, N, acc_alias(wptr<T>(y))};
gemm(1, M, N, K, A, B, epi, fused != 0);
""",
    ),
    "gemm_gelu_scale": entry_macro(
        "gemm_gelu_scale",
        _LINEAR_PARAMS + ", double scale, int fused",
        _LINEAR_OPERANDS
        + """
typedef typename AccOf<T>::type Acc;
BiasGeluScale<T> epi{wptr<T>(y), cptr<T>(bias), M, N, Acc(scale), acc_alias(wptr<T>(y))};
gemm(1, M, N, K, A, B, epi, fused != 0);
""",
    ),
    "gemm_sigmoid_sum": entry_macro(
        "gemm_sigmoid_sum",
        _LINEAR_PARAMS + ", int fused",
        _LINEAR_OPERANDS
        + """
typedef typename AccOf<T>::type Acc;
std::vector<Acc> partial(static_cast<size_t>(M * cdiv(N, Geo<Acc>::NR)));
BiasSigmoidSum<T> epi{wptr<T>(y), cptr<T>(bias), M, N, partial.data(), nullptr};
gemm(1, M, N, K, A, B, epi, fused != 0);
""",
    ),
    "matmul_softmax": entry_macro(
        "matmul_softmax",
        "const PT* q, const PT* k, PT* y, int64_t batch, int64_t M, int64_t N, int64_t D, double denom, int fused",
        """
typedef typename AccOf<T>::type Acc;
StridedA<T> A{{cptr<T>(q), D, 1, M * D}};
StridedB<T> B{{cptr<T>(k), 1, D, N * D}};
std::vector<Acc> scores;
Acc* S = acc_alias(wptr<T>(y));
if (S == nullptr) {
    scores.resize(static_cast<size_t>(batch * M * N));
    S = scores.data();
}
ScaleSoftmax<T> epi{wptr<T>(y), S, M, N, Acc(denom), S};
gemm(batch, M, N, D, A, B, epi, fused != 0);
""",
    ),
}

_LINEAR_FORWARD = """
    def forward(self, x):
        x = x.contiguous()
        w = {weight}.detach().contiguous()  # (out, in): B[k, j] = w[j * in + k]
        bias = {bias}.detach().contiguous()
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty({out_shape}, dtype=x.dtype)
        _KERNELS[x.dtype](x, w, bias, y, m, n, k{extra}, _FUSED)
        return y
"""
MODELS = {
    "gemm_bias_relu": (
        "in_features, out_features, dtype",
        """
        dtype = getattr(torch, dtype)
        self.gemm = nn.Linear(in_features, out_features, bias=False, dtype=dtype)
        self.bias = nn.Parameter(torch.randn(out_features, dtype=dtype))""",
        _LINEAR_FORWARD.format(weight="self.gemm.weight", bias="self.bias", out_shape="m, n", extra=""),
    ),
    "gemm_gelu_scale": (
        "in_features, out_features, scale, dtype",
        """
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))
        self.scale = scale""",
        _LINEAR_FORWARD.format(
            weight="self.fc.weight", bias="self.fc.bias", out_shape="m, n", extra=", float(self.scale)"
        ),
    ),
    "gemm_sigmoid_sum": (
        "in_features, out_features, dtype",
        """
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))""",
        _LINEAR_FORWARD.format(weight="self.fc.weight", bias="self.fc.bias", out_shape="m, 1", extra=""),
    ),
    "matmul_softmax": (
        "",
        "pass",
        """
    def forward(self, q, k):
        q, k = q.contiguous(), k.contiguous()
        batch, m, d = q.shape
        n = k.shape[1]
        y = torch.empty(batch, m, n, dtype=q.dtype)
        _KERNELS[q.dtype](q, k, y, batch, m, n, d, math.sqrt(d), _FUSED)
        return y
""",
    ),
}


def render(operator: str, settings: dict) -> str:
    cpp = (
        isa_define(settings["isa"])
        + core.defines(settings["micro_kernel"], settings["tiles"], True, settings["parallel"])
        + PRELUDE
        + core.GEMM
        + EPILOGUES
        + CASTS
        + ENTRIES[operator]
    )
    init_args, init_body, forward = MODELS[operator]
    args = f", {init_args}" if init_args else ""
    body = (
        kernel_table(operator) + f"_FUSED = {int(settings['fusion'] == 'fused')}  # fusion={settings['fusion']}\n"
        "\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__(self{args}):\n        super().__init__()\n        {init_body.strip()}\n" + forward
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template gemm_epilogue.py "
        f"({settings_line(settings)}).\n\n{core.SUMMARY}\nThe epilogue is a struct the GEMM hands each finished "
        "row piece to (see EPILOGUES in the source)."
    )
    return module(doc, cpp, body, extra_imports="import math\n" if operator == "matmul_softmax" else "")


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _linear_call(
    extra: str = "", params: tuple[str, ...] = (), out: str = "y.reshape(*x.shape[:-1], n)", cols: str = "n"
) -> Call:
    """x (..., k) @ weight (n, k)^T + bias through the fused epilogue; leading dims of x are rows."""
    body = f"""
x2 = x.reshape(-1, x.shape[-1]).contiguous()
w = weight.contiguous()
m, k = x2.shape
n = w.shape[0]
b = bias.reshape(-1).contiguous() if bias is not None else torch.zeros(n, dtype=x.dtype)
y = torch.empty(m, {cols}, dtype=x.dtype)
_KERNELS[x.dtype](x2, w, b, y, m, n, k{extra}, _FUSED)
return {out}
"""
    return Call(("x", "weight", "bias", *params), body)


def _linear_where(found: Found) -> str | None:
    w, b = found.shapes.get("weight", ()), found.shapes.get("bias")
    if len(w) != 2 or (b is not None and b not in ((w[0],), (1, w[0]))):
        return f"weight {w} / bias {b} are not a linear layer's"
    return None


def _sum_where(found: Found) -> str | None:
    why = _linear_where(found)
    if why:
        return why
    dims: tuple[int, ...] = found.get("dims") or ()
    if len(found.shapes["x"]) != 2 or len(dims) != 1 or dims[0] % 2 != 1:
        return "a sum over other than the output features of a 2-D linear layer"
    return None


def _softmax_where(found: Found) -> str | None:
    q, k = found.shapes.get("q", ()), found.shapes.get("k", ())
    if len(q) != 3 or len(k) != 3 or found.get("dim") not in (-1, 2):
        return "not a batched q @ k^T scaled softmax over the last dim"
    return None


_DT = ("float32", "float64", "bfloat16")
_BIAS_RELU = _linear_call()
_SUM = {"static": {"keepdim": "keepdim"}, "info": {"dims": "dims"}}
PATTERNS = [
    # relu(x @ W^T + b): a bias-free linear layer and a separate bias, or the layer's own bias
    pattern(
        "gemm_bias_relu",
        ("matmul", ["x", "weight^T", "-"]),
        ("binary:add", ["$0", "bias"]),
        ("unary:relu", ["$1"]),
        call=lambda found: _BIAS_RELU,
        where=_linear_where,
        dtypes=_DT,
    ),
    pattern(
        "gemm_bias_relu",
        ("matmul", ["x", "weight^T", "bias"]),
        ("unary:relu", ["$0"]),
        call=lambda found: _BIAS_RELU,
        where=_linear_where,
        dtypes=_DT,
    ),
    pattern(
        "gemm_gelu_scale",
        ("matmul", ["x", "weight^T", "bias"]),
        ("unary:gelu", ["$0"]),
        ("binary:mul", ["$1", "-"], {"scalars": {"scale": "scalar"}}),
        call=lambda found: _linear_call(", float(scale)", ("scale",)),
        where=_linear_where,
        dtypes=_DT,
    ),
    pattern(
        "gemm_sigmoid_sum",
        ("matmul", ["x", "weight^T", "bias"]),
        ("unary:sigmoid", ["$0"]),
        ("reduce:sum", ["$1"], _SUM),
        call=lambda found: _linear_call("", (), "y" if found.get("keepdim") else "y.reshape(-1)", "1"),
        where=_sum_where,
        dtypes=_DT,
    ),
    pattern(
        "matmul_softmax",
        ("matmul", ["q", "k^T", "-"]),
        ("binary:div", ["$0", "-"], {"scalars": {"denom": "scalar"}}),
        ("softmax:softmax", ["$1"], {"static": {"dim": "dim"}}),
        call=lambda found: Call(
            ("q", "k", "denom"),
            """
q, k = q.contiguous(), k.contiguous()
batch, m, d = q.shape
n = k.shape[1]
y = torch.empty(batch, m, n, dtype=q.dtype)
_KERNELS[q.dtype](q, k, y, batch, m, n, d, float(denom), _FUSED)
return y
""",
        ),
        where=_softmax_where,
        dtypes=_DT,
    ),
]
