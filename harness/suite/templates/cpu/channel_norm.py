"""Channel normalisations of NCHW tensors on the CPU: inference BatchNorm, GroupNorm, InstanceNorm.

More on it: docs/templates.md, "Template notes", templates/cpu/channel_norm.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.structure.patterns import Call, Found, pattern
from harness.suite.templates.cpu._cpp_blocks import DTYPE_ENTRIES, DTYPES, HEADERS, candidate, describe, kernel_table
from harness.suite.templates.cpu._rows import LANES_KNOB, VECTOR_KNOB, indent, moments

FAMILY = "normalization"
OPERATORS = ["batch_norm", "group_norm", "instance_norm"]
SUFFIXES = ["f32", "f64", "bf16", "f16"]

KNOBS = [
    {
        "name": "variance",
        "values": ["two_pass", "shifted", "welford"],
        "default": "two_pass",
        "layer": "algorithm",
        "doc": "group/instance norm: mean then squared deviations (two reads of a unit), shifted sums (one read), "
        "or Welford's online update per lane (one read, a division per step)",
        "operators": ["group_norm", "instance_norm"],  # batch_norm (inference) uses fixed running statistics
    },
    {
        "name": "accumulate",
        "values": ["double", "float"],
        "default": "double",
        "layer": "algorithm",
        "doc": "group/instance norm statistics in double (float32/16-bit widened), or in the compute type",
        "operators": ["group_norm", "instance_norm"],
    },
    {
        "name": "affine",
        "values": ["separate", "folded"],
        "default": "separate",
        "layer": "algorithm",
        "doc": "separate: (x - mean) * rstd * weight + bias per element; folded: per-channel a, b so that y = x * a + b "
        "(one multiply-add per element)",
    },
    {**LANES_KNOB, "operators": ["group_norm", "instance_norm"]},  # lanes split the statistics sweeps
    {
        "name": "schedule",
        "values": ["static", "dynamic"],
        "default": "static",
        "layer": "scheduling",
        "doc": "OpenMP schedule of the (sample, group) units or (sample, channel) planes over the threads",
    },
    VECTOR_KNOB,
]


def _plane(affine: str) -> str:
    """Normalise one plane of HW values xp -> yp with the channel's mean, rstd (double), weight wc, bias bc."""
    if affine == "folded":
        return """const C a = C(rstd * double(wc)), sh = C(double(bc) - mean * rstd * double(wc));  // y = x * a + sh
#pragma omp simd
for (int64_t i = 0; i < HW; ++i) yp[i] = D::store(D::load(xp[i]) * a + sh);"""
    return """const C m = C(mean), r = C(rstd);
#pragma omp simd
for (int64_t i = 0; i < HW; ++i) yp[i] = D::store((D::load(xp[i]) - m) * r * wc + bc);"""


def _schedule(s: dict) -> str:
    return "schedule(static)" if s["schedule"] == "static" else "schedule(dynamic, 1)"


def _group_source(s: dict) -> str:
    acc = "double" if s["accumulate"] == "double" else "C"
    run = f"""
// x, y: N x Cn x HW; G groups of cpg = Cn / G channels; a (sample, group) unit is cpg * HW contiguous values.
template <typename D, typename C = typename D::C, typename S = typename D::S>
static void run(const S* __restrict__ x, S* __restrict__ y, int64_t N, int64_t Cn, int64_t G, int64_t HW,
                const S* __restrict__ w, const S* __restrict__ b, double eps) {{
    using Part = PartT<C>;
    using A = typename Part::A;
    const int64_t cpg = Cn / G, len = cpg * HW;
    #pragma omp parallel for {_schedule(s)}
    for (int64_t u = 0; u < N * G; ++u) {{
        const S* __restrict__ xu = x + u * len;
        S* __restrict__ yu = y + u * len;
        const Part p = part_of<D>(xu, yu, 0, len);
        const double mean = double(p.mean);
        const double rstd = 1.0 / std::sqrt(std::max(double(p.m2) / double(len), 0.0) + eps);
        const int64_t c0 = (u % G) * cpg;
        for (int64_t j = 0; j < cpg; ++j) {{  // the unit is still in L2: write it channel by channel
            const C wc = D::load(w[c0 + j]), bc = D::load(b[c0 + j]);
            const S* __restrict__ xp = xu + j * HW;
            S* __restrict__ yp = yu + j * HW;
{indent(_plane(s["affine"]), 12)}        }}
    }}
}}
"""
    return moments(s["variance"], s["lanes"], acc) + run + _batch_stats_source(s)


