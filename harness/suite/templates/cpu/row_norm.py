"""Row normalisations over the last dimension on the CPU: LayerNorm, RMSNorm, L2 normalisation.

More on it: docs/templates.md, "Template notes", templates/cpu/row_norm.
"""

from __future__ import annotations

from harness.structure.patterns import Call, Found, pattern
from harness.suite.templates.cpu._cpp_blocks import DTYPE_ENTRIES, DTYPES, HEADERS, candidate, describe, kernel_table
from harness.suite.templates.cpu._rows import (
    LANES_KNOB,
    SPLIT_KNOB,
    VECTOR_KNOB,
    Acc,
    fold,
    indent,
    moments,
    row_driver,
    row_knob_lines,
)

FAMILY = "normalization"
OPERATORS = ["layer_norm", "rms_norm", "l2_normalize"]
SUFFIXES = ["f32", "f64", "bf16", "f16"]

KNOBS = [
    {
        "name": "variance",
        "values": ["two_pass", "shifted", "welford"],
        "default": "two_pass",
        "layer": "algorithm",
        "doc": "layer_norm only: mean then squared deviations (two reads), shifted sums (one read, stable for large "
        "means), or Welford's online update per lane (one read, a division per step)",
        "operators": ["layer_norm"],  # rms_norm and l2_normalize only sum squares
    },
    {
        "name": "accumulate",
        "values": ["double", "float"],
        "default": "double",
        "layer": "algorithm",
        "doc": "statistics in double (float32/16-bit widened), or in the compute type (twice the SIMD lanes)",
    },
    LANES_KNOB,
    VECTOR_KNOB,
    SPLIT_KNOB,
]

ARGS = {  # operator -> (C++ parameter declarations, argument names) passed through to the hooks
    "layer_norm": (", const S* __restrict__ w, const S* __restrict__ b, double eps", ", w, b, eps"),
    "rms_norm": (", const S* __restrict__ w, double eps", ", w, eps"),
    "l2_normalize": (", double eps", ", eps"),
}


def _source(operator: str, s: dict) -> str:
    args, call = ARGS[operator]
    acc = "double" if s["accumulate"] == "double" else "C"
    if operator == "layer_norm":
        part = moments(s["variance"], s["lanes"], acc, args)
        emit = """    using A = typename PartT<C>::A;
    const A var = std::max(all.m2 / A(n), A(0));
    const C mean = C(all.mean), rstd = C(1.0 / std::sqrt(double(var) + eps));
    #pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = D::store((D::load(x[i]) - mean) * rstd * D::load(w[i]) + D::load(b[i]));"""
    else:
        part = f"""
// Statistics of a slice: the sum of squares.
template <typename C> struct PartT {{ using A = {acc}; A ss; }};

template <typename C>
static inline PartT<C> merge(const PartT<C>& a, const PartT<C>& b) {{ return PartT<C>{{a.ss + b.ss}}; }}

template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline PartT<C> part_of(const S* __restrict__ x, S* __restrict__ y, int64_t lo, int64_t hi{args}) {{
    using A = typename PartT<C>::A;
{indent(fold([Acc("ss", "A", "+", "A(v) * A(v)")], s["lanes"], "D::load(x[i])", "lo", "hi") + "return PartT<C>{ss};", 4)}}}
"""
        if operator == "rms_norm":
            emit = """    const C rstd = C(1.0 / std::sqrt(double(all.ss) / double(n) + eps));
    #pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = D::store(D::load(x[i]) * rstd * D::load(w[i]));"""
        else:
            emit = """    const C inv = C(1.0 / std::max(std::sqrt(double(all.ss)), eps));
    #pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = D::store(D::load(x[i]) * inv);"""
    emit_fn = f"""
// Write the slice [lo, hi) of the normalised row from the row's statistics.
template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline void emit(const S* __restrict__ x, S* __restrict__ y, int64_t lo, int64_t hi, int64_t n,
                        const PartT<C>& all, const PartT<C>& own{args}) {{
{emit}
}}
"""
    entries = []
    for suffix in SUFFIXES:
        trait, ctype, _ = DTYPE_ENTRIES[suffix]
        decl = args.replace("const S* __restrict__", f"const {ctype}*")
        entries.append(
            f'extern "C" void {operator}_{suffix}(const {ctype}* x, {ctype}* y, int64_t rows, int64_t n{decl}) '
            f"{{ run<{trait}>(x, y, rows, n{call}); }}"
        )
        if operator in MID_SCALE:
            entries.append(
                f'extern "C" void {operator}_mid_{suffix}(const {ctype}* x, {ctype}* y, int64_t outer, int64_t n, '
                f"int64_t inner, double eps) {{ run_mid<{trait}>(x, y, outer, n, inner, eps); }}"
            )
    mid = _mid_source(MID_SCALE[operator]) if operator in MID_SCALE else ""
    return (
        f"{HEADERS}#include <vector>\n{DTYPES}{part}{emit_fn}\n{row_driver(s['split_rows'], args, call, False)}\n"
        + mid
        + "\n".join(entries)
        + "\n"
    )


