"""Sliding-window template for the convolution family: depthwise_conv2d, max_pool2d, avg_pool2d.

More on it: docs/templates.md, "Template notes", templates/cpu/window.
"""

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import PRELUDE, isa_define

FAMILY = "convolution"
OPERATORS = ["depthwise_conv2d", "max_pool2d", "avg_pool2d"]
KNOBS = [
    {
        "name": "algorithm",
        "values": ["checked", "split", "padded"],
        "default": "checked",
        "layer": "algorithm",
        "doc": "window edges: 'checked' bounds-tests every tap, 'split' loops each tap over its in-bounds output "
        "range, 'padded' reads from a padded copy of the input rows",
    },
    {
        "name": "unroll_kernel",
        "values": [False, True],
        "default": False,
        "layer": "unrolling",
        "doc": "specialise the loops for K in (2, 3, 5, 7) and stride in (1, 2) so the tap loops fully unroll",
    },
    {
        "name": "parallel",
        "values": ["planes", "rows_16", "rows_4"],
        "default": "planes",
        "layer": "parallelization",
        "doc": "OpenMP tasks: whole (image, channel) planes, or blocks of 16 or 4 output rows of a plane",
    },
]
OP_CODES = {"depthwise_conv2d": 0, "max_pool2d": 1, "avg_pool2d": 2}
ALGO_CODES = {"checked": 0, "split": 1, "padded": 2}
ROWS = {"planes": 0, "rows_16": 16, "rows_4": 4}

