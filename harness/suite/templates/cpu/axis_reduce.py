"""Reductions over one dimension (sum, mean, max, argmax, L2 norm) on the CPU.

More on it: docs/templates.md, "Template notes", templates/cpu/axis_reduce.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.structure.patterns import Call, Found, pattern
from harness.suite.templates.cpu._cpp_blocks import DTYPE_ENTRIES, DTYPES, HEADERS, candidate, describe, kernel_table
from harness.suite.templates.cpu._rows import Acc, fold, indent

FAMILY = "reduction"


class Fold(NamedTuple):
    sum: bool  # a sum of map(v) (the `accumulate` knob applies), else a maximum
    square: bool  # sum of squares
    finish: str  # the accumulator a (double for sums, C for max) and R -> the output value in C


FOLDS = {
    "sum_dim": Fold(True, False, "C(a)"),
    "mean_dim": Fold(True, False, "C(a / double(R))"),
    "vector_norm": Fold(True, True, "C(std::sqrt(a))"),
    "max_dim": Fold(False, False, "a"),
}
OPERATORS = ["sum_dim", "mean_dim", "max_dim", "argmax_dim", "vector_norm"]
SUFFIXES = ["f32", "f64", "bf16", "f16"]
BLOCK = 4096  # accumulate=float: values (contiguous) or rows (strided) summed in float before a double add
PREFETCH_ROWS = 8

KNOBS = [
    {
        "name": "lanes",
        "values": [1, 16, 64],
        "default": 1,
        "layer": "unrolling",
        "doc": "independent partial results per contiguous row (1: one omp-simd reduction; argmax: a scalar loop); "
        "more lanes hide the add/compare latency",
    },
    {
        "name": "accumulate",
        "values": ["double", "float"],
        "default": "double",
        "layer": "algorithm",
        "doc": "sums: double accumulators throughout, or the compute type (float for float32/16-bit: twice the SIMD "
        f"lanes, no conversions) within blocks of {BLOCK} values whose totals are added in double",
        "operators": ["sum_dim", "mean_dim", "vector_norm"],  # max_dim and argmax_dim compare, they do not sum
    },
    {
        "name": "tile",
        "values": [512, 128, 2048],
        "default": 512,
        "layer": "tiling",
        "doc": "columns per work item when the reduced dimension is not the last (the accumulator tile stays in L1)",
    },
    {
        "name": "schedule",
        "values": ["static", "dynamic"],
        "default": "static",
        "layer": "scheduling",
        "doc": "OpenMP schedule of rows / column tiles over the threads (dynamic hands out chunks of ~16K elements)",
    },
    {
        "name": "vector_width",
        "values": [256, 512],
        "default": 256,
        "layer": "instruction",
        "doc": "SIMD width the compiler prefers (a guarded GCC target pragma); 512 takes effect only with AVX-512",
    },
    {
        "name": "prefetch",
        "values": ["off", "on"],
        "default": "off",
        "layer": "memory_layout",
        "doc": "software-prefetch the tile 8 rows ahead in the strided (not-last-dimension) kernel",
    },
]


def _schedule(s: dict, chunk: str) -> str:
    return "schedule(static)" if s["schedule"] == "static" else f"schedule(dynamic, {chunk})"


def _fold_source(f: Fold, s: dict) -> str:
    blocked = f.sum and s["accumulate"] == "float"  # float partial sums per block, blocks added in double
    t = "C" if blocked or not f.sum else "double"  # the type the inner loops accumulate in
    acc = "double" if f.sum else "C"  # the type of the finished accumulator `a`
    term = (f"{t}(v) * {t}(v)" if f.square else f"{t}(v)") if f.sum else "v"
    inner = Acc("a", t, "+" if f.sum else "max", term)
    if blocked:
        row = (
            f"double total = 0.0;\n"
            f"for (int64_t b0 = 0; b0 < R; b0 += {BLOCK}) {{  // float sums per block, blocks added in double\n"
            f"    const int64_t b1 = std::min<int64_t>(R, b0 + {BLOCK});\n"
            + indent(fold([inner], s["lanes"], "D::load(p[i])", "b0", "b1") + "total += double(a);", 4)
            + "}\nreturn total;"
        )
    else:
        row = fold([inner], s["lanes"], "D::load(p[i])", "0", "R") + "return a;"
    update = inner.update("part[i]")
    if blocked:
        strided = f"""double acc[{s["tile"]}];
