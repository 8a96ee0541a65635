"""log(sum(exp(x))) over the last dimension on the CPU, computed stably as m + log(sum(exp(x - m))).

More on it: docs/templates.md, "Template notes", templates/cpu/row_logsumexp.
"""

from __future__ import annotations

from harness.structure.patterns import Call, Found, pattern
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
    SPLIT_KNOB,
    VECTOR_KNOB,
    row_driver,
    row_knob_lines,
    softmax_stats,
)

FAMILY = "reduction"
OPERATORS = ["logsumexp"]
SUFFIXES = ["f32", "f64", "bf16", "f16"]

KNOBS = [
    {
        "name": "algorithm",
        "values": ["two_pass", "online"],
        "default": "two_pass",
        "layer": "algorithm",
        "doc": "two_pass: a sweep for the row maximum, then one for the exp-sum; online: one sweep for both "
        "(chunk maxima, running sum rescaled), reading the row once",
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

EMIT = """
// One output per row: m + log(s).
template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline void emit(const S* __restrict__ x, S* __restrict__ y, int64_t lo, int64_t hi, int64_t n,
                        const PartT<C>& all, const PartT<C>& own) {
    y[0] = D::store(all.m + Math::log(all.s));
}
"""


def render(operator: str, settings: dict) -> str:
    s = settings
    entries = "\n".join(
        f'extern "C" void logsumexp_{suffix}(const {ctype}* x, {ctype}* y, int64_t rows, int64_t n) '
        f"{{ run<{trait}>(x, y, rows, n); }}"
        for suffix in SUFFIXES
        for trait, ctype, _ in [DTYPE_ENTRIES[suffix]]
    )
    source = (
        f"{HEADERS}#include <vector>\n{DTYPES}{math_struct(s['math'])}{softmax_stats(s['algorithm'], s['lanes'], False)}"
        f"{EMIT}\n{row_driver(s['split_rows'], '', '', row_output=True)}\n{entries}\n"
    )
    lines = [
        "logsumexp over the last dimension: m + log(sum(exp(x - m))), m the row maximum",
        f"algorithm={s['algorithm']}: "
        + (
            "a max sweep, then an exp-sum sweep"
            if s["algorithm"] == "two_pass"
            else "one sweep (online: chunk maxima, running sum rescaled)"
        ),
        *row_knob_lines(s, math=True),
    ]
    model = """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[-1]
        y = torch.empty(x.shape[:-1], dtype=x.dtype)
        _KERNELS[x.dtype](x, y, x.numel() // n, n)
        return y
"""
    return candidate(
        describe("row_logsumexp", operator, s, lines),
        source,
        s["vector_width"],
        kernel_table("_KERNELS", operator, SUFFIXES),
        model,
    )


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    """logsumexp over any one dim (moved last, a copy, when it is not last); keepdim as traced."""
    keep = bool(found.get("keepdim"))
    body = f"""
dim = dim % x.dim()
shape = list(x.shape)
x = x.movedim(dim, -1).contiguous()
n = x.shape[-1]
y = torch.empty(x.shape[:-1], dtype=x.dtype)
_KERNELS[x.dtype](x, y, x.numel() // n, n)
if {keep}:
    shape[dim] = 1
    y = y.reshape(shape)
return y
"""
    return Call(("x", "dim"), body)


def _one_dim(found: Found) -> str | None:
    dims = found.get("dims")
    return None if dims is not None and len(dims) == 1 else "logsumexp over several dims"


PATTERNS = [
    pattern(
        "logsumexp",
        (
            "reduce:logsumexp",
            ["x"],
            {"scalars": {"dim": "dim"}, "static": {"keepdim": "keepdim"}, "info": {"dims": "dims"}},
        ),
        call=_call,
        where=_one_dim,
    )
]
