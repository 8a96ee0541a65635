"""Channel-epilogue template for the fused family: tanh((x + bias[c]) * scale) over an NCHW tensor.

More on it: docs/templates.md, "Template notes", templates/cpu/bias_scale_tanh.
"""

from harness.structure.patterns import Call, Found, pattern
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import PRELUDE, isa_define

FAMILY = "fused"
OPERATORS = ["bias_scale_tanh"]
KNOBS = [
    {
        "name": "tanh",
        "values": ["libm", "exp_poly"],
        "default": "libm",
        "layer": "algorithm",
        "doc": "'libm': std::tanh per element (scalar); 'exp_poly': a vectorisable exp-based tanh",
    },
    {
        "name": "vector_width",
        "values": [256, 512],
        "default": 256,
        "layer": "vectorization",
        "doc": "SIMD width the compiler prefers for the loops (-mprefer-vector-width), in bits",
    },
    {
        "name": "chunk",
        "values": ["plane", "16384", "131072"],
        "default": "plane",
        "layer": "parallelization",
        "doc": "OpenMP work unit: one (image, channel) plane, or flat runs of this many elements",
    },
]

KERNEL = r"""
// ==== y = tanh((x + bias[c]) * scale) ===========================================================
template <class Acc> static inline Acc tanh_of(Acc v) {
#if KOPE_TANH_POLY
    return ftanh(v);
#else
    return std::tanh(v);
#endif
}

// elements [i0, i1) of plane-major data whose channel is constant over the range
template <class T>
static inline void run(const T* x, T* y, i64 i0, i64 i1, typename AccOf<T>::type b, typename AccOf<T>::type s) {
    typedef typename AccOf<T>::type Acc;
    #pragma omp simd
    for (i64 i = i0; i < i1; ++i) put(y + i, tanh_of<Acc>(rounded<T>(rounded<T>(to_acc(x[i]) + b) * s)));
}

template <class T>
static void bias_scale_tanh(const T* x, const T* bias, T* y, i64 N, i64 C, i64 HW, double scale) {
    typedef typename AccOf<T>::type Acc;
    const Acc s = Acc(scale);
#if KOPE_CHUNK == 0
    #pragma omp parallel for schedule(static)
    for (i64 p = 0; p < N * C; ++p) run(x, y, p * HW, (p + 1) * HW, to_acc(bias[p % C]), s);
#else
    const i64 total = N * C * HW;
    #pragma omp parallel for schedule(static)
    for (i64 t = 0; t < cdiv(total, KOPE_CHUNK); ++t) {
        const i64 end = std::min(total, (t + 1) * KOPE_CHUNK);
        for (i64 i = t * KOPE_CHUNK; i < end;) {              // split the run where the channel changes
            const i64 plane = i / HW, stop = std::min(end, (plane + 1) * HW);
            run(x, y, i, stop, to_acc(bias[plane % C]), s);
            i = stop;
        }
    }
#endif
}
"""

ENTRY = entry_macro(
    "bias_scale_tanh",
    "const PT* x, const PT* bias, PT* y, int64_t N, int64_t C, int64_t HW, double scale",
    "bias_scale_tanh(cptr<T>(x), cptr<T>(bias), wptr<T>(y), N, C, HW, scale);",
)

BODY = """
class ModelNew(nn.Module):
    def __init__(self, channels, scale, dtype):
        super().__init__()
        # The reference's parameter: a (channels, 1, 1) bias.
        self.bias = nn.Parameter((0.5 * torch.randn(channels, 1, 1)).to(getattr(torch, dtype)))
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        n, c, h, w = x.shape
        y = torch.empty_like(x)
        _KERNELS[x.dtype](x, self.bias.detach().contiguous(), y, n, c, h * w, float(self.scale))
        return y
"""


def render(operator: str, settings: dict) -> str:
    chunk = 0 if settings["chunk"] == "plane" else int(settings["chunk"])
    cpp = (
        isa_define("omp_simd")
        + f"#define KOPE_TANH_POLY {int(settings['tanh'] == 'exp_poly')}  // tanh={settings['tanh']}\n"
        + f"#define KOPE_CHUNK {chunk}  // chunk={settings['chunk']}\n"
        + PRELUDE
        + KERNEL
        + CASTS
        + ENTRY
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template bias_scale_tanh.py "
        f"({settings_line(settings)}).\n\nOne fused pass: y = tanh((x + bias[c]) * scale), vectorised over each "
        "plane (the knobs are the\n#defines at the top of _SOURCE and the compile flags)."
    )
    return module(doc, cpp, kernel_table("bias_scale_tanh") + BODY, vector_width=settings["vector_width"])


# -- structure: what this template computes, for any task whose reference does the same ----------------------
def _call(found: Found) -> Call:
    body = """
x = x.contiguous()
n, c = x.shape[0], x.shape[1]
y = torch.empty_like(x)
_KERNELS[x.dtype](x, bias.reshape(-1).contiguous(), y, n, c, x.numel() // (n * c), float(scale))
return y
"""
    return Call(("x", "bias", "scale"), body)


def _per_channel(found: Found) -> str | None:
    x, b = found.shapes["x"], found.shapes["bias"]
    if len(x) < 3 or b not in ((x[1],) + (1,) * (len(x) - 2), (1, x[1]) + (1,) * (len(x) - 2)):
        return f"a bias of shape {b} for an input of shape {x} (one per channel is fused)"
    return None


PATTERNS = [
    pattern(
        "bias_scale_tanh",
        ("binary:add", ["x", "bias"]),
        ("binary:mul", ["$0", "-"], {"scalars": {"scale": "scalar"}}),
        ("unary:tanh", ["$1"]),
        call=_call,
        where=_per_channel,
        dtypes=("float32", "float64", "bfloat16"),
    )
]
