"""Add-and-norm template for the fused family: layer_norm(x + residual) * weight + bias, row by row.

More on it: docs/templates.md, "Template notes", templates/cpu/residual_layer_norm.
"""

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import PRELUDE, isa_define

FAMILY = "fused"
OPERATORS = ["residual_layer_norm"]
KNOBS = [
    {
        "name": "sum_buffer",
        "values": ["store", "recompute"],
        "default": "recompute",
        "layer": "memory_layout",
        "doc": "'store': the row's x + residual kept in scratch; 'recompute': re-added in each of the three passes",
    },
    {
        "name": "accumulate",
        "values": ["double", "float"],
        "default": "double",
        "layer": "instruction",
        "doc": "accumulator type of the row statistics for float32/bfloat16 inputs (float: twice the SIMD lanes)",
    },
    {
        "name": "vector_width",
        "values": [256, 512],
        "default": 256,
        "layer": "vectorization",
        "doc": "SIMD width the compiler prefers for the loops (-mprefer-vector-width), in bits",
    },
    {
        "name": "rows_per_task",
        "values": [1, 8, 64],
        "default": 1,
        "layer": "parallelization",
        "doc": "rows per OpenMP scheduling chunk",
    },
]

KERNEL = r"""
// ==== y = layer_norm(x + r) * w + b, per row ====================================================
template <class T> struct StatOf { typedef typename AccOf<T>::type type; };
#if KOPE_ACC_DOUBLE
template <> struct StatOf<float> { typedef double type; };
template <> struct StatOf<bf16> { typedef double type; };
#endif

template <class T>
static void residual_layer_norm(const T* x, const T* r, const T* w, const T* b, T* y, i64 rows, i64 n, double eps) {
    typedef typename AccOf<T>::type Acc;
    typedef typename StatOf<T>::type S;
    #pragma omp parallel for schedule(static, KOPE_ROWS)
    for (i64 row = 0; row < rows; ++row) {
        const T* xr = x + row * n;
        const T* rr = r + row * n;
        T* yr = y + row * n;
#if KOPE_STORE_SUM
        Acc* s = scratch<Acc, 6>(size_t(n));
        S sum = 0;
        #pragma omp simd reduction(+ : sum)
        for (i64 i = 0; i < n; ++i) {
            s[i] = rounded<T>(to_acc(xr[i]) + to_acc(rr[i]));
            sum += s[i];
        }
#define SUM_AT(i) s[i]
#else
#define SUM_AT(i) rounded<T>(to_acc(xr[i]) + to_acc(rr[i]))
        S sum = 0;
        #pragma omp simd reduction(+ : sum)
        for (i64 i = 0; i < n; ++i) sum += SUM_AT(i);
#endif
        const S mean = sum / S(n);
        S sq = 0;
        #pragma omp simd reduction(+ : sq)
        for (i64 i = 0; i < n; ++i) {
            const S d = S(SUM_AT(i)) - mean;
            sq += d * d;
        }
        const Acc rstd = Acc(1.0 / std::sqrt(double(sq) / double(n) + eps));
        const Acc m = Acc(mean);
        #pragma omp simd
        for (i64 i = 0; i < n; ++i) put(yr + i, (SUM_AT(i) - m) * rstd * to_acc(w[i]) + to_acc(b[i]));
#undef SUM_AT
    }
}
"""

ENTRY = entry_macro(
    "residual_layer_norm",
    "const PT* x, const PT* r, const PT* w, const PT* b, PT* y, int64_t rows, int64_t n, double eps",
    "residual_layer_norm(cptr<T>(x), cptr<T>(r), cptr<T>(w), cptr<T>(b), wptr<T>(y), rows, n, eps);",
)

BODY = """
class ModelNew(nn.Module):
    def __init__(self, hidden, dtype):
        super().__init__()
        # The reference's parameters, same names and creation order.
        dt = getattr(torch, dtype)
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(dt))
        self.bias = nn.Parameter((0.1 * torch.randn(hidden)).to(dt))

    def forward(self, x, residual):
        x, residual = x.contiguous(), residual.contiguous()
        n = x.shape[-1]
        y = torch.empty_like(x)
        _KERNELS[x.dtype](x, residual, self.weight.detach().contiguous(), self.bias.detach().contiguous(), y,
                          x.numel() // n, n, 1e-5)
        return y
"""


def render(operator: str, settings: dict) -> str:
    cpp = (
        isa_define("omp_simd")
        + f"#define KOPE_STORE_SUM {int(settings['sum_buffer'] == 'store')}  // sum_buffer={settings['sum_buffer']}\n"
        + f"#define KOPE_ACC_DOUBLE {int(settings['accumulate'] == 'double')}  // accumulate={settings['accumulate']}\n"
        + f"#define KOPE_ROWS {settings['rows_per_task']}  // rows_per_task={settings['rows_per_task']}\n"
        + PRELUDE
        + KERNEL
        + CASTS
        + ENTRY
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template residual_layer_norm.py "
        f"({settings_line(settings)}).\n\nEach row: sum, mean, two-pass variance and the affine normalisation by "
        "one thread, in cache\n(the knobs are the #defines at the top of _SOURCE and the compile flags)."
    )
    return module(doc, cpp, kernel_table("residual_layer_norm") + BODY, vector_width=settings["vector_width"])


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    body = """
x, residual = x.contiguous(), residual.contiguous()
n = x.shape[-1]
y = torch.empty_like(x)
_KERNELS[x.dtype](x, residual, weight.contiguous(), bias.contiguous(), y, x.numel() // n, n, float(eps))
return y
"""
    return Call(("x", "residual", "weight", "bias", "eps"), body)


def _last_dim(found: Found) -> str | None:
    shape = found.get("normalized_shape") or ()
    if len(shape) != 1 or found.shapes["x"] != found.shapes["residual"]:
        return "not a same-shape residual add normalised over the last dim"
    return None


PATTERNS = [
    pattern(
        "residual_layer_norm",
        ("binary:add", ["x", "residual"]),
        (
            "layer_norm:layer_norm",
            ["$0", "weight", "bias"],
            {"info": {"normalized_shape": "normalized_shape"}, "scalars": {"eps": "eps"}},
        ),
        call=_call,
        where=_last_dim,
        dtypes=("float32", "float64", "bfloat16"),
    )
]
