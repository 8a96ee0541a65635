"""C++ generators shared by the row-wise templates (logsumexp, softmax/log_softmax, layer/RMS/L2 norms).

More on it: docs/templates.md, "Template notes", templates/cpu/_rows.
"""

from __future__ import annotations

from typing import NamedTuple


class Acc(NamedTuple):
    name: str
    type: str  # C++ type of the accumulator
    kind: str  # "+" (sum of term) or "max" (maximum of term)
    term: str  # C++ expression of the loaded value v (and of variables in scope)

    @property
    def init(self) -> str:
        return "0" if self.kind == "+" else f"-std::numeric_limits<{self.type}>::infinity()"

    def update(self, target: str) -> str:
        if self.kind == "+":
            return f"{target} += {self.term};"
        return f"{{ const {self.type} t = {self.term}; {target} = t > {target} ? t : {target}; }}"

    def combine(self, a: str, b: str) -> str:
        return f"{a} + {b}" if self.kind == "+" else f"({b} > {a} ? {b} : {a})"


def fold(accs: list[Acc], lanes: int, load: str, lo: str, hi: str, pre: str = "", post: str = "") -> str:
    """Statements declaring each accumulator and folding v = <load at index i> over i in [lo, hi).

    ``pre``: statements per element after v is loaded (temporaries the terms use); ``post``: a statement
    per element after the updates (e.g. a store).
    """
    decl = "".join(f"{a.type} {a.name} = {a.init};\n" for a in accs)
    extra_pre = f"{pre}\n" if pre else ""
    extra_post = f"\n{post}" if post else ""
    if lanes == 1:
        clauses = " ".join(f"reduction({'+' if a.kind == '+' else 'max'} : {a.name})" for a in accs)
        body = "\n".join(a.update(a.name) for a in accs)
        return (
            f"{decl}#pragma omp simd {clauses}\nfor (int64_t i = {lo}; i < {hi}; ++i) {{\n"
            f"{indent(f'const C v = {load};' + chr(10) + extra_pre + body + extra_post, 4)}}}\n"
        )
    L = lanes
    parts = "".join(f"{a.type} {a.name}_l[{L}];\n" for a in accs)
    init = " ".join(f"{a.name}_l[l] = {a.init};" for a in accs)
    lane_body = "\n".join(a.update(a.name + "_l[l]") for a in accs)
    tail_body = "\n".join(a.update(a.name + "_l[0]") for a in accs)
    first = "".join(f"{a.name} = {a.name}_l[0];\n" for a in accs)
    merge = "".join(f"for (int l = 1; l < {L}; ++l) {a.name} = {a.combine(a.name, a.name + '_l[l]')};\n" for a in accs)
    lane = f"const int64_t i = i0 + l;\nconst C v = {load};\n{extra_pre}{lane_body}{extra_post}"
    tail = f"const C v = {load};\n{extra_pre}{tail_body}{extra_post}"
    inner = (
        f"{parts}for (int l = 0; l < {L}; ++l) {{ {init} }}\n"
        f"int64_t i0 = {lo};\n"
        f"for (; i0 + {L} <= {hi}; i0 += {L}) {{  // {L} independent partial results\n"
        f"    #pragma omp simd\n    for (int l = 0; l < {L}; ++l) {{\n{indent(lane, 8)}    }}\n}}\n"
        f"for (int64_t i = i0; i < {hi}; ++i) {{\n{indent(tail, 4)}}}\n"
        f"{first}{merge}"
    )
    return f"{decl}{{\n{indent(inner, 4)}}}\n"


def indent(text: str, spaces: int) -> str:
    return "".join((" " * spaces + line if line.strip() else "") + "\n" for line in text.strip("\n").splitlines())


def row_driver(split_rows: str, args: str, call_args: str, row_output: bool) -> str:
    """``run<D>(x, y, rows, n, <args>)``: the rows loop around part_of/merge/emit.

    ``args``/``call_args``: the operator's extra parameters (declaration / names), passed to the hooks.
    ``row_output``: one output per row (logsumexp): emit gets ``y + r`` and is called once per row.
    """
    out_row = "y + r" if row_output else "y + r * n"
    per_row = (
        f"const Part p = part_of<D>(x + r * n, {out_row}, 0, n{call_args});\n"
        f"emit<D>(x + r * n, {out_row}, 0, n, n, p, p{call_args});"
    )
    simple = (
        f"#pragma omp parallel for schedule(static)\nfor (int64_t r = 0; r < rows; ++r) {{\n{indent(per_row, 4)}}}\n"
    )
    head = (
        f"template <typename D, typename C = typename D::C, typename S = typename D::S>\n"
        f"static void run(const S* __restrict__ x, S* __restrict__ y, int64_t rows, int64_t n{args}) {{\n"
        f"    using Part = PartT<C>;\n"
    )
    if split_rows == "never":
        return head + indent(simple, 4) + "}\n"
    emit_lo = "if (t == 0) " if row_output else ""
    split = f"""if (rows >= 2 * omp_get_max_threads()) {{
{indent(simple, 4)}    return;
}}
// Few rows: every thread takes one slice of each row; slice statistics are merged after a barrier.
std::vector<Part> parts(omp_get_max_threads());
#pragma omp parallel
{{
    const int T = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t lo = n * t / T, hi = n * (t + 1) / T;
    for (int64_t r = 0; r < rows; ++r) {{
        parts[t] = part_of<D>(x + r * n, {out_row}, lo, hi{call_args});
        #pragma omp barrier
        Part all = parts[0];
        for (int u = 1; u < T; ++u) all = merge<C>(all, parts[u]);
        {emit_lo}emit<D>(x + r * n, {out_row}, lo, hi, n, all, parts[t]{call_args});
        #pragma omp barrier
    }}
}}
"""
    return head + indent(split, 4) + "}\n"


