"""Elementwise operators (activations, clamp, axpy) on the CPU: one flat, OpenMP-parallel SIMD loop.

More on it: docs/templates.md, "Template notes", templates/cpu/pointwise.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.structure.patterns import Call, Found, pattern
from harness.suite.templates.cpu._cpp_blocks import (
    DTYPE_ENTRIES,
    DTYPES,
    HEADERS,
    STREAM_COPY,
    candidate,
    describe,
    kernel_table,
    math_struct,
    omp_schedule,
)

FAMILY = "elementwise"


class Op(NamedTuple):
    expr: str  # C++ expression of x (and y for binary ops), p0, p1 in compute type C
    params: tuple[str, ...] = ()  # constructor arguments, passed to the kernel as p0, p1
    binary: bool = False
    transcendental: bool = False  # uses Math:: (the `math` knob matters)
    dtypes: tuple[str, ...] = ("f32", "f64", "bf16", "f16")


OPS = {
    "relu": Op("x > C(0) ? x : C(0)"),
    "leaky_relu": Op("x > C(0) ? x : x * p0", ("negative_slope",)),
    "clamp": Op("std::min(std::max(x, p0), p1)", ("min_value", "max_value")),
    "hardswish": Op("x * std::min(std::max(x + C(3), C(0)), C(6)) / C(6)"),
    "add_scaled": Op("x + p0 * y", ("alpha",), binary=True),
    "gelu": Op("C(0.5) * x * (C(1) + Math::erf(x * C(0.70710678118654752440)))", transcendental=True),
    "sigmoid": Op("C(1) / (C(1) + Math::exp(-x))", transcendental=True),
    "silu": Op("x / (C(1) + Math::exp(-x))", transcendental=True),
    "tanh": Op("Math::tanh(x)", transcendental=True),
    "elu": Op("x > C(0) ? x : p0 * Math::expm1(x)", ("alpha",), transcendental=True),
}
OPERATORS = list(OPS)

KNOBS = [
    {
        "name": "math",
        "values": ["libm", "poly"],
        "default": "libm",
        "layer": "algorithm",
        "doc": "exp/erf/tanh for gelu, sigmoid, silu, tanh, elu: libm calls (accurate, keep the loop scalar) or "
        "vectorisable polynomials (float32/16-bit; float64 gelu keeps libm erf)",
        "operators": [name for name, op in OPS.items() if op.transcendental],
    },
    {
        "name": "vector_width",
        "values": [256, 512],
        "default": 256,
        "layer": "instruction",
        "doc": "SIMD width the compiler prefers (a GCC target pragma guarded by __AVX512F__): 512 uses zmm registers "
        "where the CPU has AVX-512 and is dropped elsewhere",
    },
    {
        "name": "unroll",
        "values": [1, 2, 4],
        "default": 1,
        "layer": "unrolling",
        "doc": "1: a plain omp-simd loop; k > 1: fixed 16*k-element SIMD chunks the compiler fully unrolls",
    },
    {
        "name": "block",
        "values": [16384, 4096, 65536],
        "default": 16384,
        "layer": "tiling",
        "doc": "elements per OpenMP work item",
    },
    {
        "name": "schedule",
        "values": ["static", "dynamic", "guided"],
        "default": "static",
        "layer": "scheduling",
        "doc": "OpenMP schedule of the work items over the threads",
    },
    {
        "name": "store",
        "values": ["cached", "streaming"],
        "default": "cached",
        "layer": "memory_layout",
        "doc": "cached: ordinary stores; streaming: results go to an L1 tile, then to memory with non-temporal stores "
        "(no read-for-ownership of the output; AVX-512/AVX, plain copy elsewhere)",
    },
]

TILE = 2048  # elements of the L1 staging tile for streaming stores


def _indent(text: str, spaces: int) -> str:
    return "".join((" " * spaces + line if line else line) + "\n" for line in text.strip("\n").splitlines())


def _loop(op: Op, unroll: int, src: str, dst: str, count: str) -> str:
    """The SIMD loop over `count` elements: dst[i] = apply(in[src + i]) (and in2 for binary operators)."""

    def body(at: str) -> str:
        load_y = f"const C bv = D::load(in2[{src} + {at}]);\n" if op.binary else ""
        return (
            f"const C av = D::load(in[{src} + {at}]);\n{load_y}"
            f"{dst}[{at}] = D::store(apply(av, {'bv, ' if op.binary else ''}p0, p1));"
        )

    if unroll == 1:
        return f"#pragma omp simd\nfor (int64_t i = 0; i < {count}; ++i) {{\n{_indent(body('i'), 4)}}}"
    chunk = 16 * unroll
    return (
        f"int64_t c = 0;\n"
        f"for (; c + {chunk} <= {count}; c += {chunk}) {{  // fixed-length chunks: the SIMD loop is fully unrolled\n"
        f"    #pragma omp simd\n    for (int64_t i = 0; i < {chunk}; ++i) {{\n{_indent(body('c + i'), 8)}    }}\n}}\n"
        f"#pragma omp simd\nfor (int64_t i = 0; i < {count} - c; ++i) {{\n{_indent(body('c + i'), 4)}}}"
    )


def _source(operator: str, op: Op, s: dict) -> str:
    args = "C x, C y, C p0, C p1" if op.binary else "C x, C p0, C p1"
    ins = "const S* __restrict__ in, const S* __restrict__ in2" if op.binary else "const S* __restrict__ in"
    if s["store"] == "cached":
        inner = "// ordinary stores, straight into the output\nS* __restrict__ dst = out + lo;\n" + _loop(
            op, s["unroll"], "lo", "dst", "hi - lo"
        )
    else:
        inner = (
            f"// compute into an L1 tile, then stream the tile to memory (non-temporal stores)\n"
            f"alignas(64) S tile[{TILE}];\n"
            f"for (int64_t t = lo; t < hi; t += {TILE}) {{\n"
            f"    const int64_t len = std::min<int64_t>({TILE}, hi - t);\n"
            + _indent(_loop(op, s["unroll"], "t", "tile", "len"), 4)
            + "    stream_copy(out + t, tile, len * int64_t(sizeof(S)));\n}\nstore_fence();"
        )
    entries = []
    for suffix in op.dtypes:
        trait, ctype, _ = DTYPE_ENTRIES[suffix]
        params = f"const {ctype}* x, const {ctype}* y" if op.binary else f"const {ctype}* x"
        call = "x, y, out" if op.binary else "x, out"
        entries.append(
            f'extern "C" void {operator}_{suffix}({params}, {ctype}* out, int64_t n, double p0, double p1) '
            f"{{ run<{trait}>({call}, n, p0, p1); }}"
        )
    math = math_struct(s["math"]) if op.transcendental else ""
    stream = STREAM_COPY if s["store"] == "streaming" else ""
    return f"""{HEADERS}{DTYPES}{math}{stream}
