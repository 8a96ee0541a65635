"""Transposed-convolution template for the convolution family: conv_transpose2d (NCHW, groups 1, with bias).

More on it: docs/templates.md, "Template notes", templates/cpu/conv_transpose.
"""

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC, PRELUDE, isa_define

FAMILY = "convolution"
OPERATORS = ["conv_transpose2d"]
KNOBS = [
    {
        "name": "algorithm",
        "values": ["direct", "gemm_col2im"],
        "default": "direct",
        "layer": "algorithm",
        "doc": "'direct' gathers each output row's contributions tap by tap; 'gemm_col2im' runs one GEMM for all "
        "kernel taps, then gathers them into the output",
    },
    {
        "name": "micro_kernel",
        "values": ["4x1", "6x2", "8x3"],
        "default": "4x1",
        "layer": "instruction",
        "doc": core.MICRO_DOC + "; direct: MR output channels per task",
    },
    core.knob("isa", ISA_DOC),
    {
        "name": "tiles",
        "values": ["32x128x256", "96x256x1024", "192x384x3072"],
        "default": "32x128x256",
        "layer": "tiling",
        "doc": core.TILES_DOC + " (gemm_col2im only)",
    },
]

KERNEL = r"""
// ==== transposed convolution =================================================================
template <class T> struct TconvArgs {
    const T* x; const T* w; const T* bias; T* y;    // w: (C, O, K, K); bias may be null
    i64 N, C, H, W, O, K, S, P, OH, OW;
};

// For kernel column kw: the input columns iw whose output column iw*S - P + kw lies in [0, OW).
static inline void tap_range(i64 kw, i64 S, i64 P, i64 W, i64 OW, i64& lo, i64& hi) {
    const i64 shift = kw - P;                       // output column = iw * S + shift
    lo = shift >= 0 ? 0 : cdiv(-shift, S);
    hi = OW - 1 - shift < 0 ? 0 : std::min(W, (OW - 1 - shift) / S + 1);
}

#if KOPE_TCONV_ALGO == 0
// Output columns are kept by phase (ow mod S), so every tap's contribution is a contiguous SIMD update:
// tap kw sends input column iw to output column iw*S + kw - P, i.e. to position iw + base of one phase.
template <class T>
static void tconv(const TconvArgs<T>& a) {
    typedef typename AccOf<T>::type Acc;
    const i64 blocks = cdiv(a.O, MR), taps = a.K * a.K, PL = cdiv(a.OW, a.S);   // PL: columns per phase
    #pragma omp parallel for schedule(static)
    for (i64 t = 0; t < a.N * blocks * a.OH; ++t) {
        const i64 n = t / (blocks * a.OH), o0 = t / a.OH % blocks * MR, oh = t % a.OH;
        const int on = int(std::min<i64>(MR, a.O - o0));
        Acc* acc = scratch<Acc, 2>(size_t(MR * a.S * PL));          // acc[q][phase][position]
        std::fill(acc, acc + MR * a.S * PL, Acc(0));
        for (i64 kh = 0; kh < a.K; ++kh) {
            const i64 r = oh + a.P - kh;               // = ih * S for a contributing input row
            if (r < 0 || r % a.S != 0 || r / a.S >= a.H) continue;
            const i64 ih = r / a.S;
            for (i64 c = 0; c < a.C; ++c) {
                const T* row = a.x + ((n * a.C + c) * a.H + ih) * a.W;
                for (i64 kw = 0; kw < a.K; ++kw) {
                    i64 lo, hi;
                    tap_range(kw, a.S, a.P, a.W, a.OW, lo, hi);
                    const i64 shift = kw - a.P, phase = ((shift % a.S) + a.S) % a.S, base = (shift - phase) / a.S;
                    for (int q = 0; q < on; ++q) {
                        const Acc wv = to_acc(a.w[(c * a.O + o0 + q) * taps + kh * a.K + kw]);
                        Acc* dst = acc + (q * a.S + phase) * PL + base;
                        #pragma omp simd
                        for (i64 iw = lo; iw < hi; ++iw) dst[iw] += wv * to_acc(row[iw]);
                    }
                }
            }
        }
        for (int q = 0; q < on; ++q) {
            const Acc b = a.bias != nullptr ? to_acc(a.bias[o0 + q]) : Acc(0);
            const Acc* aq = acc + q * a.S * PL;
            T* out = a.y + ((n * a.O + o0 + q) * a.OH + oh) * a.OW;
            for (i64 ow = 0; ow < a.OW; ++ow) put(out + ow, aq[(ow % a.S) * PL + ow / a.S] + b);
        }
    }
}
#else
// The GEMM's epilogue: rows of cols (O*K*K x H*W) in the accumulator type.
template <class T> struct ColsOut {
    typedef typename AccOf<T>::type Acc;
    static constexpr bool rows_hook = false;
    Acc* cols; i64 N;
    Acc* accumulator;
    void row(i64, i64 i, i64 j0, const Acc* v, i64 n) const { std::copy(v, v + n, cols + i * N + j0); }
    void rows_done(i64, i64, i64) const {}
};

template <class T>
static void tconv(const TconvArgs<T>& a) {
    typedef typename AccOf<T>::type Acc;
    const i64 M = a.O * a.K * a.K, HW = a.H * a.W;
    Acc* cols = scratch<Acc, 2>(size_t(M * HW));
    StridedA<T> A{{a.w, 1, M, 0}};                  // A[m, c] = w[c, m]: W^T
    for (i64 n = 0; n < a.N; ++n) {
        StridedB<T> B{{a.x + n * a.C * HW, HW, 1, 0}};
        ColsOut<T> epi{cols, HW, cols};
        gemm(1, M, HW, a.C, A, B, epi);
        #pragma omp parallel for schedule(static)
        for (i64 t = 0; t < a.O * a.OH; ++t) {       // col2im: gather every tap landing on output row (o, oh)
            const i64 o = t / a.OH, oh = t % a.OH;
            Acc* acc = scratch<Acc, 3>(size_t(a.OW));
            std::fill(acc, acc + a.OW, a.bias != nullptr ? to_acc(a.bias[o]) : Acc(0));
            for (i64 kh = 0; kh < a.K; ++kh) {
                const i64 r = oh + a.P - kh;
                if (r < 0 || r % a.S != 0 || r / a.S >= a.H) continue;
                const i64 ih = r / a.S;
                for (i64 kw = 0; kw < a.K; ++kw) {
                    i64 lo, hi;
                    tap_range(kw, a.S, a.P, a.W, a.OW, lo, hi);
                    const Acc* src = cols + ((o * a.K + kh) * a.K + kw) * HW + ih * a.W;
                    Acc* dst = acc + kw - a.P;
                    #pragma omp simd
                    for (i64 iw = lo; iw < hi; ++iw) dst[iw * a.S] += src[iw];
                }
            }
            T* out = a.y + ((n * a.O + o) * a.OH + oh) * a.OW;
            #pragma omp simd
            for (i64 ow = 0; ow < a.OW; ++ow) put(out + ow, acc[ow]);
        }
    }
}
#endif
"""