C part[{s["tile"]}];
for (int64_t i = 0; i < len; ++i) acc[i] = 0.0;
for (int64_t r0 = 0; r0 < R; r0 += {BLOCK}) {{  // float sums over blocks of rows, added in double
    const int64_t r1 = std::min<int64_t>(R, r0 + {BLOCK});
    for (int64_t i = 0; i < len; ++i) part[i] = 0;
    for (int64_t r = r0; r < r1; ++r) {{
        const S* __restrict__ row = x + (o * R + r) * inner + i0;
{_prefetch(s, 8)}        #pragma omp simd
        for (int64_t i = 0; i < len; ++i) {{
            const C v = D::load(row[i]);
            {update}
        }}
    }}
    for (int64_t i = 0; i < len; ++i) acc[i] += double(part[i]);
}}"""
    else:
        strided = f"""{t} part[{s["tile"]}];
for (int64_t i = 0; i < len; ++i) part[i] = {inner.init};
for (int64_t r = 0; r < R; ++r) {{
    const S* __restrict__ row = x + (o * R + r) * inner + i0;
{_prefetch(s, 4)}    #pragma omp simd
    for (int64_t i = 0; i < len; ++i) {{
        const C v = D::load(row[i]);
        {update}
    }}
}}
const {t}* acc = part;"""
    how = ("one omp-simd reduction" if s["lanes"] == 1 else f"{s['lanes']} partial results") + (
        f", float sums per {BLOCK}-value block added in double" if blocked else ""
    )
    return f"""
// One contiguous row of R values -> its accumulator ({how}).
template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline {acc} fold_row(const S* __restrict__ p, int64_t R) {{
{indent(row, 4)}}}

template <typename D, typename C = typename D::C, typename S = typename D::S>
static void reduce(const S* __restrict__ x, S* __restrict__ y, int64_t outer, int64_t R, int64_t inner) {{
    if (inner == 1) {{
        #pragma omp parallel for {_schedule(s, "std::max<int64_t>(1, 16384 / R)")}
        for (int64_t o = 0; o < outer; ++o) {{
            const {acc} a = fold_row<D>(x + o * R, R);
            y[o] = D::store({f.finish});
        }}
        return;
    }}
    const int64_t tiles = (inner + {s["tile"]} - 1) / {s["tile"]};
    #pragma omp parallel for collapse(2) {_schedule(s, "std::max<int64_t>(1, 16384 / (R * " + str(s["tile"]) + "))")}
    for (int64_t o = 0; o < outer; ++o) {{
        for (int64_t t = 0; t < tiles; ++t) {{
            const int64_t i0 = t * {s["tile"]};
            const int64_t len = std::min<int64_t>({s["tile"]}, inner - i0);
{indent(strided, 12)}            S* __restrict__ out = y + o * inner + i0;
            for (int64_t i = 0; i < len; ++i) {{
                const {acc} a = acc[i];
                out[i] = D::store({f.finish});
            }}
        }}
    }}
}}
"""


def _prefetch(s: dict, spaces: int) -> str:
    """Statements prefetching the tile PREFETCH_ROWS rows ahead of `row` (strided kernels), indented."""
    if s["prefetch"] == "off":
        return ""
    return indent(
        f"if (r + {PREFETCH_ROWS} < R)  // the same tile {PREFETCH_ROWS} rows ahead, one prefetch per cache line\n"
        f"    for (int64_t i = 0; i < len; i += 64 / int64_t(sizeof(S))) __builtin_prefetch(row + {PREFETCH_ROWS} * inner + i);",
        spaces,
    )


def _argmax_source(s: dict) -> str:
    L = s["lanes"]
    if L == 1:
        row = """    C best = D::load(p[0]);
    int64_t arg = 0;
    for (int64_t r = 1; r < R; ++r) {
        const C v = D::load(p[r]);
        if (v > best) { best = v; arg = r; }
    }
    return arg;"""
    else:
        row = f"""    C best[{L}];
    int64_t arg[{L}];
    for (int l = 0; l < {L}; ++l) {{ best[l] = -std::numeric_limits<C>::infinity(); arg[l] = 0; }}
    int64_t r = 0;
    for (; r + {L} <= R; r += {L}) {{
        #pragma omp simd
        for (int l = 0; l < {L}; ++l) {{
            const C v = D::load(p[r + l]);
            const bool gt = v > best[l];
            best[l] = gt ? v : best[l];
            arg[l] = gt ? r + l : arg[l];
        }}
    }}
    for (; r < R; ++r) {{  // the tail goes to lane 0 (its indices are the largest, so ties keep earlier ones)
        const C v = D::load(p[r]);
        if (v > best[0]) {{ best[0] = v; arg[0] = r; }}
    }}
    C b = best[0];
    int64_t a = arg[0];
    for (int l = 1; l < {L}; ++l)  // the largest value; among equal ones, the first index
        if (best[l] > b || (best[l] == b && arg[l] < a)) {{ b = best[l]; a = arg[l]; }}
    return a;"""
    return f"""