def _batch_stats_source(s: dict) -> str:
    """Training-mode batch norm (statistics over the batch): per channel, the N strided (n, c) planes read in
    place and their moments merged with Chan's formula; no transposed copy of x (the structure-matched call)."""
    return f"""
// x, y: N x Cn x HW; per channel c: the statistics of its N planes of HW contiguous values, channels over the threads.
template <typename D, typename C = typename D::C, typename S = typename D::S>
static void run_batch_stats(const S* __restrict__ x, S* __restrict__ y, int64_t N, int64_t Cn, int64_t HW,
                            const S* __restrict__ w, const S* __restrict__ b, double eps) {{
    using Part = PartT<C>;
    #pragma omp parallel for {_schedule(s)}
    for (int64_t c = 0; c < Cn; ++c) {{
        Part p = part_of<D>(x + c * HW, y + c * HW, 0, HW);
        for (int64_t n = 1; n < N; ++n) p = merge<C>(p, part_of<D>(x + (n * Cn + c) * HW, y + (n * Cn + c) * HW, 0, HW));
        const double mean = double(p.mean);
        const double rstd = 1.0 / std::sqrt(std::max(double(p.m2) / double(N * HW), 0.0) + eps);
        const C wc = D::load(w[c]), bc = D::load(b[c]);
        for (int64_t n = 0; n < N; ++n) {{
            const S* __restrict__ xp = x + (n * Cn + c) * HW;
            S* __restrict__ yp = y + (n * Cn + c) * HW;
{indent(_plane(s["affine"]), 12)}        }}
    }}
}}
"""


def _batch_source(s: dict) -> str:
    return f"""
// x, y: N x Cn x HW; fixed per-channel running mean/var, weight, bias.
template <typename D, typename C = typename D::C, typename S = typename D::S>
static void run(const S* __restrict__ x, S* __restrict__ y, int64_t N, int64_t Cn, int64_t HW,
                const S* __restrict__ rmean, const S* __restrict__ rvar, const S* __restrict__ w,
                const S* __restrict__ b, double eps) {{
    #pragma omp parallel for collapse(2) {_schedule(s)}
    for (int64_t n = 0; n < N; ++n) {{
        for (int64_t c = 0; c < Cn; ++c) {{
            const double mean = double(D::load(rmean[c]));
            const double rstd = 1.0 / std::sqrt(double(D::load(rvar[c])) + eps);
            const C wc = D::load(w[c]), bc = D::load(b[c]);
            const S* __restrict__ xp = x + (n * Cn + c) * HW;
            S* __restrict__ yp = y + (n * Cn + c) * HW;
{indent(_plane(s["affine"]), 12)}        }}
    }}
}}
"""


def _entries(operator: str) -> str:
    lines = []
    for suffix in SUFFIXES:
        trait, t, _ = DTYPE_ENTRIES[suffix]
        if operator == "batch_norm":
            lines.append(
                f'extern "C" void batch_norm_{suffix}(const {t}* x, {t}* y, int64_t N, int64_t C, int64_t HW, '
                f"const {t}* mean, const {t}* var, const {t}* w, const {t}* b, double eps) "
                f"{{ run<{trait}>(x, y, N, C, HW, mean, var, w, b, eps); }}"
            )
        else:
            lines.append(
                f'extern "C" void {operator}_{suffix}(const {t}* x, {t}* y, int64_t N, int64_t C, int64_t G, '
                f"int64_t HW, const {t}* w, const {t}* b, double eps) {{ run<{trait}>(x, y, N, C, G, HW, w, b, eps); }}"
            )
            lines.append(
                f'extern "C" void {operator}_batch_stats_{suffix}(const {t}* x, {t}* y, int64_t N, int64_t C, '
                f"int64_t HW, const {t}* w, const {t}* b, double eps) "
                f"{{ run_batch_stats<{trait}>(x, y, N, C, HW, w, b, eps); }}"
            )
    return "\n".join(lines)