WINDOW = r"""
// ==== sliding windows over (image, channel) planes ==============================================
template <class T> struct WinArgs {
    const T* x; const T* w; const T* bias; T* y;   // w (C x K x K) and bias (C) for depthwise only
    i64 N, C, H, W, K, S, P, OH, OW;
};

// The operator: init / combine (acc, input value, tap weight) / finalize / padding value.
template <class Acc> struct WinOp {
#if KOPE_WIN_OP == 1
    static Acc init() { return -INFINITY; }
    static Acc combine(Acc acc, Acc x, Acc) { return x > acc ? x : acc; }
#else
    static Acc init() { return Acc(0); }
    static Acc combine(Acc acc, Acc x, Acc wv) { return KOPE_WIN_OP == 0 ? acc + wv * x : acc + x; }
#endif
    static Acc pad() { return init(); }
};

template <class T> static inline typename AccOf<T>::type finalize(const WinArgs<T>& a, i64 c, typename AccOf<T>::type acc) {
#if KOPE_WIN_OP == 0
    return acc + to_acc(a.bias[c]);
#elif KOPE_WIN_OP == 2
    return acc / typename AccOf<T>::type(a.K * a.K);   // count_include_pad: the divisor is always K * K
#else
    return acc;
#endif
}

// Output rows [oh0, oh1) of plane pc (= n * C + c); wl: the plane's K x K weights (depthwise).
template <int KK, int SS, class T>
static void plane_rows(const WinArgs<T>& a, i64 pc, i64 oh0, i64 oh1, const typename AccOf<T>::type* wl) {
    typedef typename AccOf<T>::type Acc;
    typedef WinOp<Acc> Op;
    const i64 K = KK ? KK : a.K, S = SS ? SS : a.S, P = a.P, H = a.H, W = a.W, OW = a.OW, c = pc % a.C;
    const T* in = a.x + pc * H * W;
    T* out = a.y + pc * a.OH * OW;
#if KOPE_WIN_ALGO == 0
    for (i64 oh = oh0; oh < oh1; ++oh) {
        #pragma omp simd
        for (i64 ow = 0; ow < OW; ++ow) {
            Acc acc = Op::init();
            for (i64 kh = 0; kh < K; ++kh) {
                const i64 ih = oh * S - P + kh;
                for (i64 kw = 0; kw < K; ++kw) {
                    const i64 iw = ow * S - P + kw;
                    if (ih >= 0 && ih < H && iw >= 0 && iw < W) acc = Op::combine(acc, to_acc(in[ih * W + iw]), wl[kh * K + kw]);
                }
            }
            put(out + oh * OW + ow, finalize(a, c, acc));
        }
    }
#elif KOPE_WIN_ALGO == 1
    Acc* acc = scratch<Acc, 4>(size_t(OW));
    for (i64 oh = oh0; oh < oh1; ++oh) {
        std::fill(acc, acc + OW, Op::init());
        for (i64 kh = 0; kh < K; ++kh) {
            const i64 ih = oh * S - P + kh;
            if (ih < 0 || ih >= H) continue;
            const T* row = in + ih * W;
            for (i64 kw = 0; kw < K; ++kw) {
                const i64 shift = kw - P;                     // input column = ow * S + shift
                const i64 lo = shift >= 0 ? 0 : cdiv(-shift, S);
                const i64 hi = W - 1 - shift < 0 ? 0 : std::min(OW, (W - 1 - shift) / S + 1);
                const Acc wv = wl[kh * K + kw];
                #pragma omp simd
                for (i64 ow = lo; ow < hi; ++ow) acc[ow] = Op::combine(acc[ow], to_acc(row[ow * S + shift]), wv);
            }
        }
        #pragma omp simd
        for (i64 ow = 0; ow < OW; ++ow) put(out + oh * OW + ow, finalize(a, c, acc[ow]));
    }
#else
    const i64 R = (oh1 - 1 - oh0) * S + K, PW = W + 2 * P, top = oh0 * S - P;   // padded rows needed
    Acc* buf = scratch<Acc, 5>(size_t(R * PW));
    Acc* acc = scratch<Acc, 4>(size_t(OW));
    for (i64 r = 0; r < R; ++r) {
        Acc* b = buf + r * PW;
        const i64 ih = top + r;
        if (ih < 0 || ih >= H) {
            std::fill(b, b + PW, Op::pad());
            continue;
        }
        std::fill(b, b + P, Op::pad());
        std::fill(b + P + W, b + PW, Op::pad());
        const T* row = in + ih * W;
        #pragma omp simd
        for (i64 iw = 0; iw < W; ++iw) b[P + iw] = to_acc(row[iw]);
    }
    for (i64 oh = oh0; oh < oh1; ++oh) {
        std::fill(acc, acc + OW, Op::init());
        for (i64 kh = 0; kh < K; ++kh) {
            const Acc* b = buf + ((oh - oh0) * S + kh) * PW;
            for (i64 kw = 0; kw < K; ++kw) {
                const Acc wv = wl[kh * K + kw];
                #pragma omp simd
                for (i64 ow = 0; ow < OW; ++ow) acc[ow] = Op::combine(acc[ow], b[ow * S + kw], wv);
            }
        }
        #pragma omp simd
        for (i64 ow = 0; ow < OW; ++ow) put(out + oh * OW + ow, finalize(a, c, acc[ow]));
    }
#endif
}

template <class T>
static void run_rows(const WinArgs<T>& a, i64 pc, i64 oh0, i64 oh1, const typename AccOf<T>::type* wl) {
#if KOPE_WIN_UNROLL
    switch (a.K * 16 + a.S) {                       // the common windows, with K and S as constants
        case 2 * 16 + 1: plane_rows<2, 1>(a, pc, oh0, oh1, wl); return;
        case 2 * 16 + 2: plane_rows<2, 2>(a, pc, oh0, oh1, wl); return;
        case 3 * 16 + 1: plane_rows<3, 1>(a, pc, oh0, oh1, wl); return;
        case 3 * 16 + 2: plane_rows<3, 2>(a, pc, oh0, oh1, wl); return;
        case 5 * 16 + 1: plane_rows<5, 1>(a, pc, oh0, oh1, wl); return;
        case 5 * 16 + 2: plane_rows<5, 2>(a, pc, oh0, oh1, wl); return;
        case 7 * 16 + 1: plane_rows<7, 1>(a, pc, oh0, oh1, wl); return;
        case 7 * 16 + 2: plane_rows<7, 2>(a, pc, oh0, oh1, wl); return;
        default: break;
    }
#endif
    plane_rows<0, 0>(a, pc, oh0, oh1, wl);
}

template <class T>
static void window(const WinArgs<T>& a) {
    typedef typename AccOf<T>::type Acc;
    const i64 rows = KOPE_WIN_ROWS ? KOPE_WIN_ROWS : a.OH, blocks = cdiv(a.OH, rows), taps = a.K * a.K;
    #pragma omp parallel for schedule(static)
    for (i64 t = 0; t < a.N * a.C * blocks; ++t) {
        const i64 pc = t / blocks, oh0 = t % blocks * rows, c = pc % a.C;
        Acc* wl = scratch<Acc, 3>(size_t(taps));
        for (i64 q = 0; q < taps; ++q) wl[q] = a.w != nullptr ? to_acc(a.w[c * taps + q]) : Acc(0);
        run_rows(a, pc, oh0, std::min(a.OH, oh0 + rows), wl);
    }
}
"""

ENTRY = entry_macro(
    "window",
    "const PT* x, const PT* w, const PT* bias, PT* y, int64_t N, int64_t C, int64_t H, int64_t W, int64_t K, "
    "int64_t S, int64_t P, int64_t OH, int64_t OW",
    """
WinArgs<T> a{cptr<T>(x), cptr<T>(w), cptr<T>(bias), wptr<T>(y), N, C, H, W, K, S, P, OH, OW};
window(a);
""",
)

_FORWARD = """
    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        k, s, p = {ksp}
        oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
        y = torch.empty(n, c, oh, ow, dtype=x.dtype)
        _KERNELS[x.dtype](x, {params}, y, n, c, h, w, k, s, p, oh, ow)
        return y
"""
_POOL = (
    "kernel_size, stride, padding",
    """
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding""",
    _FORWARD.format(ksp="self.kernel_size, self.stride, self.padding", params="None, None"),
)
MODELS = {
    "depthwise_conv2d": (
        "channels, kernel_size, stride, padding, dtype",
        """
        self.conv = nn.Conv2d(channels, channels, kernel_size, stride=stride, padding=padding, groups=channels)
        self.conv.to(getattr(torch, dtype))""",
        _FORWARD.format(
            ksp="self.conv.kernel_size[0], self.conv.stride[0], self.conv.padding[0]",
            params="self.conv.weight.detach().contiguous(), self.conv.bias.detach().contiguous()",
        ),
    ),
    "max_pool2d": _POOL,
    "avg_pool2d": _POOL,
}


