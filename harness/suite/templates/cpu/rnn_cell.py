"""RNN-cell template for the block family: one step of lstm_cell and gru_cell.

More on it: docs/templates.md, "Template notes", templates/cpu/rnn_cell.
"""

from harness.structure.patterns import whole_graph
from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.blocks import BLOCKS
from harness.suite.cpp_kit.candidate import CASTS, entry_macro, kernel_table, module, settings_line
from harness.suite.cpp_kit.prelude import ISA_DOC, PRELUDE, isa_define

FAMILY = "block"
OPERATORS = ["lstm_cell", "gru_cell"]
KNOBS = [
    {
        "name": "fusion",
        "values": ["separate", "fused"],
        "default": "separate",
        "layer": "fusion",
        "doc": "'separate': the gate arithmetic as a pass after both GEMMs; 'fused': run on each block of rows the "
        "hidden-gate GEMM completes",
    },
    core.knob("micro_kernel"),
    core.knob("isa", ISA_DOC),
    core.knob("tiles"),
    core.knob("parallel"),
]

CELLS = r"""
// ==== RNN cells ==============================================================================
// gi: input gates (rows x G*Hd), gh: hidden gates; R(): bfloat16 rounding where the reference rounds.
template <class T>
static void lstm_rows(const T* gi, const T* gh, const T* c, T* out, i64 rows, i64 Hd, i64 i0, i64 i1) {
    typedef typename AccOf<T>::type Acc;
    for (i64 i = i0; i < i1; ++i) {
        const T* a = gi + i * 4 * Hd;
        const T* b = gh + i * 4 * Hd;
        #pragma omp simd
        for (i64 j = 0; j < Hd; ++j) {
            Acc g[4];
            for (int k = 0; k < 4; ++k) g[k] = rounded<T>(to_acc(a[k * Hd + j]) + to_acc(b[k * Hd + j]));
            const Acc ig = rounded<T>(fsigmoid(g[0])), fg = rounded<T>(fsigmoid(g[1]));
            const Acc cg = rounded<T>(ftanh(g[2])), og = rounded<T>(fsigmoid(g[3]));
            const Acc c2 = rounded<T>(rounded<T>(fg * to_acc(c[i * Hd + j])) + rounded<T>(ig * cg));
            put(out + i * Hd + j, og * rounded<T>(ftanh(c2)));      // h'
            put(out + (rows + i) * Hd + j, c2);                      // c'
        }
    }
}

template <class T>
static void gru_rows(const T* gi, const T* gh, const T* h, T* out, i64 Hd, i64 i0, i64 i1) {
    typedef typename AccOf<T>::type Acc;
    for (i64 i = i0; i < i1; ++i) {
        const T* a = gi + i * 3 * Hd;
        const T* b = gh + i * 3 * Hd;
        #pragma omp simd
        for (i64 j = 0; j < Hd; ++j) {
            const Acc r = rounded<T>(fsigmoid(rounded<T>(to_acc(b[j]) + to_acc(a[j]))));
            const Acc z = rounded<T>(fsigmoid(rounded<T>(to_acc(b[Hd + j]) + to_acc(a[Hd + j]))));
            const Acc n = rounded<T>(ftanh(rounded<T>(to_acc(a[2 * Hd + j]) + rounded<T>(to_acc(b[2 * Hd + j]) * r))));
            const Acc hv = to_acc(h[i * Hd + j]);
            put(out + i * Hd + j, rounded<T>(rounded<T>(hv - n) * z) + n);   // (h - n) * z + n
        }
    }
}

// Epilogue of the hidden-gate GEMM: stores gh (+ bias); with HOOK, finishes the cells of each completed row block.
template <class T, int CELL, bool HOOK> struct CellEpi {
    typedef typename AccOf<T>::type Acc;
    static constexpr bool rows_hook = HOOK;
    T* gh; const T* bias; i64 N;
    Acc* accumulator;
    const T* gi; const T* state; T* out; i64 rows, Hd;   // state: c (LSTM) or h (GRU)
    void row(i64, i64 i, i64 j0, const Acc* v, i64 n) const {
        T* o = gh + i * N + j0;
        #pragma omp simd
        for (i64 j = 0; j < n; ++j) put(o + j, v[j] + to_acc(bias[j0 + j]));
    }
    void rows_done(i64, i64 i0, i64 i1) const {
        if constexpr (CELL == 0) lstm_rows(gi, gh, state, out, rows, Hd, i0, i1);
        else gru_rows(gi, gh, state, out, Hd, i0, i1);
    }
};

template <int CELL, class T>
static void rnn_cell(const T* x, const T* h, const T* c, const T* w_ih, const T* w_hh, const T* b_ih, const T* b_hh,
                     T* out, i64 rows, i64 In, i64 Hd) {
    constexpr i64 G = CELL == 0 ? 4 : 3;
    const bool fused = KOPE_FUSION == 1;
    T* gi = scratch<T, 10>(size_t(rows * G * Hd));
    T* gh = scratch<T, 11>(size_t(rows * G * Hd));
    linear<EPI_STORE>(x, w_ih, b_ih, (const T*)nullptr, gi, rows, G * Hd, In, fused);
    StridedA<T> A{{h, Hd, 1, 0}};
    StridedB<T> B{{w_hh, 1, Hd, 0}};
    const T* state = CELL == 0 ? c : h;
    CellEpi<T, CELL, KOPE_FUSION == 1> epi{gh, b_hh, G * Hd, acc_alias(gh), gi, state, out, rows, Hd};
    gemm(1, rows, G * Hd, Hd, A, B, epi, fused);
    if (!fused) {
        #pragma omp parallel for schedule(static)
        for (i64 i = 0; i < rows; ++i) epi.rows_done(0, i, i + 1);
    }
}
"""