_PARAMS = """        dt = getattr(torch, dtype)
        self.eps = 1e-5
        self.weight = nn.Parameter((1.0 + 0.2 * torch.randn(channels)).to(dt))
        self.bias = nn.Parameter((0.2 * torch.randn(channels)).to(dt))
"""
_FORWARD_HEAD = """    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        N, C = x.shape[0], x.shape[1]
        HW = x.numel() // (N * C)
"""

MODELS = {
    "batch_norm": f"""class ModelNew(nn.Module):
    def __init__(self, channels: int, dtype: str):
        super().__init__()
        # Created like the reference's (same names, same order), so they hold the same values.
        dt = getattr(torch, dtype)
        self.eps = 1e-5
        self.register_buffer("running_mean", (0.5 * torch.randn(channels)).to(dt))
        self.register_buffer("running_var", (0.5 + torch.rand(channels)).to(dt))
        self.weight = nn.Parameter((1.0 + 0.2 * torch.randn(channels)).to(dt))
        self.bias = nn.Parameter((0.2 * torch.randn(channels)).to(dt))

{_FORWARD_HEAD}        _KERNELS[x.dtype](x, y, N, C, HW, self.running_mean.contiguous(), self.running_var.contiguous(),
                          self.weight.detach().contiguous(), self.bias.detach().contiguous(), self.eps)
        return y
""",
    "group_norm": f"""class ModelNew(nn.Module):
    def __init__(self, num_groups: int, channels: int, dtype: str):
        super().__init__()
        self.num_groups = num_groups
{_PARAMS}
{_FORWARD_HEAD}        _KERNELS[x.dtype](x, y, N, C, self.num_groups, HW, self.weight.detach().contiguous(),
                          self.bias.detach().contiguous(), self.eps)
        return y
""",
    "instance_norm": f"""class ModelNew(nn.Module):
    def __init__(self, channels: int, dtype: str):
        super().__init__()
{_PARAMS}
{_FORWARD_HEAD}        _KERNELS[x.dtype](x, y, N, C, C, HW, self.weight.detach().contiguous(), self.bias.detach().contiguous(),
                          self.eps)
        return y
""",
}


def render(operator: str, settings: dict) -> str:
    s = settings
    body = _batch_source(s) if operator == "batch_norm" else _group_source(s)
    source = f"{HEADERS}{DTYPES}{body}\n{_entries(operator)}\n"
    stats = operator != "batch_norm"
    variance = {
        "two_pass": "a mean sweep, then a squared-deviation sweep per unit",
        "shifted": "one sweep of shifted sums per unit",
        "welford": "one sweep of per-lane Welford updates per unit",
    }[s["variance"]]
    lines = [
        {
            "batch_norm": "batch_norm (inference): fixed running statistics, (sample, channel) planes over the threads",
            "group_norm": "group_norm: per (sample, group) unit statistics, units over the threads",
            "instance_norm": "instance_norm: per (sample, channel) plane statistics, planes over the threads",
        }[operator],
        f"variance={s['variance']}: " + (variance if stats else "not used (no statistics to compute)"),
        f"accumulate={s['accumulate']}: "
        + (
            ("statistics in " + ("double" if s["accumulate"] == "double" else "the compute type"))
            if stats
            else "not used"
        ),
        f"affine={s['affine']}: "
        + (
            "(x - mean) * rstd * weight + bias per element"
            if s["affine"] == "separate"
            else "y = x * a[c] + b[c], a and b folded per channel"
        ),
        f"lanes={s['lanes']}: "
        + (
            "not used"
            if not stats
            else "one omp-simd reduction per sweep"
            if s["lanes"] == 1
            else f"{s['lanes']} independent partial results per sweep"
        ),
        f"schedule={s['schedule']}: OpenMP schedule({s['schedule']}{', 1' if s['schedule'] == 'dynamic' else ''})",
        f"vector_width={s['vector_width']}: the compiler prefers {s['vector_width']}-bit vectors",
    ]
    return candidate(
        describe("channel_norm", operator, s, lines),
        source,
        s["vector_width"],
        kernel_table("_KERNELS", operator, SUFFIXES)
        + (
            "" if operator == "batch_norm" else "\n" + kernel_table("_BATCH_STATS", f"{operator}_batch_stats", SUFFIXES)
        ),
        MODELS[operator],
    )