SPLIT_KNOB = {
    "name": "split_rows",
    "values": ["never", "few_rows"],
    "default": "never",
    "layer": "parallelization",
    "doc": "never: one thread per row; few_rows: with fewer than two rows per thread, every row is split "
    "across all threads (slice statistics merged after a barrier)",
}
LANES_KNOB = {
    "name": "lanes",
    "values": [1, 16, 64],
    "default": 1,
    "layer": "unrolling",
    "doc": "independent partial results per row reduction (1: one omp-simd reduction, the compiler's "
    "choice); more lanes hide the add latency",
}
VECTOR_KNOB = {
    "name": "vector_width",
    "values": [256, 512],
    "default": 256,
    "layer": "instruction",
    "doc": "SIMD width the compiler prefers (a GCC target pragma guarded by __AVX512F__): 512 uses zmm "
    "registers where the CPU has AVX-512 and is dropped elsewhere",
}


SAME_SHAPE_MODEL = """class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.shape[-1]
        _KERNELS[x.dtype](x, y, x.numel() // n, n)
        return y
"""


def split_rows_line(split: str) -> str:
    why = (
        "one thread per row"
        if split == "never"
        else "rows are shared by all threads when there are fewer than two per thread"
    )
    return f"split_rows={split}: {why}"


def row_knob_lines(s: dict, math: bool = False) -> list[str]:
    """A row template's description of its shared knobs: math (where it has it), lanes, vector_width, split_rows."""
    exp = "C library exp (scalar loops)" if s.get("math") == "libm" else "vectorisable polynomial exp"
    lanes = (
        "one omp-simd reduction per sweep" if s["lanes"] == 1 else f"{s['lanes']} independent partial results per sweep"
    )
    return [
        *([f"math={s['math']}: {exp}"] if math else []),
        f"lanes={s['lanes']}: {lanes}",
        f"vector_width={s['vector_width']}: the compiler prefers {s['vector_width']}-bit vectors",
        split_rows_line(s["split_rows"]),
    ]


ONLINE_CHUNK = 1024  # elements per chunk of the online (one-sweep) max/sum: the chunk is re-read from L1


def softmax_stats(algorithm: str, lanes: int, store_exp: bool) -> str:
    """``PartT<C>{m, s}`` (maximum, sum of exp(x - m)) of a slice, and its merge.

    two_pass: one sweep for the maximum, one for the sum (``store_exp``: the sum sweep also writes
    exp(x - m) to y, which emit then rescales). online: one sweep over memory, in chunks of
    ``ONLINE_CHUNK`` elements: the chunk's maximum, then its exp-sum against the new running maximum,
    the running sum rescaled by exp(old max - new max).
    """
    load = "D::load(x[i])"
    mx = Acc("m", "C", "max", "v")
    if algorithm == "two_pass":
        sm = Acc("s", "C", "+", "e")
        body = (
            fold([mx], lanes, load, "lo", "hi")
            + fold(
                [sm],
                lanes,
                load,
                "lo",
                "hi",
                pre="const C e = Math::exp(v - m);",
                post="y[i] = D::store(e);" if store_exp else "",
            )
            + "return Part{m, s};\n"
        )
    elif algorithm == "online":
        chunk = (
            fold([Acc("cm", "C", "max", "v")], lanes, load, "c0", "c1")
            + "const C nm = cm > m ? cm : m;\n"
            + fold([Acc("cs", "C", "+", "Math::exp(v - nm)")], lanes, load, "c0", "c1")
            + "s = s * Math::exp(m - nm) + cs;  // rescale the running sum to the new maximum\nm = nm;\n"
        )
        body = (
            f"C m = -std::numeric_limits<C>::infinity(), s = 0;\n"
            f"for (int64_t c0 = lo; c0 < hi; c0 += {ONLINE_CHUNK}) {{\n"
            f"    const int64_t c1 = std::min<int64_t>(hi, c0 + {ONLINE_CHUNK});\n{indent(chunk, 4)}}}\n"
            f"return Part{{m, s}};\n"
        )
    else:
        raise ValueError(f"algorithm must be two_pass or online, got {algorithm!r}")
    return f"""
// Statistics of a slice [lo, hi) of a row: its maximum m and the sum s of exp(x - m).
template <typename C> struct PartT {{ C m; C s; }};

template <typename C>
static inline PartT<C> merge(const PartT<C>& a, const PartT<C>& b) {{
    if (a.s == C(0)) return b;  // an empty slice
    if (b.s == C(0)) return a;
    const C m = a.m > b.m ? a.m : b.m;
    return PartT<C>{{m, a.s * Math::exp(a.m - m) + b.s * Math::exp(b.m - m)}};
}}

template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline PartT<C> part_of(const S* __restrict__ x, S* __restrict__ y, int64_t lo, int64_t hi) {{
    using Part = PartT<C>;
    if (hi <= lo) return Part{{-std::numeric_limits<C>::infinity(), C(0)}};
{indent(body, 4)}}}
"""


