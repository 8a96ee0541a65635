"""Pieces for model-block templates (transformer MLPs, attention, RNN cells) on top of the GEMM core.

More on it: docs/templates.md, "Template notes", cpp_kit/blocks.
"""

from __future__ import annotations

FUSION_DOC = (
    "'separate': normalisation, each GEMM and each epilogue as separate passes (the baseline); "
    "'epilogue': bias/activation/residual applied to each GEMM tile before it is stored; "
    "'epilogue_norm': also the normalisation, applied while the first GEMM packs its input rows"
)
FUSION_VALUES = ["separate", "epilogue", "epilogue_norm"]

BLOCKS = r"""
// ==== block pieces ==========================================================================
// mean[i] and rstd[i] of each row of x (rows x n); RMS: mean = 0, rstd = 1 / sqrt(mean(x^2) + eps).
template <class T>
static void row_stats(const T* x, i64 rows, i64 n, double eps, bool rms, typename AccOf<T>::type* mean,
                      typename AccOf<T>::type* rstd) {
    typedef typename AccOf<T>::type Acc;
    #pragma omp parallel for schedule(static)
    for (i64 r = 0; r < rows; ++r) {
        const T* xr = x + r * n;
        double m = 0.0;
        if (!rms) {
            #pragma omp simd reduction(+ : m)
            for (i64 i = 0; i < n; ++i) m += to_acc(xr[i]);
            m /= double(n);
        }
        double sq = 0.0;
        #pragma omp simd reduction(+ : sq)
        for (i64 i = 0; i < n; ++i) {
            const double d = double(to_acc(xr[i])) - m;
            sq += d * d;
        }
        mean[r] = Acc(m);
        rstd[r] = Acc(1.0 / std::sqrt(sq / double(n) + eps));
    }
}

// out = (x - mean) * rstd * g (+ beta), as T (a separate pass).
template <class T>
static void normalize_rows(const T* x, i64 rows, i64 n, const typename AccOf<T>::type* mean,
                           const typename AccOf<T>::type* rstd, const T* g, const T* beta, T* out) {
    typedef typename AccOf<T>::type Acc;
    #pragma omp parallel for schedule(static)
    for (i64 r = 0; r < rows; ++r) {
        const Acc m = mean[r], s = rstd[r];
        #pragma omp simd
        for (i64 i = 0; i < n; ++i)
            put(out + r * n + i, (to_acc(x[r * n + i]) - m) * s * to_acc(g[i]) + (beta != nullptr ? to_acc(beta[i]) : Acc(0)));
    }
}

// GEMM A operand: rows of x (M x K) normalised on the fly while the GEMM packs them.
template <class T> struct NormA {
    typedef T In;
    typedef typename AccOf<T>::type Acc;
    static constexpr bool strided = false;
    const T* x; i64 K;
    const Acc* mean; const Acc* rstd; const T* g; const T* beta;   // beta may be null (RMSNorm)
    Acc at(i64 i, i64 k) const {   // rounded to T, as the reference's normalised tensor is
        const Acc v = (to_acc(x[i * K + k]) - mean[i]) * rstd[i] * to_acc(g[k]);
        return rounded<T>(beta != nullptr ? v + to_acc(beta[k]) : v);
    }
    void pack(i64, i64 i0, int mr, i64 p0, i64 kc, Acc* dst) const {
        for (int i = 0; i < mr; ++i)
            for (i64 k = 0; k < kc; ++k) dst[k * MR + i] = at(i0 + i, p0 + k);
        for (int i = mr; i < MR; ++i)
            for (i64 k = 0; k < kc; ++k) dst[k * MR + i] = Acc(0);
    }
    void row(i64, i64 i, i64 p0, i64 n, Acc* dst) const {
        for (i64 k = 0; k < n; ++k) dst[k] = at(i, p0 + k);
    }
};

// out[i, j] = act(C[i, j] + bias[j]) for one (batch-free) GEMM; aux is M x N (residual or gate).
enum { EPI_STORE = 0, EPI_GELU = 1, EPI_RESIDUAL = 2, EPI_SILU_MUL = 3 };
template <class T, int KIND> struct BlockEpi {
    typedef typename AccOf<T>::type Acc;
    static constexpr bool rows_hook = false;
    T* out; const T* bias; const T* aux; i64 M, N;
    Acc* accumulator;
    void row(i64, i64 i, i64 j0, const Acc* v, i64 n) const {
        T* o = out + i * N + j0;
        const T* a = aux != nullptr ? aux + i * N + j0 : nullptr;
        #pragma omp simd
        for (i64 j = 0; j < n; ++j) {
            Acc x = v[j] + (bias != nullptr ? to_acc(bias[j0 + j]) : Acc(0));
            // rounded<T>: where the reference materialises a tensor of T (bfloat16 only; a no-op otherwise)
            if constexpr (KIND == EPI_GELU) x = fgelu(rounded<T>(x));
            if constexpr (KIND == EPI_RESIDUAL) x = rounded<T>(x) + to_acc(a[j]);
            if constexpr (KIND == EPI_SILU_MUL) x = rounded<T>(fsilu(to_acc(a[j]))) * rounded<T>(x);
            put(o + j, x);
        }
    }
    void rows_done(i64, i64, i64) const {}
};

// y = act(x @ w.T + bias) (+ aux), w of shape (N, K) as nn.Linear stores it; A is any A loader (linear_from)
// or a row-major x (linear).
template <int KIND, class T, class ALoad>
static void linear_from(const ALoad& A, const T* w, const T* bias, const T* aux, T* y, i64 M, i64 N, i64 K, bool fused) {
    StridedB<T> B{{w, 1, K, 0}};
    BlockEpi<T, KIND> epi{y, bias, aux, M, N, acc_alias(y)};
    gemm(1, M, N, K, A, B, epi, fused);
}
template <int KIND, class T>
static void linear(const T* x, const T* w, const T* bias, const T* aux, T* y, i64 M, i64 N, i64 K, bool fused) {
    StridedA<T> A{{x, K, 1, 0}};
    linear_from<KIND>(A, w, bias, aux, y, M, N, K, fused);
}
"""