// {operator}, one element, in the compute type C (float, or double for float64)
template <typename C>
static inline C apply({args}) {{
    return {op.expr};
}}

template <typename D, typename S = typename D::S>
static void run({ins}, S* __restrict__ out, int64_t n, double p0d, double p1d) {{
    using C = typename D::C;
    const C p0 = C(p0d), p1 = C(p1d);
    const int64_t blocks = (n + {s["block"]} - 1) / {s["block"]};
    #pragma omp parallel for {omp_schedule(s["schedule"])}
    for (int64_t b = 0; b < blocks; ++b) {{
        const int64_t lo = b * {s["block"]};
        const int64_t hi = std::min<int64_t>(n, lo + {s["block"]});
{_indent(inner, 8).rstrip()}
    }}
}}

{chr(10).join(entries)}
"""


def _model(operator: str, op: Op) -> str:
    params = ", ".join(f"{p}: float" for p in op.params)
    init = "".join(f"        self.{p} = {p}\n" for p in op.params)
    scalars = [f"float(self.{p})" for p in op.params] + ["0.0"] * (2 - len(op.params))
    if op.binary:
        forward = (
            "    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:\n"
            "        x, y = x.contiguous(), y.contiguous()\n"
            "        out = torch.empty_like(x)\n"
            f"        _KERNELS[x.dtype](x, y, out, x.numel(), {', '.join(scalars)})\n"
            "        return out\n"
        )
    else:
        forward = (
            "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
            "        x = x.contiguous()\n"
            "        y = torch.empty_like(x)\n"
            f"        _KERNELS[x.dtype](x, y, x.numel(), {', '.join(scalars)})\n"
            "        return y\n"
        )
    return (
        f"class ModelNew(nn.Module):\n    def __init__(self{', ' + params if params else ''}):\n"
        f"        super().__init__()\n{init}\n{forward}"
    )


def render(operator: str, settings: dict) -> str:
    op = OPS[operator]
    s = settings
    lines = [
        f"math={s['math']}: "
        + (
            "not used by this operator"
            if not op.transcendental
            else "C library calls (accurate; the loop stays scalar)"
            if s["math"] == "libm"
            else "vectorisable polynomial exp/erf/tanh (float64 erf stays libm)"
        ),
        f"vector_width={s['vector_width']}: the compiler prefers {s['vector_width']}-bit vectors",
        f"unroll={s['unroll']}: "
        + (
            "a plain omp-simd loop"
            if s["unroll"] == 1
            else f"fixed {16 * s['unroll']}-element SIMD chunks, fully unrolled"
        ),
        f"block={s['block']}, schedule={s['schedule']}: {s['block']}-element work items, OpenMP schedule({s['schedule']})",
        f"store={s['store']}: "
        + ("ordinary stores" if s["store"] == "cached" else f"{TILE}-element L1 tile written with non-temporal stores"),
        "float32/float64 compute in their own type; bfloat16/float16 are widened to float and rounded back "
        "to nearest even, like PyTorch",
    ]
    doc = describe("pointwise", operator, s, lines)
    tables = kernel_table("_KERNELS", operator, list(op.dtypes))
    return candidate(doc, _source(operator, op, s), s["vector_width"], tables, _model(operator, op))


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    op = OPS[found.pattern.operator]
    scalars = [f"float({p})" for p in op.params] + ["0.0"] * (2 - len(op.params))
    if op.binary:
        body = f"""