ENTRY = entry_macro(
    "conv_transpose2d",
    "const PT* x, const PT* w, const PT* bias, PT* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, "
    "int64_t K, int64_t S, int64_t P, int64_t OH, int64_t OW",
    """
TconvArgs<T> a{cptr<T>(x), cptr<T>(w), cptr<T>(bias), wptr<T>(y), N, C, H, W, O, K, S, P, OH, OW};
tconv(a);
""",
)

BODY = """
class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, dtype):
        super().__init__()
        # The reference's module, so the harness copies its parameters in by name.
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                                       output_padding=output_padding)
        self.conv.to(getattr(torch, dtype))

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight.detach().contiguous()  # (in, out, k, k)
        bias = self.conv.bias.detach().contiguous()
        n, c, h, wd = x.shape
        o, k = w.shape[1], w.shape[2]
        s, p, op = self.conv.stride[0], self.conv.padding[0], self.conv.output_padding[0]
        oh, ow = (h - 1) * s - 2 * p + k + op, (wd - 1) * s - 2 * p + k + op
        y = torch.empty(n, o, oh, ow, dtype=x.dtype)
        _KERNELS[x.dtype](x, w, bias, y, n, c, h, wd, o, k, s, p, oh, ow)
        return y
"""


def render(operator: str, settings: dict) -> str:
    algo = int(settings["algorithm"] == "gemm_col2im")
    cpp = (
        isa_define(settings["isa"])
        + core.defines(settings["micro_kernel"], settings["tiles"], True, "mn")
        + f"#define KOPE_TCONV_ALGO {algo}  // algorithm={settings['algorithm']}\n"
        + PRELUDE
        + core.GEMM
        + KERNEL
        + CASTS
        + ENTRY
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template conv_transpose.py "
        f"({settings_line(settings)}).\n\nTransposed convolution by gathering each output row's taps, directly or "
        "from one GEMM's products\n(the knobs are the #defines at the top of _SOURCE)."
    )
    return module(doc, cpp, kernel_table("conv_transpose2d") + BODY)


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    body = """
x = x.contiguous()
w = weight.contiguous()  # (in, out, k, k)
b = bias.reshape(-1).contiguous() if bias is not None else None
n, c, h, wd = x.shape
o, k = w.shape[1], w.shape[2]
s, p, op = stride[0], padding[0], output_padding[0]
oh, ow = (h - 1) * s - 2 * p + k + op, (wd - 1) * s - 2 * p + k + op
y = torch.empty(n, o, oh, ow, dtype=x.dtype)
_KERNELS[x.dtype](x, w, b, y, n, c, h, wd, o, k, s, p, oh, ow)
return y
"""
    return Call(("x", "weight", "bias", "stride", "padding", "output_padding"), body)


def _square(found: Found) -> str | None:
    w = found.shapes["weight"]
    if found.get("groups") != 1 or found.get("spatial") != 2:
        return "grouped or non-2-D transposed convolution"
    if any(d != 1 for d in found.get("dilation") or ()):
        return "a dilated transposed convolution"
    if len(w) != 4 or w[2] != w[3]:
        return f"a non-square kernel {w[2:]}"
    for name in ("stride", "padding", "output_padding"):
        value = tuple(found.get(name) or ())
        if len(set(value)) > 1:
            return f"{name}={value} differs between height and width"
    return None


_DT = ("float32", "float64", "bfloat16")
PATTERNS = [
    pattern(
        "conv_transpose2d",
        (
            "conv:conv_transpose",
            ["x", "weight", b],
            {
                "info": {"groups": "groups", "dilation": "dilation", "spatial": "spatial"},
                "scalars": {"stride": "stride", "padding": "padding", "output_padding": "output_padding"},
            },
        ),
        call=_call,
        where=_square,
        dtypes=_DT,
        roles=("x", "weight", "bias"),
    )
    for b in ("bias", "-")
]