WELFORD_STEPS = 1024  # steps per Welford lane before the lanes are merged and restarted
LOAD = "D::load(x[i])"


def _moments_body(variance: str, lanes: int) -> str:
    """The body of part_of: (count, mean, M2) of the slice [lo, hi)."""
    if variance == "two_pass":
        body = (
            "const A K = A(D::load(x[lo]));  // the mean sweep sums x - K: float sums stay small when |mean| >> std\n"
            + fold([Acc("sum", "A", "+", "A(v) - K")], lanes, LOAD, "lo", "hi")
            + "const A mean = K + sum / A(hi - lo);\n"
            + fold([Acc("m2", "A", "+", "(A(v) - mean) * (A(v) - mean)")], lanes, LOAD, "lo", "hi")
            + "return Part{A(hi - lo), mean, m2};\n"
        )
    elif variance == "shifted":
        body = (
            "const A K = A(D::load(x[lo]));  // shift by the first value: no cancellation when |mean| >> std\n"
            + fold(
                [Acc("s1", "A", "+", "A(v) - K"), Acc("s2", "A", "+", "(A(v) - K) * (A(v) - K)")],
                lanes,
                LOAD,
                "lo",
                "hi",
            )
            + "const A cnt = A(hi - lo);\n"
            + "return Part{cnt, K + s1 / cnt, s2 - s1 * s1 / cnt};\n"
        )
    elif variance == "welford":
        L = lanes
        body = f"""// Welford on x - K (K the slice's first value): the running means stay small, so their rounding
// does not grow with |mean|; lanes restart every {WELFORD_STEPS} steps (merged into p), which bounds
// the drift of long float chains.
const A K = A(D::load(x[lo]));
Part p{{A(0), A(0), A(0)}};
int64_t i0 = lo;
while (i0 + {L} <= hi) {{
    A mean_l[{L}], m2_l[{L}];
    for (int l = 0; l < {L}; ++l) {{ mean_l[l] = 0; m2_l[l] = 0; }}
    const int64_t stop = std::min<int64_t>(hi, i0 + int64_t({L}) * {WELFORD_STEPS});
    int64_t k = 0;
    for (; i0 + {L} <= stop; i0 += {L}) {{  // every lane has seen k values: one division per step for all lanes
        ++k;
        const A inv = A(1) / A(k);
        #pragma omp simd
        for (int l = 0; l < {L}; ++l) {{
            const A v = A(D::load(x[i0 + l])) - K;
            const A d = v - mean_l[l];
            mean_l[l] += d * inv;
            m2_l[l] += d * (v - mean_l[l]);
        }}
    }}
    for (int l = 0; l < {L}; ++l) p = merge<C>(p, Part{{A(k), mean_l[l], m2_l[l]}});
}}
for (int64_t i = i0; i < hi; ++i) p = merge<C>(p, Part{{A(1), A(D::load(x[i])) - K, A(0)}});  // the tail
p.mean += K;
return p;
"""
    else:
        raise ValueError(f"variance must be two_pass, shifted or welford, got {variance!r}")
    return body


def moments(variance: str, lanes: int, acc: str, args: str = "") -> str:
    """``PartT<C>{n, mean, m2}`` of a slice (accumulated in ``acc``), Chan's merge, and ``part_of``.

    ``variance``: two_pass (mean, then squared deviations: two reads), shifted (sums of x - K and
    (x - K)^2, K the slice's first value: one read, no cancellation when |mean| >> std) or welford
    (per-lane online updates of x - K merged with Chan's formula: one read, a division per step).
    """
    return f"""
// Statistics of a slice: count, mean and M2 (sum of squared deviations), merged with Chan's formula.
template <typename C> struct PartT {{ using A = {acc}; A n, mean, m2; }};

template <typename C>
static inline PartT<C> merge(const PartT<C>& a, const PartT<C>& b) {{
    using A = typename PartT<C>::A;
    if (a.n == A(0)) return b;
    if (b.n == A(0)) return a;
    const A n = a.n + b.n, d = b.mean - a.mean;
    return PartT<C>{{n, a.mean + d * (b.n / n), a.m2 + b.m2 + d * d * (a.n * b.n / n)}};
}}

template <typename D, typename C = typename D::C, typename S = typename D::S>
static inline PartT<C> part_of(const S* __restrict__ x, S* __restrict__ y, int64_t lo, int64_t hi{args}) {{
    using Part = PartT<C>;
    using A = typename Part::A;
    if (hi <= lo) return Part{{A(0), A(0), A(0)}};
{indent(_moments_body(variance, lanes), 4)}}}
"""