// One contiguous row of R values -> the index of its first maximum ({"a scalar loop" if L == 1 else f"{L} lanes"}).
template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline int64_t argmax_row(const S* __restrict__ p, int64_t R) {{
{row}
}}

template <typename D, typename C = typename D::C, typename S = typename D::S>
static void reduce(const S* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t R, int64_t inner) {{
    if (inner == 1) {{
        #pragma omp parallel for {_schedule(s, "std::max<int64_t>(1, 16384 / R)")}
        for (int64_t o = 0; o < outer; ++o) y[o] = argmax_row<D>(x + o * R, R);
        return;
    }}
    const int64_t tiles = (inner + {s["tile"]} - 1) / {s["tile"]};
    #pragma omp parallel for collapse(2) {_schedule(s, "std::max<int64_t>(1, 16384 / (R * " + str(s["tile"]) + "))")}
    for (int64_t o = 0; o < outer; ++o) {{
        for (int64_t t = 0; t < tiles; ++t) {{
            const int64_t i0 = t * {s["tile"]};
            const int64_t len = std::min<int64_t>({s["tile"]}, inner - i0);
            C best[{s["tile"]}];
            int64_t arg[{s["tile"]}];
            const S* __restrict__ first = x + o * R * inner + i0;
            for (int64_t i = 0; i < len; ++i) {{ best[i] = D::load(first[i]); arg[i] = 0; }}
            for (int64_t r = 1; r < R; ++r) {{
                const S* __restrict__ row = x + (o * R + r) * inner + i0;
{_prefetch(s, 16)}                #pragma omp simd
                for (int64_t i = 0; i < len; ++i) {{
                    const C v = D::load(row[i]);
                    const bool gt = v > best[i];  // strict: an equal later value keeps the first index
                    best[i] = gt ? v : best[i];
                    arg[i] = gt ? r : arg[i];
                }}
            }}
            for (int64_t i = 0; i < len; ++i) y[o * inner + i0 + i] = arg[i];
        }}
    }}
}}
"""


def _entries(operator: str) -> str:
    lines = []
    for suffix in SUFFIXES:
        trait, ctype, _ = DTYPE_ENTRIES[suffix]
        out = "int64_t" if operator == "argmax_dim" else ctype
        lines.append(
            f'extern "C" void {operator}_{suffix}(const {ctype}* x, {out}* y, int64_t outer, int64_t R, int64_t inner) '
            f"{{ reduce<{trait}>(x, y, outer, R, inner); }}"
        )
    return "\n".join(lines)


def _model(operator: str) -> str:
    arg = "dim" if operator == "sum_dim" else "reduce_dim"
    keep = operator == "sum_dim"
    out_dtype = "torch.int64" if operator == "argmax_dim" else "x.dtype"
    return f"""class ModelNew(nn.Module):
    def __init__(self, {arg}: int):
        super().__init__()
        self.{arg} = {arg}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dim = self.{arg} % x.dim()
        outer, inner = 1, 1
        for size in x.shape[:dim]:
            outer *= size
        for size in x.shape[dim + 1:]:
            inner *= size
        shape = list(x.shape[:dim]) + {"[1] + " if keep else ""}list(x.shape[dim + 1:])
        y = torch.empty(shape, dtype={out_dtype})
        _KERNELS[x.dtype](x, y, outer, x.shape[dim], inner)
        return y