# -- structure: what this template computes, for any task whose reference does the same ----------------------
_AFFINE = """
x = x.contiguous()
N, C = x.shape[0], x.shape[1]
HW = x.numel() // (N * C)
w = weight.contiguous() if weight is not None else torch.ones(C, dtype=x.dtype)
b = bias.contiguous() if bias is not None else torch.zeros(C, dtype=x.dtype)
"""


def _batch_norm_call(found: Found) -> Call:
    if found.get("training"):
        # Batch statistics, as the reference computes them in training mode: per channel over (N, H, W),
        # the N planes of each channel read in place (run_batch_stats: two transposed copies cost more than the
        # kernel, and the native probe counts their time in libtorch as the reference's); planes shorter than 64
        # values (a 2-D batch norm) would be read one value per cache line, so those go through a transposed copy.
        body = (
            _AFFINE
            + """if HW < 64:  # short planes (a 2-D batch norm: one value each): a group norm of the transposed copy
    xt = x.reshape(N, C, HW).transpose(0, 1).contiguous()
    yt = torch.empty_like(xt)
    _KERNELS[x.dtype](xt, yt, 1, C, C, N * HW, w, b, float(eps))
    return yt.transpose(0, 1).reshape(x.shape).contiguous()
y = torch.empty_like(x)
_BATCH_STATS[x.dtype](x, y, N, C, HW, w, b, float(eps))
return y
"""
        )
        return Call(("x", "weight", "bias", "running_mean", "running_var", "eps"), body)
    body = (
        _AFFINE
        + """y = torch.empty_like(x)
_KERNELS[x.dtype](x, y, N, C, HW, running_mean.contiguous(), running_var.contiguous(), w, b, float(eps))
return y
"""
    )
    return Call(("x", "weight", "bias", "running_mean", "running_var", "eps"), body)


def _group_call(groups: str) -> Callable[[Found], Call]:
    def call(found: Found) -> Call:
        body = (
            _AFFINE
            + f"""y = torch.empty_like(x)
_KERNELS[x.dtype](x, y, N, C, {groups}, HW, w, b, float(eps))
return y
"""
        )
        return Call(
            ("x", "weight", "bias", "groups", "eps") if groups == "groups" else ("x", "weight", "bias", "eps"), body
        )

    return call


def _mode(training: bool) -> Callable[[Found], str | None]:
    """Inference batch norm runs the batch_norm kernels; training mode (batch statistics) the group_norm ones."""

    def where(found: Found) -> str | None:
        if bool(found.get("training")) != training:
            return "training-mode batch norm (the group_norm kernels)" if not training else "inference batch norm"
        if not training and ("running_mean" not in found.tensors or "running_var" not in found.tensors):
            return "an inference batch norm without running statistics"
        if len(found.shapes["x"]) < 2:
            return "a batch norm of a 1-D tensor"
        return None

    return where


_BN = {"static": {"training": "training"}, "scalars": {"eps": "eps"}}
PATTERNS = (
    [
        pattern(
            "group_norm" if training else "batch_norm",
            ("batch_norm:batch_norm", ["x", w, b, m, v], _BN),
            call=_batch_norm_call,
            where=_mode(training),
            roles=("x", "weight", "bias", "running_mean", "running_var"),
        )
        for training in (False, True)
        for w in ("weight", "-")
        for b in ("bias", "-")
        for m, v in (("running_mean", "running_var"), ("-", "-"))
        if (w == "-") == (b == "-")
    ]
    + [
        pattern(
            "group_norm",
            ("group_norm:group_norm", ["x", w, b], {"scalars": {"groups": "groups", "eps": "eps"}}),
            call=_group_call("groups"),
            roles=("x", "weight", "bias"),
        )
        for w, b in (("weight", "bias"), ("-", "-"))
    ]
    + [
        pattern(
            "instance_norm",
            ("instance_norm:instance_norm", ["x", w, b], {"scalars": {"eps": "eps"}}),
            call=_group_call("C"),
            roles=("x", "weight", "bias"),
        )
        for w, b in (("weight", "bias"), ("-", "-"))
    ]
)
