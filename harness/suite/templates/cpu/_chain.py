"""A generated elementwise kernel for a chain of elementwise ops (an epilogue, a residual add, an activation).

More on it: docs/templates.md, "Template notes", templates/cpu/_chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.structure.patterns import Call
from harness.suite.templates.cpu._cpp_blocks import DTYPE_ENTRIES, DTYPES, HEADERS, math_struct, omp_schedule

SUFFIXES = ["f32", "f64", "bf16", "f16"]

UNARY = {
    "relu": "v > C(0) ? v : C(0)",
    "gelu": "C(0.5) * v * (C(1) + Math::erf(v * C(0.70710678118654752440)))",
    "gelu_tanh": "C(0.5) * v * (C(1) + Math::tanh(C(0.79788456080286535588) * (v + C(0.044715) * v * v * v)))",
    "sigmoid": "C(1) / (C(1) + Math::exp(-v))",
    "tanh": "Math::tanh(v)",
    "silu": "v / (C(1) + Math::exp(-v))",
    "hardswish": "v * std::min(std::max(v + C(3), C(0)), C(6)) / C(6)",
    "hardsigmoid": "std::min(std::max(v + C(3), C(0)), C(6)) / C(6)",
    "mish": "v * Math::tanh(v > C(20) ? v : C(std::log1p(Math::exp(v))))",
    "exp": "Math::exp(v)",
    "log": "C(std::log(v))",
    "abs": "std::abs(v)",
    "neg": "-v",
    "sqrt": "C(std::sqrt(v))",
    "rsqrt": "C(1) / C(std::sqrt(v))",
    "reciprocal": "C(1) / v",
    "erf": "Math::erf(v)",
    "log1p": "C(std::log1p(v))",
    "expm1": "Math::expm1(v)",
    "sin": "C(std::sin(v))",
    "cos": "C(std::cos(v))",
    "sign": "C((v > C(0)) - (v < C(0)))",
    "square": "v * v",
    "pow": "C(std::pow(v, {exponent}))",
    "softplus": "v * {beta} > {threshold} ? v : C(std::log1p(Math::exp(v * {beta}))) / {beta}",
    "leaky_relu": "v > C(0) ? v : v * {negative_slope}",
    "elu": "v > C(0) ? {scale} * v : {scale} * {alpha} * Math::expm1(v * {input_scale})",
}
UNARY_DEFAULTS = {
    "negative_slope": 0.01,
    "alpha": 1.0,
    "scale": 1.0,
    "input_scale": 1.0,
    "beta": 1.0,
    "threshold": 20.0,
    "exponent": 2.0,
}
BINARY = {
    "add": "a + {alpha} * b",
    "sub": "a - {alpha} * b",
    "mul": "a * b",
    "div": "a / b",
    "rsub": "b - {alpha} * a",
    "max": "std::max(a, b)",
    "min": "std::min(a, b)",
}


@dataclass(frozen=True)
class Chain:
    nodes: list[Any]  # lifted nodes (harness.structure.lifted.Node), in order
    operands: list[str]  # external tensor value ids, in call order
    scalars: list[str]  # "<node id>.<attr>" keys of bound scalars, in call order
    full: tuple[bool, ...]  # per operand: it has the output's shape (read as t[i]) in every traced case
    masks: tuple[bool, ...] = ()  # per operand: a bool tensor (read as 0/1 bytes, like torch's promotion to C)

    def is_mask(self, k: int) -> bool:
        return k < len(self.masks) and self.masks[k]


def supported(node: Any) -> str | None:
    """Why the chain kernel cannot compute ``node`` (None when it can)."""
    if node.kind == "unary" and (node.fn in UNARY or node.fn == "clamp"):
        return None
    if node.kind == "binary" and node.fn in BINARY:
        return None
    return f"{node.signature} has no elementwise form here"


def _scalar(chain: Chain, key: str, default: Any) -> str:
    if key in chain.scalars:
        return f"s{chain.scalars.index(key)}"
    return f"C({float(default)!r})"


def _expr(chain: Chain, node: Any, value: dict[str, str]) -> str:
    def operand(i: int) -> str:
        op = node.operands[i] if i < len(node.operands) else None
        if op is None:
            return _scalar(chain, f"{node.id}.scalar", node.attrs.get("scalar", 0.0))
        return value[op.value]

    if node.kind == "unary":
        v = operand(0)
        if node.fn == "clamp":
            expr = "v"
            if node.attrs.get("min") is not None:
                expr = f"std::max({expr}, {_scalar(chain, f'{node.id}.min', node.attrs['min'])})"
            if node.attrs.get("max") is not None:
                expr = f"std::min({expr}, {_scalar(chain, f'{node.id}.max', node.attrs['max'])})"
        else:
            params = {k: _scalar(chain, f"{node.id}.{k}", node.attrs.get(k, d)) for k, d in UNARY_DEFAULTS.items()}
            expr = UNARY[node.fn].format(**params)
        return f"[&](C v) {{ return C({expr}); }}({v})"
    a, b = operand(0), operand(1)
    alpha = _scalar(chain, f"{node.id}.alpha", node.attrs.get("alpha", 1))
    return f"[&](C a, C b) {{ return C({BINARY[node.fn].format(alpha=alpha)}); }}({a}, {b})"


def source(chain: Chain, settings: dict[str, Any]) -> str:
    """The C++ of the chain: one OpenMP-parallel SIMD loop over the output."""
    loads, value = [], {}
    for k, vid in enumerate(chain.operands):
        index = "i" if chain.full[k] else f"(i / i{k}) % z{k}"
        load = f"C(t{k}[{index}] != 0)" if chain.is_mask(k) else f"D::load(t{k}[{index}])"
        loads.append(f"            const C a{k} = {load};")
        value[vid] = f"a{k}"
    steps = []
    for j, node in enumerate(chain.nodes):
        steps.append(f"            const C r{j} = rnd<D>({_expr(chain, node, value)});  // {node.signature}")
        value[node.id] = f"r{j}"

    def elem(k: int, ctype: str) -> str:
        return "uint8_t" if chain.is_mask(k) else ctype

    params = "".join(
        f"const {elem(k, 'S')}* __restrict__ t{k}, int64_t i{k}, int64_t z{k}, " for k in range(len(chain.operands))
    )
    scal = "".join(f", double s{k}d" for k in range(len(chain.scalars)))
    consts = "".join(f"    const C s{k} = C(s{k}d);\n" for k in range(len(chain.scalars)))
    block = settings["block"]
    entries = []
    for suffix in SUFFIXES:
        trait, ctype, _ = DTYPE_ENTRIES[suffix]
        ps = "".join(f"const {elem(k, ctype)}* t{k}, int64_t i{k}, int64_t z{k}, " for k in range(len(chain.operands)))
        args = "".join(f"t{k}, i{k}, z{k}, " for k in range(len(chain.operands)))
        sargs = "".join(f", s{k}" for k in range(len(chain.scalars)))
        sdecl = "".join(f", double s{k}" for k in range(len(chain.scalars)))
        entries.append(
            f'extern "C" void chain_{suffix}({ps}{ctype}* y, int64_t n{sdecl}) {{ run<{trait}>({args}y, n{sargs}); }}'
        )
    return f"""{HEADERS}{DTYPES}{math_struct(settings["math"])}
