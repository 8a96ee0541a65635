"""Inclusive prefix sum (cumsum) along the last dimension on the CPU.

More on it: docs/templates.md, "Template notes", templates/cpu/prefix_scan.
"""

from __future__ import annotations

from harness.structure.patterns import Call, Found, last_dim_rows, pattern
from harness.suite.templates.cpu._cpp_blocks import DTYPE_ENTRIES, DTYPES, HEADERS, candidate, describe, kernel_table
from harness.suite.templates.cpu._rows import SAME_SHAPE_MODEL, SPLIT_KNOB, VECTOR_KNOB, split_rows_line

FAMILY = "reduction"
OPERATORS = ["cumsum"]
SUFFIXES = ["f32", "f64", "bf16", "f16"]

KNOBS = [
    {
        "name": "lanes",
        "values": [1, 4, 8],
        "default": 1,
        "layer": "unrolling",
        "doc": "pieces of a row scanned together as independent dependency chains (pieces after the first are "
        "fixed up with the totals before them in a vectorised sweep)",
    },
    SPLIT_KNOB,
    {
        "name": "schedule",
        "values": ["static", "dynamic"],
        "default": "static",
        "layer": "scheduling",
        "doc": "OpenMP schedule of the rows over the threads (dynamic: chunks of ~16K elements)",
    },
    VECTOR_KNOB,
]

SCAN = r"""
// y[lo, hi) += offset (a vectorised sweep over values still in cache).
template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline void add_offset(S* __restrict__ y, int64_t lo, int64_t hi, double offset) {
    #pragma omp simd
    for (int64_t i = lo; i < hi; ++i) y[i] = D::store(C(double(D::load(y[i])) + offset));
}

// Scan x[lo, hi) into y[lo, hi), starting from 0, as P interleaved pieces; returns the total.
template <typename D, int P, typename C = typename D::C, typename S = typename D::S>
static double scan_range(const S* __restrict__ x, S* __restrict__ y, int64_t lo, int64_t hi) {
    const int64_t n = hi - lo;
    if (P == 1 || n < 16 * P) {  // one chain
        double acc = 0.0;
        for (int64_t i = lo; i < hi; ++i) {
            acc += double(D::load(x[i]));
            y[i] = D::store(C(acc));
        }
        return acc;
    }
    int64_t start[P + 1];
    for (int p = 0; p <= P; ++p) start[p] = lo + n * p / P;
    const int64_t common = n / P;  // every piece has at least n / P elements
    double acc[P];
    for (int p = 0; p < P; ++p) acc[p] = 0.0;
    for (int64_t i = 0; i < common; ++i) {
        for (int p = 0; p < P; ++p) {  // P independent chains, one step each
            acc[p] += double(D::load(x[start[p] + i]));
            y[start[p] + i] = D::store(C(acc[p]));
        }
    }
    for (int p = 0; p < P; ++p) {
        for (int64_t i = start[p] + common; i < start[p + 1]; ++i) {
            acc[p] += double(D::load(x[i]));
            y[i] = D::store(C(acc[p]));
        }
    }
    double offset = 0.0;
    for (int p = 1; p < P; ++p) {  // a piece starts where the pieces before it ended
        offset += acc[p - 1];
        add_offset<D>(y, start[p], start[p + 1], offset);
    }
    return offset + acc[P - 1];
}
"""


def _driver(s: dict) -> str:
    P = s["lanes"]
    sched = "schedule(static)" if s["schedule"] == "static" else "schedule(dynamic, std::max<int64_t>(1, 16384 / n))"
    rows = f"""    #pragma omp parallel for {sched}
    for (int64_t r = 0; r < rows; ++r) scan_range<D, {P}>(x + r * n, y + r * n, 0, n);
"""
    head = (
        "template <typename D, typename C = typename D::C, typename S = typename D::S>\n"
        "static void run(const S* __restrict__ x, S* __restrict__ y, int64_t rows, int64_t n) {\n"
    )
    if s["split_rows"] == "never":
        return head + rows + "}\n"
    return (
        head
        + f"""    if (rows >= 2 * omp_get_max_threads()) {{
    {rows.strip()}
        return;
    }}
    // Few rows: every thread scans one slice of each row; after a barrier it adds the slices before it.
    std::vector<double> totals(omp_get_max_threads());
    #pragma omp parallel
    {{
        const int T = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t lo = n * t / T, hi = n * (t + 1) / T;
        for (int64_t r = 0; r < rows; ++r) {{
            totals[t] = scan_range<D, {P}>(x + r * n, y + r * n, lo, hi);
            #pragma omp barrier
            double offset = 0.0;
            for (int u = 0; u < t; ++u) offset += totals[u];
            if (t > 0) add_offset<D>(y + r * n, lo, hi, offset);
            #pragma omp barrier
        }}
    }}
}}
"""
    )


def render(operator: str, settings: dict) -> str:
    s = settings
    entries = "\n".join(
        f'extern "C" void cumsum_{suffix}(const {t}* x, {t}* y, int64_t rows, int64_t n) '
        f"{{ run<{trait}>(x, y, rows, n); }}"
        for suffix in SUFFIXES
        for trait, t, _ in [DTYPE_ENTRIES[suffix]]
    )
    source = f"{HEADERS}#include <vector>\n{DTYPES}{SCAN}\n{_driver(s)}\n{entries}\n"
    lines = [
        "cumsum along the last dimension, running sums in double",
        f"lanes={s['lanes']}: "
        + (
            "one dependency chain per row"
            if s["lanes"] == 1
            else f"{s['lanes']} pieces per row scanned together, then fixed up"
        ),
        split_rows_line(s["split_rows"]),
        f"schedule={s['schedule']}: OpenMP "
        + ("static schedule" if s["schedule"] == "static" else "dynamic schedule in chunks of ~16K elements"),
        f"vector_width={s['vector_width']}: the compiler prefers {s['vector_width']}-bit vectors (fix-up sweeps)",
    ]
    return candidate(
        describe("prefix_scan", operator, s, lines),
        source,
        s["vector_width"],
        kernel_table("_KERNELS", operator, SUFFIXES),
        SAME_SHAPE_MODEL,
    )


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    """An inclusive prefix sum along any one dim (moved last, a copy, when it is not last)."""
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


PATTERNS = [pattern("cumsum", ("cumsum:cumsum", ["x"], {"scalars": {"dim": "dim"}}), call=_call)]