def render(operator: str, settings: dict) -> str:
    cpp = (
        isa_define("omp_simd")
        + f"#define KOPE_WIN_OP {OP_CODES[operator]}  // {operator}\n"
        + f"#define KOPE_WIN_ALGO {ALGO_CODES[settings['algorithm']]}  // algorithm={settings['algorithm']}\n"
        + f"#define KOPE_WIN_UNROLL {int(settings['unroll_kernel'])}  // unroll_kernel={settings['unroll_kernel']}\n"
        + f"#define KOPE_WIN_ROWS {ROWS[settings['parallel']]}  // parallel={settings['parallel']}\n"
        + PRELUDE
        + WINDOW
        + CASTS
        + ENTRY
    )
    init_args, init_body, forward = MODELS[operator]
    body = (
        kernel_table("window") + "\n\nclass ModelNew(nn.Module):\n"
        f"    def __init__(self, {init_args}):\n        super().__init__()\n        {init_body.strip()}\n" + forward
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template window.py ({settings_line(settings)}).\n\n"
        "Each (image, channel) plane is reduced window by window (the knobs are the #defines at the top\n"
        "of _SOURCE: edge handling, kernel-size specialisation, OpenMP work split)."
    )
    return module(doc, cpp, body)


# -- structure: what this template computes, for any task whose reference does the same ----------------------
_WINDOW = """
x = x.contiguous()
n, c, h, w = x.shape
k, s, p = kernel[0], stride[0], padding[0]
oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
y = torch.empty(n, c, oh, ow, dtype=x.dtype)
"""


def _pool_call(found: Found) -> Call:
    return Call(
        ("x", "kernel", "stride", "padding"),
        _WINDOW + "_KERNELS[x.dtype](x, None, None, y, n, c, h, w, k, s, p, oh, ow)\nreturn y\n",
    )


def _depthwise_call(found: Found) -> Call:
    body = (
        "kernel = (weight.shape[2],)\n"
        + _WINDOW
        + """wt = weight.contiguous()
b = bias.reshape(-1).contiguous() if bias is not None else torch.zeros(c, dtype=x.dtype)
_KERNELS[x.dtype](x, wt, b, y, n, c, h, w, k, s, p, oh, ow)
return y
"""
    )
    return Call(("x", "weight", "bias", "stride", "padding"), body)


def _symmetric(found: Found) -> str | None:
    if len(found.shapes["x"]) != 4:
        return f"a {len(found.shapes['x']) - 2}-D window (the kernels slide over 2-D planes)"
    for name in ("kernel", "stride", "padding"):
        value = tuple(found.get(name) or found.get(name) or ())
        if len(set(value)) > 1:
            return f"{name}={value} differs between height and width"
    if found.get("ceil_mode"):
        return "ceil_mode=True"
    if any(d != 1 for d in found.get("dilation") or ()):
        return "a dilated window"
    if found.pattern.operator == "avg_pool2d" and (
        not found.get("count_include_pad", True) or found.get("divisor_override") is not None
    ):
        return "an average pool that does not divide by the window size"
    return None


def _depthwise(found: Found) -> str | None:
    w, x = found.shapes["weight"], found.shapes["x"]
    if found.get("spatial") != 2 or len(w) != 4 or w[1] != 1 or w[0] != x[1] or found.get("groups") != x[1]:
        return "not a depthwise convolution (groups = channels, one filter each)"
    if w[2] != w[3]:
        return f"a non-square kernel {w[2:]}"
    return _symmetric(found)


_POOL_ATTRS = {
    "scalars": {"kernel": "kernel", "stride": "stride", "padding": "padding"},
    "info": {
        "ceil_mode": "ceil_mode",
        "dilation": "dilation",
        "count_include_pad": "count_include_pad",
        "divisor_override": "divisor_override",
    },
}
_DT = ("float32", "float64", "bfloat16")
PATTERNS = [
    pattern("max_pool2d", ("max_pool:max_pool2d", ["x"], _POOL_ATTRS), call=_pool_call, where=_symmetric, dtypes=_DT),
    pattern("avg_pool2d", ("avg_pool:avg_pool2d", ["x"], _POOL_ATTRS), call=_pool_call, where=_symmetric, dtypes=_DT),
] + [
    pattern(
        "depthwise_conv2d",
        (
            "conv:conv",
            ["x", "weight", b],
            {
                "info": {"groups": "groups", "dilation": "dilation", "spatial": "spatial"},
                "scalars": {"stride": "stride", "padding": "padding"},
            },
        ),
        call=_depthwise_call,
        where=_depthwise,
        dtypes=_DT,
        roles=("x", "weight", "bias"),
    )
    for b in ("bias", "-")
]