# The sum-of-squares norms over a dimension other than the last (no weight): the scale from the sum ``ss``.
MID_SCALE = {
    "rms_norm": "1.0 / std::sqrt(double(ss[i]) / double(n) + eps)",
    "l2_normalize": "1.0 / std::max(std::sqrt(double(ss[i])), eps)",
}


def _mid_source(scale: str) -> str:
    """``run_mid``: x viewed as (outer, n, inner), normalised over n in place of a transposed copy: blocks of IB
    contiguous inner positions, each sweep over n a contiguous SIMD update of IB sums of squares."""
    return f"""
// Over a middle dimension: x is (outer, n, inner), one scale per (o, i) from the squares of x[o, :, i].
template <typename D, typename C = typename D::C, typename S = typename D::S>
static void run_mid(const S* __restrict__ x, S* __restrict__ y, int64_t outer, int64_t n, int64_t inner,
                    double eps) {{
    using A = typename PartT<C>::A;
    constexpr int64_t IB = 256;
    const int64_t blocks = (inner + IB - 1) / IB;
    #pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < outer * blocks; ++t) {{
        const int64_t o = t / blocks, i0 = t % blocks * IB, m = std::min(IB, inner - i0);
        const S* __restrict__ xo = x + o * n * inner + i0;
        S* __restrict__ yo = y + o * n * inner + i0;
        A ss[IB];
        C sc[IB];
        for (int64_t i = 0; i < m; ++i) ss[i] = A(0);
        for (int64_t k = 0; k < n; ++k) {{
            const S* __restrict__ xk = xo + k * inner;
            #pragma omp simd
            for (int64_t i = 0; i < m; ++i) {{ const A v = A(D::load(xk[i])); ss[i] += v * v; }}
        }}
        for (int64_t i = 0; i < m; ++i) sc[i] = C({scale});
        for (int64_t k = 0; k < n; ++k) {{
            const S* __restrict__ xk = xo + k * inner;
            S* __restrict__ yk = yo + k * inner;
            #pragma omp simd
            for (int64_t i = 0; i < m; ++i) yk[i] = D::store(D::load(xk[i]) * sc[i]);
        }}
    }}
}}
"""


MODELS = {
    "layer_norm": """class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float, dtype: str):
        super().__init__()
        # The same module as the reference's, so the parameters have the same names and values.
        self.norm = nn.LayerNorm(hidden, eps=eps, dtype=getattr(torch, dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.norm.weight.detach().contiguous()
        b = self.norm.bias.detach().contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        _KERNELS[x.dtype](x, y, x.numel() // n, n, w, b, float(self.norm.eps))
        return y
""",
    "rms_norm": """class ModelNew(nn.Module):
    def __init__(self, hidden: int, dtype: str):
        super().__init__()
        self.eps = 1e-6
        self.weight = nn.Parameter((1.0 + 0.1 * torch.randn(hidden)).to(getattr(torch, dtype)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.weight.detach().contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        _KERNELS[x.dtype](x, y, x.numel() // n, n, w, self.eps)
        return y
""",
    "l2_normalize": """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.eps = 1e-12

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        _KERNELS[x.dtype](x, y, x.numel() // n, n, self.eps)
        return y
""",
}


def render(operator: str, settings: dict) -> str:
    s = settings
    variance = {
        "two_pass": "a mean sweep, then a squared-deviation sweep",
        "shifted": "one sweep of shifted sums (x - K, (x - K)^2), K the slice's first value",
        "welford": "one sweep of per-lane Welford updates, lanes merged with Chan's formula",
    }[s["variance"]]
    lines = [
        {
            "layer_norm": "layer_norm: y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension",
            "rms_norm": "rms_norm: y = x / sqrt(mean(x^2) + eps) * weight over the last dimension",
            "l2_normalize": "l2_normalize: y = x / max(||x||_2, eps) over the last dimension",
        }[operator],
        f"variance={s['variance']}: " + (variance if operator == "layer_norm" else "not used (only a sum of squares)"),
        f"accumulate={s['accumulate']}: statistics in "
        + ("double" if s["accumulate"] == "double" else "the compute type"),
        *row_knob_lines(s),
    ]
    return candidate(
        describe("row_norm", operator, s, lines),
        _source(operator, s),
        s["vector_width"],
        kernel_table("_KERNELS", operator, SUFFIXES)
        + ("\n" + kernel_table("_MID", f"{operator}_mid", SUFFIXES) if operator in MID_SCALE else ""),
        MODELS[operator],
    )


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _layer_norm_call(found: Found) -> Call:
    """LayerNorm over the trailing normalized_shape dims (one row = their product); absent affine: 1 and 0."""
    body = """
x = x.contiguous()
n = math.prod(normalized_shape)
w = weight.contiguous() if weight is not None else torch.ones(n, dtype=x.dtype)
b = bias.contiguous() if bias is not None else torch.zeros(n, dtype=x.dtype)
y = torch.empty_like(x)
_KERNELS[x.dtype](x, y, x.numel() // n, n, w, b, float(eps))
return y
"""
    return Call(("x", "weight", "bias", "normalized_shape", "eps"), body, imports=("math",))