// 16-bit floats are rounded to their type after every op, as PyTorch stores every intermediate
template <typename D> static inline typename D::C rnd(typename D::C v) {{ return D::load(D::store(v)); }}

// {" -> ".join(n.signature for n in chain.nodes)}
template <typename D, typename S = typename D::S>
static void run({params}S* __restrict__ y, int64_t n{scal}) {{
    using C = typename D::C;
{consts}    const int64_t blocks = (n + {block} - 1) / {block};
    #pragma omp parallel for {omp_schedule("static")}
    for (int64_t b = 0; b < blocks; ++b) {{
        const int64_t lo = b * {block};
        const int64_t hi = std::min<int64_t>(n, lo + {block});
        #pragma omp simd
        for (int64_t i = lo; i < hi; ++i) {{
{chr(10).join(loads)}
{chr(10).join(steps)}
            y[i] = D::store(r{len(chain.nodes) - 1});
        }}
    }}
}}

{chr(10).join(entries)}
"""


BLOCK_BROADCAST = """
def block(t, shape):
    # (t, inner, size): element i of the output reads t[(i / inner) % size]
    t = t.contiguous()
    dims = [1] * (len(shape) - t.dim()) + list(t.shape)
    live = [d for d, s in enumerate(dims) if s != 1]
    if not live:
        return t, 1, 1
    lo, hi = live[0], live[-1]
    if any(dims[d] != shape[d] for d in range(lo, hi + 1)):
        raise ValueError(f"an operand of shape {tuple(t.shape)} is not a block broadcast of {tuple(shape)}")
    inner, size = 1, 1
    for s in shape[hi + 1:]:
        inner *= s
    for s in shape[lo:hi + 1]:
        size *= s
    return t, inner, size
"""


def call(chain: Chain) -> Call:
    names = [f"t{k}" for k in range(len(chain.operands))]
    scalars = [f"s{k}" for k in range(len(chain.scalars))]
    shapes = ", ".join(f"{n}.shape" for n in names)
    # the output has the dtype of the floating operands (a bool mask is promoted, as torch does)
    floating = next(n for k, n in enumerate(names) if not chain.is_mask(k))
    body = (
        BLOCK_BROADCAST
        + f"\n\nshape = torch.broadcast_shapes({shapes})\ny = torch.empty(shape, dtype={floating}.dtype)\n"
    )
    args = []
    for n in names:
        body += f"{n}, {n}_inner, {n}_size = block({n}, shape)\n"
        args += [n, f"{n}_inner", f"{n}_size"]
    args += ["y", "y.numel()"] + [f"float({s})" for s in scalars]
    body += f"_KERNELS[y.dtype]({', '.join(args)})\nreturn y\n"
    return Call((*names, *scalars), body)


def block_broadcast(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    dims = [1] * (len(out) - len(shape)) + list(shape)
    if len(dims) != len(out):
        return False
    live = [d for d, s in enumerate(dims) if s != 1]
    return not live or all(dims[d] == out[d] for d in range(live[0], live[-1] + 1))


def tables() -> str:
    items = ", ".join(f"torch.{DTYPE_ENTRIES[s][2]}: _lib.chain_{s}" for s in SUFFIXES)
    return f"_KERNELS = {{{items}}}"