"""


def render(operator: str, settings: dict) -> str:
    s = settings
    body = _argmax_source(s) if operator == "argmax_dim" else _fold_source(FOLDS[operator], s)
    source = f"{HEADERS}{DTYPES}{body}\n{_entries(operator)}\n"
    what = {
        "sum_dim": "sum (keepdim), accumulated in double",
        "mean_dim": "mean, accumulated in double",
        "vector_norm": "sqrt of the sum of squares, accumulated in double",
        "max_dim": "maximum (exact)",
        "argmax_dim": "index of the first maximum (int64)",
    }[operator]
    lines = [
        f"{operator}: {what}; the input is viewed as (outer, R, inner)",
        f"lanes={s['lanes']}: "
        + (
            "one omp-simd reduction per contiguous row"
            if s["lanes"] == 1 and operator != "argmax_dim"
            else "a scalar loop per contiguous row"
            if s["lanes"] == 1
            else f"{s['lanes']} independent partial results per contiguous row"
        ),
        f"accumulate={s['accumulate']}: "
        + (
            "not used (a maximum)"
            if operator in ("max_dim", "argmax_dim")
            else "sums in double"
            if s["accumulate"] == "double"
            else f"float sums per {BLOCK}-value block, blocks added in double"
        ),
        f"tile={s['tile']}: columns per work item when the reduced dimension is not the last",
        f"schedule={s['schedule']}: OpenMP "
        + ("static schedule" if s["schedule"] == "static" else "dynamic schedule in chunks of ~16K elements"),
        f"vector_width={s['vector_width']}: the compiler prefers {s['vector_width']}-bit vectors",
        f"prefetch={s['prefetch']}: "
        + (
            f"the strided kernel prefetches the tile {PREFETCH_ROWS} rows ahead"
            if s["prefetch"] == "on"
            else "hardware prefetching only"
        ),
    ]
    doc = describe("axis_reduce", operator, s, lines)
    return candidate(doc, source, s["vector_width"], kernel_table("_KERNELS", operator, SUFFIXES), _model(operator))


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    """Reduce dims ``dim`` (one dim, or consecutive dims, or all) viewed as (outer, R, inner); keepdim as traced."""
    keep = bool(found.get("keepdim"))
    out_dtype = "torch.int64" if found.pattern.operator == "argmax_dim" else "x.dtype"
    body = f"""
x = x.contiguous()
dims = range(x.dim()) if dim is None else [d % x.dim() for d in ((dim,) if isinstance(dim, int) else dim)]
lo, hi = min(dims), max(dims)
outer, reduced, inner = math.prod(x.shape[:lo]), math.prod(x.shape[lo:hi + 1]), math.prod(x.shape[hi + 1:])
kept = [1] * (hi + 1 - lo) if {keep} else []
shape = list(x.shape[:lo]) + kept + list(x.shape[hi + 1:])
if dim is None and not {keep}:
    shape = []
y = torch.empty(shape, dtype={out_dtype})
_KERNELS[x.dtype](x, y, outer, reduced, inner)
return y
"""
    return Call(("x", "dim"), body, imports=("math",))


def _consecutive(found: Found) -> str | None:
    dims, rank = found.get("dims"), len(found.shapes["x"])
    if dims is None:
        return None if found.pattern.operator != "argmax_dim" or not found.get("keepdim") else "argmax of all"
    dims = sorted(d % rank for d in dims)
    if dims != list(range(dims[0], dims[-1] + 1)):
        return f"reduced dims {tuple(dims)} are not consecutive (the kernel views x as (outer, R, inner))"
    if found.pattern.operator == "argmax_dim" and len(dims) != 1:
        return "argmax over several dims"
    if found.pattern.operator == "vector_norm" and found.get("ord") not in (2, 2.0):
        return f"a vector norm of order {found.get('ord')} (the kernel computes the L2 norm)"
    return None


_REDUCE = {"static": {"keepdim": "keepdim"}, "info": {"dims": "dims", "ord": "ord"}, "scalars": {"dim": "dim"}}
PATTERNS = [
    pattern(op, (f"reduce:{fn}", ["x"], _REDUCE), call=_call, where=_consecutive)
    for op, fn in (("sum_dim", "sum"), ("mean_dim", "mean"), ("max_dim", "max"), ("argmax_dim", "argmax"))
] + [pattern("vector_norm", ("reduce:norm", ["x"], _REDUCE), call=_call, where=_consecutive)]