# Over a dim other than the last (never weighted: _rms_where refuses that), x is read in place as
# (outer, n, inner) by the _MID kernels: no moved, contiguous copy of x and of y.
_MID_CALL = """dim = dim % x.dim()
x = x.contiguous()
y = torch.empty_like(x)
if dim != x.dim() - 1:
    _MID[x.dtype](x, y, math.prod(x.shape[:dim]), x.shape[dim], math.prod(x.shape[dim + 1 :]), float(eps))
    return y
n = x.shape[-1]
"""


def _rms_call(found: Found) -> Call:
    """RMS norm over one dim (the last: rows; another: the _MID kernel in place); no weight: 1."""
    body = (
        _MID_CALL
        + """w = weight.contiguous() if weight is not None else torch.ones(n, dtype=x.dtype)
_KERNELS[x.dtype](x, y, x.numel() // n, n, w, float(eps))
return y
"""
    )
    return Call(("x", "weight", "dim", "eps"), body, imports=("math",))


def _l2_call(found: Found) -> Call:
    body = (
        _MID_CALL
        + """_KERNELS[x.dtype](x, y, x.numel() // n, n, float(eps))
return y
"""
    )
    return Call(("x", "dim", "eps"), body, imports=("math",))


def _rms_where(found: Found) -> str | None:
    if not found.get("keepdim"):
        return "a mean without keepdim"
    dims: tuple[int, ...] = found.get("dims") or ()
    if len(dims) != 1:
        return "an RMS over several dims"
    rank = len(found.shapes["x"])
    if "weight" in found.tensors and dims[0] % rank != rank - 1:
        return "a weighted RMS norm over a dim other than the last"
    if "weight" in found.tensors and found.shapes.get("weight") != found.shapes["x"][-1:]:
        return f"an RMS weight of shape {found.shapes.get('weight')}"
    return None


def _l2_where(found: Found) -> str | None:
    dims = found.get("dims") or ()
    if len(dims) != 1 or not found.get("keepdim") or found.get("ord") not in (2, 2.0):
        return "not an L2 norm over one dim with keepdim"
    return None


_MEAN = {"static": {"keepdim": "keepdim"}, "info": {"dims": "dims"}, "scalars": {"dim": "dim"}}
_EPS = {"scalars": {"eps": "scalar"}}
_NORM = {"static": {"keepdim": "keepdim"}, "info": {"dims": "dims", "ord": "ord"}, "scalars": {"dim": "dim"}}
PATTERNS = [
    pattern(
        "layer_norm",
        (
            "layer_norm:layer_norm",
            ["x", "weight", "bias"],
            {"scalars": {"normalized_shape": "normalized_shape", "eps": "eps"}},
        ),
        call=_layer_norm_call,
    ),
    pattern(
        "layer_norm",
        ("layer_norm:layer_norm", ["x", "-", "-"], {"scalars": {"normalized_shape": "normalized_shape", "eps": "eps"}}),
        call=_layer_norm_call,
        roles=("x", "weight", "bias"),
    ),
    # x * rsqrt(mean(x^2) + eps) [* weight]: F.rms_norm's decomposition, and the same written out
    pattern(
        "rms_norm",
        ("unary:square", ["x"]),
        ("reduce:mean", ["$0"], _MEAN),
        ("binary:add", ["$1", "-"], _EPS),
        ("unary:rsqrt", ["$2"]),
        ("binary:mul", ["x", "$3"]),
        ("binary:mul", ["$4", "weight"]),
        call=_rms_call,
        where=_rms_where,
    ),
    pattern(
        "rms_norm",
        ("unary:square", ["x"]),
        ("reduce:mean", ["$0"], _MEAN),
        ("binary:add", ["$1", "-"], _EPS),
        ("unary:rsqrt", ["$2"]),
        ("binary:mul", ["x", "$3"]),
        call=_rms_call,
        where=_rms_where,
        roles=("x", "weight"),
    ),
    # x / sqrt(mean(x^2) + eps)
    pattern(
        "rms_norm",
        ("unary:square", ["x"]),
        ("reduce:mean", ["$0"], _MEAN),
        ("binary:add", ["$1", "-"], _EPS),
        ("unary:sqrt", ["$2"]),
        ("binary:div", ["x", "$3"]),
        call=_rms_call,
        where=_rms_where,
        roles=("x", "weight"),
    ),
    # F.normalize: x / clamp_min(norm(x), eps); and x / norm(x)
    pattern(
        "l2_normalize",
        ("reduce:norm", ["x"], _NORM),
        ("unary:clamp", ["$0"], {"scalars": {"eps": "min"}}),
        ("binary:div", ["x", "$1"]),
        call=_l2_call,
        where=_l2_where,
    ),
    pattern(
        "l2_normalize",
        ("reduce:norm", ["x"], _NORM),
        ("binary:div", ["x", "$0"]),
        call=lambda found: Call(_l2_call(found).params[:2], "eps = 0.0\n" + _l2_call(found).body, imports=("math",)),
        where=_l2_where,
    ),
]
