"""Scaled dot-product attention in C++ on the GEMM core's micro-kernel.

More on it: docs/templates.md, "Template notes", cpp_kit/attention.
"""

from __future__ import annotations

ALGORITHMS = {"two_pass": 0, "online": 1}
ALGORITHM_DOC = (
    "'two_pass': all of a query block's scores, then softmax, then P V; 'online': key blocks "
    "with a running max/sum and a rescaled output accumulator (flash attention)"
)


def defines(algorithm: str, tiles: str, parallel: str, round_p: bool) -> str:
    bq, bk = (int(x) for x in tiles.split("x"))
    return (
        f"#define KOPE_ATTN_ALGO {ALGORITHMS[algorithm]}  // algorithm={algorithm}\n"
        f"#define KOPE_ROUND_P {int(round_p)}  // round bfloat16 probabilities as PyTorch's kernel\n"
        f"#define KOPE_BQ {bq}  // attention tiles={tiles}\n#define KOPE_BK {bk}\n"
        f"#define KOPE_ATTN_PAR {int(parallel == 'bhq')}  // parallel={parallel}\n"
    )


ATTENTION = r"""
// ==== attention ==============================================================================
template <class T> struct AttnArgs {
    const T* q; const T* k; const T* v; T* o;     // element (b, h, t, d) at p[b * bs + h * hs + t * ts + d]
    i64 B, H, Lq, Lkv, D;
    i64 q_bs, q_hs, q_ts, k_bs, k_hs, k_ts, v_bs, v_hs, v_ts, o_bs, o_hs, o_ts;
    int causal;
    double scale;
};

// Packs rows [j0, j0 + n) of a (rows x D) matrix transposed into one NR-column panel: dst[d * NR + j].
template <class T, class Acc>
static void pack_rows_t(const T* m, i64 ts, i64 j0, int n, i64 D, Acc* dst) {
    constexpr int NR = Geo<Acc>::NR;
    for (i64 d = 0; d < D; ++d)
        for (int j = 0; j < NR; ++j) dst[d * NR + j] = j < n ? to_acc(m[(j0 + j) * ts + d]) : Acc(0);
}
// Packs columns [d0, d0 + n) of rows [0, rows) of a (rows x D) matrix into one panel: dst[j * NR + c].
template <class T, class Acc>
static void pack_cols(const T* m, i64 ts, i64 rows, i64 d0, int n, Acc* dst) {
    constexpr int NR = Geo<Acc>::NR;
    for (i64 j = 0; j < rows; ++j)
        for (int c = 0; c < NR; ++c) dst[j * NR + c] = c < n ? to_acc(m[j * ts + d0 + c]) : Acc(0);
}

// S[r, j - kb] = scale * q[i0 + r] . k[j] for r < bq, j in [kb, ke), masked to -inf where causal and j > i.
template <class T, class Acc>
static void scores(const AttnArgs<T>& a, const T* q, const T* k, i64 i0, int bq, i64 kb, i64 ke, Acc* S, i64 ldS,
                   Acc* panel, Acc* qpack) {
    constexpr int NR = Geo<Acc>::NR;
    alignas(64) Acc ct[MR * NR];
    for (i64 j0 = kb; j0 < ke; j0 += NR) {
        const int nr = int(std::min<i64>(NR, ke - j0));
        pack_rows_t(k, a.k_ts, j0, nr, a.D, panel);
        for (int r0 = 0; r0 < bq; r0 += MR) {
            const int mr = std::min(MR, bq - r0);
            if (mr == MR) {
                micro<false>(a.D, q + (i0 + r0) * a.q_ts, a.q_ts, 1, panel, ct);
            } else {                                   // the last rows: packed, so nothing past Lq is read
                for (i64 d = 0; d < a.D; ++d)
                    for (int r = 0; r < MR; ++r) qpack[d * MR + r] = r < mr ? to_acc(q[(i0 + r0 + r) * a.q_ts + d]) : Acc(0);
                micro<true>(a.D, qpack, 0, 0, panel, ct);
            }
            for (int r = 0; r < mr; ++r) {
                const i64 i = i0 + r0 + r;
                Acc* s = S + (r0 + r) * ldS + (j0 - kb);
                for (int j = 0; j < nr; ++j)
                    s[j] = (a.causal && j0 + j > i) ? -INFINITY : ct[r * NR + j] * Acc(a.scale);
            }
        }
    }
}

// O[r, :] (+)= P[r, 0:kn] @ v[kb:kb+kn, :] for r < bq (P rows in S, stride ldS; O rows of stride ldO).
template <class T, class Acc>
static void pv(const AttnArgs<T>& a, const T* v, i64 kb, i64 kn, int bq, const Acc* S, i64 ldS, Acc* O, i64 ldO,
               bool add, Acc* panel) {
    constexpr int NR = Geo<Acc>::NR;
    alignas(64) Acc ct[MR * NR];
    for (i64 d0 = 0; d0 < a.D; d0 += NR) {
        const int nd = int(std::min<i64>(NR, a.D - d0));
        pack_cols(v + kb * a.v_ts, a.v_ts, kn, d0, nd, panel);
        for (int r0 = 0; r0 < bq; r0 += MR) {
            micro<false>(kn, S + r0 * ldS, ldS, 1, panel, ct);   // S has BQ (a multiple of MR) rows
            for (int r = 0; r < std::min(MR, bq - r0); ++r) {
                Acc* orow = O + (r0 + r) * ldO + d0;
                const Acc* c = ct + r * NR;
                if (add) {
                    for (int j = 0; j < nd; ++j) orow[j] += c[j];
                } else {
                    for (int j = 0; j < nd; ++j) orow[j] = c[j];
                }
            }
        }
    }
}

// Softmax numerators of row s over its first `valid` entries (zero after, up to n): p = exp(s - mx),
// returned sum of p (unrounded). With KOPE_ROUND_P the stored p are rounded to T, as PyTorch's CPU
// kernel does before its P V product (bfloat16 only). That rounding error is large on short causal
// rows: a projection after the attention (multi-head attention) makes it visible in aggregate, so
// there the candidate rounds like the reference; for the bare attention output, where single p values
// decide, the unrounded (closest to exact) result is kept.
template <class T, class Acc>
static Acc exp_row(Acc* s, i64 valid, i64 n, Acc mx) {
    Acc sum = 0;
    #pragma omp simd reduction(+ : sum)
    for (i64 j = 0; j < valid; ++j) {
        const Acc p = fexp(s[j] - mx);
        sum += p;
        s[j] = KOPE_ROUND_P ? rounded<T>(p) : p;
    }
    for (i64 j = valid; j < n; ++j) s[j] = Acc(0);
    return sum;
}

template <class Acc> static Acc row_max(const Acc* s, i64 n) {
    Acc mx = -INFINITY;
    #pragma omp simd reduction(max : mx)
    for (i64 j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    return mx;
}

// Query rows [i0, i0 + bq) of head (b, h).
template <class T>
static void attention_block(const AttnArgs<T>& a, i64 b, i64 h, i64 i0, int bq) {
    typedef typename AccOf<T>::type Acc;
    constexpr int NR = Geo<Acc>::NR;
    constexpr i64 BQ = (KOPE_BQ + MR - 1) / MR * MR, BK = (KOPE_BK + NR - 1) / NR * NR;
    const T* q = a.q + b * a.q_bs + h * a.q_hs;
    const T* k = a.k + b * a.k_bs + h * a.k_hs;
    const T* v = a.v + b * a.v_bs + h * a.v_hs;
    T* o = a.o + b * a.o_bs + h * a.o_hs;
    const i64 kv_end = a.causal ? std::min(a.Lkv, i0 + bq) : a.Lkv;   // keys past the block's last row are masked
    const i64 Dp = cdiv(a.D, NR) * NR;
    Acc* panel = scratch<Acc, 16>(size_t(std::max(a.D, KOPE_ATTN_ALGO == 0 ? kv_end : BK) * NR));
    Acc* qpack = scratch<Acc, 17>(size_t(a.D * MR));
    Acc* O = scratch<Acc, 19>(size_t(BQ * Dp));
    Acc l[BQ];
#if KOPE_ATTN_ALGO == 0
    const i64 ldS = cdiv(kv_end, NR) * NR;
    Acc* S = scratch<Acc, 18>(size_t(BQ * ldS));
    scores(a, q, k, i0, bq, 0, kv_end, S, ldS, panel, qpack);
    for (int r = 0; r < bq; ++r) {
        Acc* s = S + r * ldS;
        const i64 valid = a.causal ? std::min(kv_end, i0 + r + 1) : kv_end;
        l[r] = exp_row<T>(s, valid, kv_end, row_max(s, valid));
    }
    pv(a, v, 0, kv_end, bq, S, ldS, O, Dp, false, panel);
#else
    Acc* S = scratch<Acc, 18>(size_t(BQ * BK));
    Acc m[BQ];
    for (int r = 0; r < bq; ++r) {
        m[r] = -INFINITY;
        l[r] = 0;
        std::fill(O + r * Dp, O + (r + 1) * Dp, Acc(0));
    }
    for (i64 kb = 0; kb < kv_end; kb += BK) {
        const i64 kn = std::min(BK, kv_end - kb);
        scores(a, q, k, i0, bq, kb, kb + kn, S, BK, panel, qpack);
        for (int r = 0; r < bq; ++r) {
            Acc* s = S + r * BK;
            const i64 valid = a.causal ? std::max<i64>(0, std::min(kn, i0 + r + 1 - kb)) : kn;
            if (valid == 0) {                       // the whole block is masked for this row
                std::fill(s, s + kn, Acc(0));
                continue;
            }
            const Acc mx = std::max(m[r], row_max(s, valid));
            const Acc alpha = m[r] == -INFINITY ? Acc(0) : fexp(m[r] - mx);
            l[r] = l[r] * alpha + exp_row<T>(s, valid, kn, mx);
            m[r] = mx;
            Acc* orow = O + r * Dp;
            #pragma omp simd
            for (i64 d = 0; d < a.D; ++d) orow[d] *= alpha;
        }
        pv(a, v, kb, kn, bq, S, BK, O, Dp, true, panel);
    }
#endif
    for (int r = 0; r < bq; ++r) {
        const Acc inv = Acc(1) / l[r];
        T* out = o + (i0 + r) * a.o_ts;
        #pragma omp simd
        for (i64 d = 0; d < a.D; ++d) put(out + d, O[r * Dp + d] * inv);
    }
}

template <class T>
static void attention(const AttnArgs<T>& a) {
    typedef typename AccOf<T>::type Acc;
    constexpr i64 BQ = (KOPE_BQ + MR - 1) / MR * MR;
    (void)sizeof(Acc);
    const i64 qblocks = cdiv(a.Lq, BQ);
#if KOPE_ATTN_PAR
    #pragma omp parallel for schedule(dynamic, 1)
    for (i64 t = 0; t < a.B * a.H * qblocks; ++t) {
        const i64 bh = t / qblocks, i0 = t % qblocks * BQ;
        attention_block(a, bh / a.H, bh % a.H, i0, int(std::min(BQ, a.Lq - i0)));
    }
#else
    #pragma omp parallel for schedule(static)
    for (i64 bh = 0; bh < a.B * a.H; ++bh)
        for (i64 i0 = 0; i0 < a.Lq; i0 += BQ) attention_block(a, bh / a.H, bh % a.H, i0, int(std::min(BQ, a.Lq - i0)));
#endif
}
"""
