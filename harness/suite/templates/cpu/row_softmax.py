"""Row-wise softmax and log-softmax over the last dimension on the CPU.

More on it: docs/templates.md, "Template notes", templates/cpu/row_softmax.
"""

from __future__ import annotations

from harness.structure.patterns import Call, Found, last_dim_rows, pattern
from harness.suite.templates.cpu._cpp_blocks import (
    DTYPE_ENTRIES,
    DTYPES,
    HEADERS,
    candidate,
    describe,
    kernel_table,
    math_struct,
)
from harness.suite.templates.cpu._rows import (
    LANES_KNOB,
    SAME_SHAPE_MODEL,
    SPLIT_KNOB,
    VECTOR_KNOB,
    row_driver,
    row_knob_lines,
    softmax_stats,
)

FAMILY = "normalization"
OPERATORS = ["softmax", "log_softmax"]
SUFFIXES = ["f32", "f64", "bf16", "f16"]

KNOBS = [
    {
        "name": "algorithm",
        "values": ["two_pass", "online"],
        "default": "two_pass",
        "layer": "algorithm",
        "doc": "two_pass: separate sweeps for the row maximum and the exp-sum; online: one sweep computes both "
        "(chunk maxima, running sum rescaled), saving a read of the row",
    },
    {
        "name": "math",
        "values": ["libm", "poly"],
        "default": "libm",
        "layer": "algorithm",
        "doc": "exp from the C library (accurate, one call per element, scalar loops) or a vectorisable polynomial",
    },
    LANES_KNOB,
    VECTOR_KNOB,
    SPLIT_KNOB,
]


def _emit(operator: str, algorithm: str) -> str:
    if operator == "log_softmax":
        what, pre, value = ("y = x - (m + log s)", "const C lse = all.m + Math::log(all.s);", "D::load(x[i]) - lse")
    elif algorithm == "two_pass":
        what, pre, value = (
            "y holds exp(x - own.m): rescale it to exp(x - m) / s",
            "const C f = Math::exp(own.m - all.m) / all.s;",
            "D::load(y[i]) * f",
        )
    else:
        what, pre, value = (
            "y = exp(x - m) / s",
            "const C inv = C(1) / all.s;",
            "Math::exp(D::load(x[i]) - all.m) * inv",
        )
    return f"""
// Write the outputs of the slice [lo, hi) from the row's statistics ({what}).
template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline void emit(const S* __restrict__ x, S* __restrict__ y, int64_t lo, int64_t hi, int64_t n,
                        const PartT<C>& all, const PartT<C>& own) {{
    {pre}
    #pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = D::store({value});
}}
"""


def render(operator: str, settings: dict) -> str:
    s = settings
    store_exp = operator == "softmax" and s["algorithm"] == "two_pass"
    entries = "\n".join(
        f'extern "C" void {operator}_{suffix}(const {ctype}* x, {ctype}* y, int64_t rows, int64_t n) '
        f"{{ run<{trait}>(x, y, rows, n); }}"
        for suffix in SUFFIXES
        for trait, ctype, _ in [DTYPE_ENTRIES[suffix]]
    )
    source = (
        f"{HEADERS}#include <vector>\n{DTYPES}{math_struct(s['math'])}"
        f"{softmax_stats(s['algorithm'], s['lanes'], store_exp)}{_emit(operator, s['algorithm'])}\n"
        f"{row_driver(s['split_rows'], '', '', row_output=False)}\n{entries}\n"
    )
    passes = (
        "max sweep, exp-sum sweep" + (" (storing exp)" if store_exp else "") + ", write sweep"
        if s["algorithm"] == "two_pass"
        else "one max+exp-sum sweep (online, chunks rescaled), one write sweep"
    )
    lines = [
        f"{operator} over the last dimension; rows of n elements",
        f"algorithm={s['algorithm']}: {passes}",
        *row_knob_lines(s, math=True),
    ]
    return candidate(
        describe("row_softmax", operator, s, lines),
        source,
        s["vector_width"],
        kernel_table("_KERNELS", operator, SUFFIXES),
        SAME_SHAPE_MODEL,
    )


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    """Softmax over any one dim: that dim is moved last (a copy) when it is not last already."""
    before, after = last_dim_rows("x", "dim")
    body = (
        before
        + """y = torch.empty_like(x)
n = x.shape[-1]
_KERNELS[x.dtype](x, y, x.numel() // n, n)
"""
        + after
        + "return y\n"
    )
    return Call(("x", "dim"), body)


PATTERNS = [
    pattern(op, (f"softmax:{op}", ["x"], {"scalars": {"dim": "dim"}}), call=_call) for op in ("softmax", "log_softmax")
]