ENTRIES = {
    "lstm_cell": entry_macro(
        "lstm_cell",
        "const PT* x, const PT* h, const PT* c, const PT* w_ih, const PT* w_hh, const PT* b_ih, const PT* b_hh, "
        "PT* out, int64_t rows, int64_t In, int64_t Hd",
        "rnn_cell<0>(cptr<T>(x), cptr<T>(h), cptr<T>(c), cptr<T>(w_ih), cptr<T>(w_hh), cptr<T>(b_ih), cptr<T>(b_hh), "
        "wptr<T>(out), rows, In, Hd);",
    ),
    "gru_cell": entry_macro(
        "gru_cell",
        "const PT* x, const PT* h, const PT* w_ih, const PT* w_hh, const PT* b_ih, const PT* b_hh, PT* out, "
        "int64_t rows, int64_t In, int64_t Hd",
        "rnn_cell<1>(cptr<T>(x), cptr<T>(h), cptr<T>(h), cptr<T>(w_ih), cptr<T>(w_hh), cptr<T>(b_ih), cptr<T>(b_hh), "
        "wptr<T>(out), rows, In, Hd);",
    ),
}

MODELS = {
    "lstm_cell": (
        "nn.LSTMCell",
        """
    def forward(self, x, h, c):
        x, h, c = x.contiguous(), h.contiguous(), c.contiguous()
        rows, hidden = h.shape
        out = torch.empty(2, rows, hidden, dtype=x.dtype)  # stacked (h', c')
        p = [t.detach().contiguous() for t in (self.cell.weight_ih, self.cell.weight_hh, self.cell.bias_ih,
                                               self.cell.bias_hh)]
        _KERNELS[x.dtype](x, h, c, *p, out, rows, x.shape[1], hidden)
        return out
""",
    ),
    "gru_cell": (
        "nn.GRUCell",
        """
    def forward(self, x, h):
        x, h = x.contiguous(), h.contiguous()
        rows, hidden = h.shape
        out = torch.empty(rows, hidden, dtype=x.dtype)
        p = [t.detach().contiguous() for t in (self.cell.weight_ih, self.cell.weight_hh, self.cell.bias_ih,
                                               self.cell.bias_hh)]
        _KERNELS[x.dtype](x, h, *p, out, rows, x.shape[1], hidden)
        return out
""",
    ),
}


def render(operator: str, settings: dict) -> str:
    cell, forward = MODELS[operator]
    cpp = (
        isa_define(settings["isa"])
        + core.defines(settings["micro_kernel"], settings["tiles"], True, settings["parallel"])
        + f"#define KOPE_FUSION {int(settings['fusion'] == 'fused')}  // fusion={settings['fusion']}\n"
        + PRELUDE
        + core.GEMM
        + BLOCKS
        + CELLS
        + CASTS
        + ENTRIES[operator]
    )
    body = (
        kernel_table(operator) + "\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, input_size, hidden_size, dtype):\n        super().__init__()\n"
        "        # The reference's cell, so the harness copies its parameters in by name.\n"
        f"        self.cell = {cell}(input_size, hidden_size).to(getattr(torch, dtype))\n" + forward
    )
    doc = (
        f"{operator} on the CPU, rendered from the kernel template rnn_cell.py ({settings_line(settings)}).\n\n"
        "Two gate GEMMs (harness/suite/cpp_kit/gemm.py) and the cell's gate arithmetic; the knobs are the\n"
        "#defines at the top of _SOURCE."
    )
    return module(doc, cpp, body)


# -- structure: the built-in operators' traced graphs (this template serves only its own operators) ----------
PATTERNS = [
    whole_graph(
        "lstm_cell",
        "matmul:matmul",
        "matmul:matmul",
        "binary:add",
        "other:aten.unsafe_split.Tensor",
        "unary:sigmoid",
        "unary:sigmoid",
        "unary:tanh",
        "unary:sigmoid",
        "binary:mul",
        "binary:mul",
        "binary:add",
        "unary:tanh",
        "binary:mul",
        "stack:stack",
    ),
    whole_graph(
        "gru_cell",
        "matmul:matmul",
        "other:aten.unsafe_split.Tensor",
        "matmul:matmul",
        "other:aten.unsafe_split.Tensor",
        "binary:add",
        "unary:sigmoid",
        "binary:add",
        "unary:sigmoid",
        "binary:mul",
        "binary:add",
        "unary:tanh",
        "binary:sub",
        "binary:mul",
        "binary:add",
    ),
]