x, y = x.contiguous(), y.contiguous()
out = torch.empty_like(x)
_KERNELS[x.dtype](x, y, out, x.numel(), {", ".join(scalars)})
return out
"""
        return Call(("x", "y", *op.params), body)
    body = f"""
x = x.contiguous()
y = torch.empty_like(x)
_KERNELS[x.dtype](x, y, x.numel(), {", ".join(scalars)})
return y
"""
    return Call(("x", *op.params), body)


def _clamp_bounds(found: Found) -> str | None:
    if found.get("min_value") is None or found.get("max_value") is None:
        return "a one-sided clamp (the kernel takes both bounds)"
    return None


def _plain_elu(found: Found) -> str | None:
    if found.get("scale") != 1 or found.get("input_scale") != 1:
        return "a scaled ELU (SELU); the kernel computes alpha * (exp(x) - 1) unscaled"
    return None


def _same_shapes(found: Found) -> str | None:
    if found.shapes.get("x") != found.shapes.get("y"):
        return f"operands of different shapes {found.shapes.get('x')} and {found.shapes.get('y')} (no broadcasting)"
    return None


PATTERNS = [
    pattern(name, (f"unary:{name}", ["x"]), call=_call)
    for name in ("relu", "hardswish", "gelu", "sigmoid", "silu", "tanh")
] + [
    pattern("leaky_relu", ("unary:leaky_relu", ["x"], {"scalars": {"negative_slope": "negative_slope"}}), call=_call),
    pattern(
        "clamp",
        ("unary:clamp", ["x"], {"scalars": {"min_value": "min", "max_value": "max"}}),
        call=_call,
        where=_clamp_bounds,
    ),
    pattern(
        "elu",
        (
            "unary:elu",
            ["x"],
            {"scalars": {"alpha": "alpha"}, "static": {"scale": "scale", "input_scale": "input_scale"}},
        ),
        call=_call,
        where=_plain_elu,
    ),
    pattern("add_scaled", ("binary:add", ["x", "y"], {"scalars": {"alpha": "alpha"}}), call=_call, where=_same_shapes),
]
