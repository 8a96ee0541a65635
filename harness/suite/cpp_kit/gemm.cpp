// ==== GEMM core =============================================================================
#if KOPE_MR > 0
constexpr int MR = KOPE_MR, NV = KOPE_NV;
#elif KOPE_VEC_BITS == 512
constexpr int MR = 14, NV = 2;                    // micro_kernel=auto: 28 of 32 zmm registers hold C
#elif KOPE_VEC_BITS == 256
constexpr int MR = 6, NV = 2;                     // micro_kernel=auto: 12 of 16 ymm registers hold C
#else
constexpr int MR = 4, NV = 2;                     // micro_kernel=auto, portable code
#endif

static constexpr i64 clamp_i64(i64 v, i64 lo, i64 hi) { return v < lo ? lo : (v > hi ? hi : v); }

template <class Acc> struct Geo {                 // tile geometry for one accumulator type
#if KOPE_VEC_BITS
    static constexpr int L = Vec<Acc>::L;
#else
    static constexpr int L = 32 / int(sizeof(Acc));
#endif
    static constexpr int NR = NV * L;
#if KOPE_TILES_AUTO
    // BLIS's rules: a KC x NR panel of B in half of L1, an MC x KC block of A in half of L2,
    // a KC x NC block of B in an eighth of L3 (the L3 is shared; other data lives there too).
    static constexpr i64 KC = clamp_i64(i64(KOPE_L1D) / 2 / (NR * i64(sizeof(Acc))) / 8 * 8, 64, 1024);
    static constexpr i64 MC = clamp_i64(i64(KOPE_L2) / 2 / (KC * i64(sizeof(Acc))) / MR * MR, MR, 4096 / MR * MR);
    static constexpr i64 NC = clamp_i64(i64(KOPE_L3) / 8 / (KC * i64(sizeof(Acc))) / NR * NR, NR, 8192 / NR * NR);
#else
    static constexpr i64 MC = (KOPE_MC + MR - 1) / MR * MR;
    static constexpr i64 KC = KOPE_KC;
    static constexpr i64 NC = (KOPE_NC + NR - 1) / NR * NR;
#endif
};

// ---- operand loaders --------------------------------------------------------------------------
// A matrix read in place: element (r, c) of batch b is p[b * bs + r * rs + c * cs].
template <class T> struct Strided {
    typedef T In;
    typedef typename AccOf<T>::type Acc;
    static constexpr bool strided = true;
    const T* p; i64 rs, cs, bs;
    Acc at(i64 b, i64 r, i64 c) const { return to_acc(p[b * bs + r * rs + c * cs]); }
};

#if defined(__AVX2__)
// r[i][j] -> r[j][i]: an 8x8 float transpose in registers.
static inline void transpose8(__m256* r) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}
// dst[k * dld + j] = src[j * ld + k] for j, k < 8.
static inline void transpose8x8(const float* src, i64 ld, float* dst, i64 dld) {
    __m256 r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld);
    transpose8(r);
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * dld, r[i]);
}
#endif

// A (M x K): MR-row panels, panel[k * MR + i] = A[i0 + i, p0 + k]; rows past mr are zero.
template <class T> struct StridedA : Strided<T> {
    typedef typename AccOf<T>::type Acc;
    void pack(i64 b, i64 i0, int mr, i64 p0, i64 kc, Acc* dst) const {
        const T* base = this->p + b * this->bs + i0 * this->rs + p0 * this->cs;
        if (this->cs == 1) {
            i64 k0 = 0;
#if defined(__AVX2__)
            if constexpr (std::is_same<T, float>::value && MR <= 8) {
                // 8 values of each row at a time, transposed in registers; each store writes 8 lanes, the
                // last 8 - MR of which the next store (or the tail, or the next panel) overwrites: packing
                // buffers carry 8 elements of slack for the very last one.
                for (; k0 + 8 <= kc; k0 += 8) {
                    __m256 r[8];
                    for (int i = 0; i < 8; ++i) r[i] = i < mr ? _mm256_loadu_ps(base + i * this->rs + k0) : _mm256_setzero_ps();
                    transpose8(r);
                    for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + (k0 + q) * MR, r[q]);
                }
            }
#endif
            for (int i = 0; i < mr; ++i)
                for (i64 k = k0; k < kc; ++k) dst[k * MR + i] = to_acc(base[i * this->rs + k]);
            for (int i = mr; i < MR; ++i)
                for (i64 k = k0; k < kc; ++k) dst[k * MR + i] = Acc(0);
            return;
        } else {
            for (i64 k = 0; k < kc; ++k)
                for (int i = 0; i < mr; ++i) dst[k * MR + i] = to_acc(base[k * this->cs + i * this->rs]);
        }
        for (int i = mr; i < MR; ++i)
            for (i64 k = 0; k < kc; ++k) dst[k * MR + i] = Acc(0);
    }
    void row(i64 b, i64 i, i64 p0, i64 n, Acc* dst) const {
        for (i64 k = 0; k < n; ++k) dst[k] = this->at(b, i, p0 + k);
    }
};

// B (K x N): NR-column panels, panel[k * NR + j] = B[p0 + k, j0 + j]; columns past nr are zero.
template <class T> struct StridedB : Strided<T> {
    typedef typename AccOf<T>::type Acc;
    void pack(i64 b, i64 p0, i64 kc, i64 j0, int nr, Acc* dst) const {
        constexpr int NR = Geo<Acc>::NR;
        const T* base = this->p + b * this->bs + p0 * this->rs + j0 * this->cs;
        if (this->cs == 1) {
            for (i64 k = 0; k < kc; ++k) {
                const T* src = base + k * this->rs;
                Acc* d = dst + k * NR;
                #pragma omp simd
                for (int j = 0; j < nr; ++j) d[j] = to_acc(src[j]);
                for (int j = nr; j < NR; ++j) d[j] = Acc(0);
            }
        } else {
            int j = 0;
#if defined(__AVX2__)
            if constexpr (std::is_same<T, float>::value) {
                if (this->rs == 1) {                 // B = W^T with W row-major (nn.Linear): 8x8 transposes
                    for (; j + 8 <= nr; j += 8) {
                        i64 k = 0;
                        for (; k + 8 <= kc; k += 8) transpose8x8(base + j * this->cs + k, this->cs, dst + k * NR + j, NR);
                        for (; k < kc; ++k)
                            for (int q = 0; q < 8; ++q) dst[k * NR + j + q] = base[(j + q) * this->cs + k];
                    }
                }
            }
#endif
            for (; j < nr; ++j) {
                const T* src = base + j * this->cs;
                for (i64 k = 0; k < kc; ++k) dst[k * NR + j] = to_acc(src[k * this->rs]);
            }
            for (i64 k = 0; k < kc; ++k)
                for (int q = nr; q < NR; ++q) dst[k * NR + q] = Acc(0);
        }
    }
};

// ---- micro-kernels: ct[MR x NR] = sum over kc of A panel (MR) x B panel (NR) --------------------
// A is either packed (a[k * MR + i]) or read in place (a[i * a_rs + k * a_cs], any element type).
template <bool PACKED, class Acc, class AT>
static inline Acc a_elem(const AT* a, i64 a_rs, i64 a_cs, int i, i64 k) {
    if constexpr (PACKED) return a[k * MR + i];
    else return to_acc(a[i * a_rs + k * a_cs]);
}

// Where a full tile's sums go: TO_TILE ct = sums (row stride NR); SET c = sums, ADD c += sums (row stride ldc,
// partial sums of a K block kept in C); ADD_TO_TILE ct = c + sums (the last K block, for the epilogue).
enum { TO_TILE = 0, SET = 1, ADD = 2, ADD_TO_TILE = 3 };

#if KOPE_VEC_BITS
template <bool PACKED, int MODE = TO_TILE, class Acc, class AT>
static inline void micro(i64 kc, const AT* a, i64 a_rs, i64 a_cs, const Acc* bp, Acc* ct, Acc* c = nullptr,
                         i64 ldc = 0) {
    typedef Vec<Acc> V;
    constexpr int L = V::L, NR = NV * L;
    typename V::R acc[MR][NV];
    #pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
        #pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) acc[i][j] = V::zero();
    for (i64 k = 0; k < kc; ++k) {
        typename V::R bv[NV];
        #pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) bv[j] = V::load(bp + k * NR + j * L);
        #pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
            const typename V::R av = V::set1(a_elem<PACKED, Acc>(a, a_rs, a_cs, i, k));
            #pragma GCC unroll 4
            for (int j = 0; j < NV; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
        }
    }
    #pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
        #pragma GCC unroll 4
        for (int j = 0; j < NV; ++j) {
            if constexpr (MODE == TO_TILE) V::store(ct + i * NR + j * L, acc[i][j]);
            if constexpr (MODE == SET) V::store(c + i * ldc + j * L, acc[i][j]);
            if constexpr (MODE == ADD) V::store(c + i * ldc + j * L, V::add(V::load(c + i * ldc + j * L), acc[i][j]));
            if constexpr (MODE == ADD_TO_TILE) V::store(ct + i * NR + j * L, V::add(V::load(c + i * ldc + j * L), acc[i][j]));
        }
}
#else
template <bool PACKED, int MODE = TO_TILE, class Acc, class AT>
static inline void micro(i64 kc, const AT* a, i64 a_rs, i64 a_cs, const Acc* bp, Acc* ct, Acc* cm = nullptr,
                         i64 ldc = 0) {
    constexpr int NR = Geo<Acc>::NR;
    Acc c[MR][NR];
    for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) c[i][j] = Acc(0);
    for (i64 k = 0; k < kc; ++k) {
        const Acc* b = bp + k * NR;
        for (int i = 0; i < MR; ++i) {
            const Acc av = a_elem<PACKED, Acc>(a, a_rs, a_cs, i, k);
            #pragma omp simd
            for (int j = 0; j < NR; ++j) c[i][j] += av * b[j];
        }
    }
    for (int i = 0; i < MR; ++i) {
        #pragma omp simd
        for (int j = 0; j < NR; ++j) {
            if constexpr (MODE == TO_TILE) ct[i * NR + j] = c[i][j];
            if constexpr (MODE == SET) cm[i * ldc + j] = c[i][j];
            if constexpr (MODE == ADD) cm[i * ldc + j] += c[i][j];
            if constexpr (MODE == ADD_TO_TILE) ct[i * NR + j] = cm[i * ldc + j] + c[i][j];
        }
    }
}
#endif

// ---- matrix-vector kernels ---------------------------------------------------------------------
// out[r] = sum_k X[r * ld + k] * v[k] for RN rows. Sums run in blocks of 4096 whose results are added in
// double: one long float sum would drift by more than float32's tolerance on a dot product of 10^7 terms.
template <int RN, class T, class Acc>
static inline void dot_block(const T* X, i64 ld, i64 k0, i64 k1, const Acc* v, Acc* out) {
#if KOPE_VEC_BITS
    typedef Vec<Acc> V;
    constexpr int L = V::L;
    typename V::R acc[RN][NV];
    for (int r = 0; r < RN; ++r)
        for (int u = 0; u < NV; ++u) acc[r][u] = V::zero();
    i64 k = k0;
    for (; k + NV * L <= k1; k += NV * L) {
        #pragma GCC unroll 4
        for (int u = 0; u < NV; ++u) {
            const typename V::R vv = V::load(v + k + u * L);
            #pragma GCC unroll 16
            for (int r = 0; r < RN; ++r) acc[r][u] = V::fma(V::load(X + r * ld + k + u * L), vv, acc[r][u]);
        }
    }
    for (int r = 0; r < RN; ++r) {
        Acc s = 0;
        for (int u = 0; u < NV; ++u) s += V::sum(acc[r][u]);
        for (i64 q = k; q < k1; ++q) s += to_acc(X[r * ld + q]) * v[q];
        out[r] = s;
    }
#else
    Acc s[RN] = {};
    #pragma omp simd reduction(+ : s[:RN])
    for (i64 k = k0; k < k1; ++k) {
        const Acc vk = v[k];
        for (int r = 0; r < RN; ++r) s[r] += to_acc(X[r * ld + k]) * vk;
    }
    for (int r = 0; r < RN; ++r) out[r] = s[r];
#endif
}

template <int RN, class T, class Acc>
static inline void dot_rows(const T* X, i64 ld, i64 K, const Acc* v, Acc* out) {
    constexpr i64 KB = 4096;
    double total[RN] = {};
    Acc part[RN];
    for (i64 k0 = 0; k0 < K; k0 += KB) {
        dot_block<RN>(X, ld, k0, std::min(K, k0 + KB), v, part);
        for (int r = 0; r < RN; ++r) total[r] += part[r];
    }
    for (int r = 0; r < RN; ++r) out[r] = Acc(total[r]);
}

// y[r] = sum_k X[r * ld + k] * v[k] for R rows: rows spread over threads, or K split when rows are few.
template <class T, class Acc>
static void gemv_dot(const T* X, i64 ld, i64 R, i64 K, const Acc* v, Acc* y) {
    const int threads = omp_get_max_threads();
    if (R >= 4 * i64(threads) * MR || K < 4096) {
        const i64 groups = cdiv(R, MR);
        #pragma omp parallel for schedule(static)
        for (i64 g = 0; g < groups; ++g) {
            const i64 r0 = g * MR;
            if (r0 + MR <= R) dot_rows<MR>(X + r0 * ld, ld, K, v, y + r0);
            else
                for (i64 r = r0; r < R; ++r) dot_rows<1>(X + r * ld, ld, K, v, y + r);
        }
        return;
    }
    const i64 chunks = threads;
    std::vector<Acc> part(size_t(chunks * R));
    #pragma omp parallel for schedule(static)
    for (i64 c = 0; c < chunks; ++c) {
        const i64 k0 = K * c / chunks, k1 = K * (c + 1) / chunks;
        for (i64 r = 0; r < R; ++r) dot_rows<1>(X + r * ld + k0, ld, k1 - k0, v + k0, part.data() + c * R + r);
    }
    for (i64 r = 0; r < R; ++r) {
        double s = 0;
        for (i64 c = 0; c < chunks; ++c) s += part[c * R + r];
        y[r] = Acc(s);
    }
}

// y[j] += sum_k c[k] * X[k * ld + j] for j < W, P rows of X streamed in blocks.
template <class T, class Acc>
static void axpy_rows(const T* X, i64 ld, i64 P, i64 W, const Acc* c, Acc* y) {
    constexpr i64 PB = 256;
    for (i64 p0 = 0; p0 < P; p0 += PB) {
        const i64 p1 = std::min(P, p0 + PB);
#if KOPE_VEC_BITS
        typedef Vec<Acc> V;
        constexpr int L = V::L;
        i64 j = 0;
        for (; j + NV * L <= W; j += NV * L) {
            typename V::R acc[NV];
            for (int u = 0; u < NV; ++u) acc[u] = V::load(y + j + u * L);
            for (i64 k = p0; k < p1; ++k) {
                const typename V::R ck = V::set1(c[k]);
                #pragma GCC unroll 4
                for (int u = 0; u < NV; ++u) acc[u] = V::fma(ck, V::load(X + k * ld + j + u * L), acc[u]);
            }
            for (int u = 0; u < NV; ++u) V::store(y + j + u * L, acc[u]);
        }
        for (; j < W; ++j) {
            Acc s = y[j];
            for (i64 k = p0; k < p1; ++k) s += c[k] * to_acc(X[k * ld + j]);
            y[j] = s;
        }
#else
        i64 k = p0;
        for (; k + MR <= p1; k += MR) {               // MR rows of X per pass over y
            #pragma omp simd
            for (i64 j = 0; j < W; ++j) {
                Acc s = y[j];
                for (int r = 0; r < MR; ++r) s += c[k + r] * to_acc(X[(k + r) * ld + j]);
                y[j] = s;
            }
        }
        for (; k < p1; ++k) {
            const Acc ck = c[k];
            #pragma omp simd
            for (i64 j = 0; j < W; ++j) y[j] += ck * to_acc(X[k * ld + j]);
        }
#endif
    }
}

// y[j] = sum_k c[k] * X[k * ld + j]: K split over threads, partial rows added in a fixed order.
template <class T, class Acc>
static void gemv_axpy(const T* X, i64 ld, i64 P, i64 W, const Acc* c, Acc* y) {
    const i64 chunks = std::max<i64>(1, std::min<i64>(omp_get_max_threads(), P / 64));
    std::vector<Acc> part(size_t(chunks * W), Acc(0));
    #pragma omp parallel for schedule(static)
    for (i64 t = 0; t < chunks; ++t) {
        const i64 k0 = P * t / chunks, k1 = P * (t + 1) / chunks;
        axpy_rows(X + k0 * ld, ld, k1 - k0, W, c + k0, part.data() + t * W);
    }
    #pragma omp parallel for schedule(static)
    for (i64 j = 0; j < W; ++j) {
        Acc s = 0;
        for (i64 t = 0; t < chunks; ++t) s += part[t * W + j];
        y[j] = s;
    }
}

// ---- the driver -------------------------------------------------------------------------------
template <class ALoad, class BLoad, class Epi>
struct Gemm {
    typedef typename Epi::Acc Acc;
    typedef Geo<Acc> G;
    static constexpr int NR = G::NR;
    static constexpr bool PACK_A = KOPE_PACK_A || !ALoad::strided;   // transforming loaders always pack

    i64 batch, M, N, K;
    const ALoad& A;
    const BLoad& B;
    const Epi& epi;
    Acc* cacc = nullptr;   // partial sums over K blocks (fused mode), batch * M * N

    // C[b, i0:i0+mr, j0:j0+nr] from the tile ct: into dst (raw sums), into cacc (partial), or to the epilogue.
    void store(const Acc* ct, i64 b, i64 i0, i64 j0, int mr, int nr, bool first, bool last, Acc* dst) const {
        for (int i = 0; i < mr; ++i) {
            const Acc* s = ct + i * NR;
            const i64 off = (b * M + i0 + i) * N + j0;
            if (dst != nullptr || !last) {
                Acc* d = (dst != nullptr ? dst : cacc) + off;
                if (first) {
                    std::copy(s, s + nr, d);
                } else {
                    #pragma omp simd
                    for (int j = 0; j < nr; ++j) d[j] += s[j];
                }
            } else if (first) {
                epi.row(b, i0 + i, j0, s, nr);
            } else {
                Acc t[NR];
                const Acc* c = cacc + off;
                #pragma omp simd
                for (int j = 0; j < nr; ++j) t[j] = c[j] + s[j];
                epi.row(b, i0 + i, j0, t, nr);
            }
        }
    }

    // Rows [r0, r1) x columns [c0, c1) of batch entry b over the reduction range [k0, k1), by one thread (the
    // 5-loop nest): each KC x NC block of B is packed once and serves every MC block of the rows.
    void sweep(i64 b, i64 r0, i64 r1, i64 c0, i64 c1, i64 k0, i64 k1, Acc* dst) const {
        Acc* bp = scratch<Acc, 0>(size_t(G::KC * G::NC));
        Acc* ap = scratch<Acc, 1>(size_t(G::MC * G::KC + 8));   // + 8: slack of the vector A packing
        alignas(64) Acc ct[MR * NR];
        // Row blocks of (nearly) equal size, whole micro-panels, at most MC rows.
        const i64 nblocks = cdiv(r1 - r0, G::MC), mcb = std::min<i64>(G::MC, cdiv(cdiv(r1 - r0, nblocks), MR) * MR);
        for (i64 jc = c0; jc < c1; jc += G::NC) {
            const i64 nc = std::min(G::NC, c1 - jc);
            for (i64 p0 = k0; p0 < k1; p0 += G::KC) {
                const i64 kc = std::min(G::KC, k1 - p0);
                const bool first = p0 == k0, last = p0 + kc == k1;
                for (i64 jr = 0; jr < nc; jr += NR) B.pack(b, p0, kc, jc + jr, int(std::min<i64>(NR, nc - jr)), bp + jr * kc);
                for (i64 ic = r0; ic < r1; ic += mcb) {
                    const i64 mc = std::min(mcb, r1 - ic);
                    if constexpr (PACK_A)
                        for (i64 ir = 0; ir < mc; ir += MR) A.pack(b, ic + ir, int(std::min<i64>(MR, mc - ir)), p0, kc, ap + ir * kc);
                    for (i64 jr = 0; jr < nc; jr += NR) {
                        const int nr = int(std::min<i64>(NR, nc - jr));
                        for (i64 ir = 0; ir < mc; ir += MR) {
                            const int mr = int(std::min<i64>(MR, mc - ir));
                            if (PACK_A && mr == MR && nr == NR && (dst != nullptr || !last || !first)) {
                                // a full tile: partial sums straight into C (dst, or the K-block accumulator),
                                // or, in the last of several K blocks, C's partial sums + these to the epilogue
                                const i64 off = (b * M + ic + ir) * N + jc + jr;
                                const Acc* pa = ap + ir * kc;
                                const Acc* pb = bp + jr * kc;
                                Acc* cm = (dst != nullptr ? dst : cacc) + off;
                                if (dst != nullptr || !last) {
                                    if (first) micro<true, SET>(kc, pa, 0, 0, pb, ct, cm, N);
                                    else micro<true, ADD>(kc, pa, 0, 0, pb, ct, cm, N);
                                } else {
                                    micro<true, ADD_TO_TILE>(kc, pa, 0, 0, pb, ct, cm, N);
                                    for (int i = 0; i < MR; ++i) epi.row(b, ic + ir + i, jc + jr, ct + i * NR, NR);
                                }
                                continue;
                            }
                            if constexpr (PACK_A) {
                                micro<true>(kc, ap + ir * kc, 0, 0, bp + jr * kc, ct);
                            } else if (mr == MR) {
                                micro<false>(kc, A.p + b * A.bs + (ic + ir) * A.rs + p0 * A.cs, A.rs, A.cs, bp + jr * kc, ct);
                            } else {  // a partial panel at the bottom edge: pack it (zero rows) rather than read past M
                                A.pack(b, ic + ir, mr, p0, kc, ap);
                                micro<true>(kc, ap, 0, 0, bp + jr * kc, ct);
                            }
                            store(ct, b, ic + ir, jc + jr, mr, nr, first, last, dst);
                        }
                    }
                }
            }
        }
    }

    // One block: rows [ic, ic+MC) x columns [jc, jc+NC) over the reduction range [k0, k1).
    void block(i64 b, i64 ic, i64 jc, i64 k0, i64 k1, Acc* dst) const {
        sweep(b, ic, std::min(M, ic + G::MC), jc, std::min(N, jc + G::NC), k0, k1, dst);
    }

    // parallel=grid: ti row ranges x tj column ranges per batch entry (ti * tj = threads per entry), the pair
    // that packs least per unit of K (ti copies of B's N columns + tj copies of A's M rows); each cell runs
    // the whole nest (sweep) on its ranges, which are whole micro-tiles split as evenly as possible.
    void grid(Acc* dst) const {
        const i64 threads = omp_get_max_threads();
        const i64 rpanels = cdiv(M, MR), cpanels = cdiv(N, NR);
        i64 ti = 1, tj = 1;
        if (batch < threads) {
            const i64 want = cdiv(threads, batch);
            double best = -1;
            for (i64 j = 1; j <= want; ++j) {
                const i64 i = cdiv(want, j);
                if (i * j != want || i > rpanels || j > cpanels) continue;
                const double cost = double(i) * double(N) + double(j) * double(M);
                if (best < 0 || cost <= best) best = cost, ti = i, tj = j;
            }
            if (best < 0) {                          // too few panels for an exact grid: as many cells as fit
                tj = std::min(want, cpanels);
                ti = std::min(cdiv(want, tj), rpanels);
            }
        }
        const i64 cells = batch * ti * tj;
        #pragma omp parallel for schedule(static)
        for (i64 t = 0; t < cells; ++t) {
            const i64 b = t / (ti * tj), i = t / tj % ti, j = t % tj;
            const i64 r0 = std::min(M, rpanels * i / ti * MR), r1 = std::min(M, rpanels * (i + 1) / ti * MR);
            const i64 c0 = std::min(N, cpanels * j / tj * NR), c1 = std::min(N, cpanels * (j + 1) / tj * NR);
            if (r1 > r0 && c1 > c0) sweep(b, r0, r1, c0, c1, 0, K, dst);
        }
        if constexpr (Epi::rows_hook) {
            if (dst == nullptr) {
                const i64 mb = cdiv(M, G::MC);
                #pragma omp parallel for schedule(static)
                for (i64 t = 0; t < batch * mb; ++t) epi.rows_done(t / mb, t % mb * G::MC, std::min(M, t % mb * G::MC + G::MC));
            }
        }
    }

    // The vector operand of a matrix-vector product as contiguous Acc values: in place when it already is,
    // else copied (in parallel) into the calling thread's scratch.
    template <class Load>
    const Acc* vector_of(const Load& L, i64 b, bool a_side, Acc* buf) const {
        if constexpr (Load::strided && std::is_same<typename Load::In, Acc>::value) {
            if (a_side ? L.cs == 1 : L.rs == 1) return L.p + b * L.bs;
        }
        #pragma omp parallel for schedule(static)
        for (i64 k0 = 0; k0 < K; k0 += 4096) {
            const i64 n = std::min<i64>(4096, K - k0);
            if constexpr (Load::strided) {
                for (i64 k = k0; k < k0 + n; ++k) buf[k] = a_side ? L.at(b, 0, k) : L.at(b, k, 0);
            } else {
                L.row(b, 0, k0, n, buf + k0);       // only A loaders are not strided
            }
        }
        return buf;
    }

    // Matrix-vector shapes with strided operands; false when the general path must run.
    bool gemv() const {
        if constexpr (!BLoad::strided) {
            return false;
        } else {
            const bool row_vec = M == 1 && (B.rs == 1 || B.cs == 1);
            bool col_vec = false;
            if constexpr (ALoad::strided) col_vec = N == 1 && (A.cs == 1 || A.rs == 1);
            if (!row_vec && !col_vec) return false;
            Acc* buf = scratch<Acc, 15>(size_t(K));
            Acc* y = scratch<Acc, 9>(size_t(row_vec ? N : M));
            for (i64 b = 0; b < batch; ++b) {
                if (row_vec) {                      // y[j] = sum_k a[k] * B[k, j]
                    const Acc* a = vector_of(A, b, true, buf);
                    const typename BLoad::In* Bb = B.p + b * B.bs;
                    if (B.rs == 1) gemv_dot(Bb, B.cs, N, K, a, y);
                    else gemv_axpy(Bb, B.rs, K, N, a, y);
                    #pragma omp parallel for schedule(static)
                    for (i64 j0 = 0; j0 < N; j0 += NR) epi.row(b, 0, j0, y + j0, std::min<i64>(NR, N - j0));
                } else {
                    if constexpr (ALoad::strided) { // y[i] = sum_k A[i, k] * b[k]
                        const Acc* v = vector_of(B, b, false, buf);
                        const typename ALoad::In* Ab = A.p + b * A.bs;
                        if (A.cs == 1) gemv_dot(Ab, A.rs, M, K, v, y);
                        else gemv_axpy(Ab, A.cs, K, M, v, y);
                        #pragma omp parallel for schedule(static)
                        for (i64 i = 0; i < M; ++i) epi.row(b, i, 0, y + i, 1);
                    }
                }
                if constexpr (Epi::rows_hook) epi.rows_done(b, 0, M);
            }
            return true;
        }
    }

    // A few rows (M <= 8) times B = W^T with W (N x K) row-major, as nn.Linear stores it: dot products of
    // contiguous rows, so each weight row is read once from memory and never packed (a packed GEMM would
    // copy all of W for a handful of rows). Pieces of NR outputs per task; true when it ran.
    bool few_rows() const {
#if KOPE_VEC_BITS
        if constexpr (ALoad::strided && BLoad::strided && std::is_same<typename ALoad::In, Acc>::value &&
                      std::is_same<typename BLoad::In, Acc>::value) {
            if (M > 8 || B.rs != 1 || A.cs != 1 || K < 2 * Vec<Acc>::L) return false;
            typedef Vec<Acc> V;
            constexpr int L = V::L;
            const i64 pieces = cdiv(N, NR);
            #pragma omp parallel for schedule(static)
            for (i64 t = 0; t < batch * pieces; ++t) {
                const i64 b = t / pieces, j0 = t % pieces * NR, n = std::min<i64>(NR, N - j0);
                alignas(64) Acc out[8][NR];
                const Acc* x = A.p + b * A.bs;
                const Acc* w = B.p + b * B.bs;
                for (i64 j = j0; j < j0 + n; j += 4) {
                    const int jw = int(std::min<i64>(4, j0 + n - j));
                    for (i64 i0 = 0; i0 < M; i0 += 2) {
                        const int iw = int(std::min<i64>(2, M - i0));
                        typename V::R acc[2][4];
                        for (int i = 0; i < 2; ++i)
                            for (int q = 0; q < 4; ++q) acc[i][q] = V::zero();
                        const Acc* xr[2] = {x + i0 * A.rs, x + (i0 + iw - 1) * A.rs};
                        const Acc* wr[4];
                        for (int q = 0; q < 4; ++q) wr[q] = w + (j + std::min(q, jw - 1)) * B.cs;
                        i64 k = 0;
                        for (; k + L <= K; k += L) {
                            const typename V::R x0 = V::load(xr[0] + k), x1 = V::load(xr[1] + k);
                            #pragma GCC unroll 4
                            for (int q = 0; q < 4; ++q) {
                                const typename V::R wq = V::load(wr[q] + k);
                                acc[0][q] = V::fma(x0, wq, acc[0][q]);
                                acc[1][q] = V::fma(x1, wq, acc[1][q]);
                            }
                        }
                        for (int i = 0; i < iw; ++i)
                            for (int q = 0; q < jw; ++q) {
                                Acc sum = V::sum(acc[i][q]);
                                for (i64 kk = k; kk < K; ++kk) sum += xr[i][kk] * wr[q][kk];
                                out[i0 + i][j - j0 + q] = sum;
                            }
                    }
                }
                for (i64 i = 0; i < M; ++i) epi.row(b, i, j0, out[i], n);
            }
            if constexpr (Epi::rows_hook)
                for (i64 b = 0; b < batch; ++b) epi.rows_done(b, 0, M);
            return true;
        }
#endif
        return false;
    }

    // Epilogue pass over raw sums (splits slices of batch*M*N added), a row block per task.
    void epilogue_pass(const Acc* raw, int splits) const {
        const i64 mb = cdiv(M, G::MC), size = batch * M * N;
        #pragma omp parallel for schedule(static)
        for (i64 t = 0; t < batch * mb; ++t) {
            const i64 b = t / mb, i0 = (t % mb) * G::MC, i1 = std::min(M, i0 + G::MC);
            Acc v[NR];
            for (i64 i = i0; i < i1; ++i)
                for (i64 j0 = 0; j0 < N; j0 += NR) {
                    const i64 n = std::min<i64>(NR, N - j0), off = (b * M + i) * N + j0;
                    for (i64 j = 0; j < n; ++j) v[j] = raw[off + j];
                    for (int s = 1; s < splits; ++s)
                        for (i64 j = 0; j < n; ++j) v[j] += raw[s * size + off + j];
                    epi.row(b, i, j0, v, n);
                }
            if constexpr (Epi::rows_hook) epi.rows_done(b, i0, i1);
        }
    }

    void run(bool fused) {
        if (batch == 0 || M == 0 || N == 0) return;
        if (K > 0 && (gemv() || (fused && few_rows()))) return;
        const i64 threads = omp_get_max_threads();
        const i64 mb = cdiv(M, G::MC), nb = cdiv(N, G::NC), nkb = std::max<i64>(1, cdiv(K, G::KC));
        const i64 tasks = batch * mb * nb;
        int splits = 1;
#if KOPE_PARALLEL == 2
        if (tasks < threads && nkb > 1) splits = int(std::min<i64>(threads, nkb));
#endif
        Acc* work = nullptr;                        // the calling thread's scratch (slot 7), reused across calls
        if (!fused || splits > 1) {                 // raw sums first, the epilogue as its own pass
            const i64 size = batch * M * N;
            work = scratch<Acc, 7>(size_t(splits * size));
#if KOPE_PARALLEL == 3
            if (K > 0) {
                grid(work);
                epilogue_pass(work, 1);
                return;
            }
#endif
            #pragma omp parallel for schedule(static)
            for (i64 t = 0; t < splits * tasks; ++t) {
                const i64 s = t / tasks, r = t % tasks;
                const i64 b = r / (mb * nb), ic = (r / nb) % mb * G::MC, jc = r % nb * G::NC;
                const i64 k0 = nkb * s / splits * G::KC, k1 = std::min(K, nkb * (s + 1) / splits * G::KC);
                if (k1 > k0) block(b, ic, jc, k0, k1, work + s * size);
                else for (i64 i = ic; i < std::min(M, ic + G::MC); ++i)
                    std::fill_n(work + s * size + (b * M + i) * N + jc, std::min(G::NC, N - jc), Acc(0));
            }
            epilogue_pass(work, splits);
            return;
        }
        if (K == 0) {                               // an empty sum: zeros through the epilogue
            work = scratch<Acc, 7>(size_t(batch * M * N));
            std::fill_n(work, batch * M * N, Acc(0));
            epilogue_pass(work, 1);
            return;
        }
        cacc = epi.accumulator;
        if (nkb > 1 && cacc == nullptr) cacc = scratch<Acc, 8>(size_t(batch * M * N));
#if KOPE_PARALLEL == 3
        grid(nullptr);
#elif KOPE_PARALLEL == 0
        #pragma omp parallel for schedule(static)
        for (i64 t = 0; t < batch * mb; ++t) {
            const i64 b = t / mb, ic = t % mb * G::MC;
            for (i64 jc = 0; jc < N; jc += G::NC) block(b, ic, jc, 0, K, nullptr);
            if constexpr (Epi::rows_hook) epi.rows_done(b, ic, std::min(M, ic + G::MC));
        }
#else
        #pragma omp parallel for schedule(static)
        for (i64 t = 0; t < tasks; ++t) {
            const i64 b = t / (mb * nb), ic = (t / nb) % mb * G::MC, jc = t % nb * G::NC;
            block(b, ic, jc, 0, K, nullptr);
        }
        if constexpr (Epi::rows_hook) {
            #pragma omp parallel for schedule(static)
            for (i64 t = 0; t < batch * mb; ++t) epi.rows_done(t / mb, t % mb * G::MC, std::min(M, t % mb * G::MC + G::MC));
        }
#endif
    }
};

template <class ALoad, class BLoad, class Epi>
static void gemm(i64 batch, i64 M, i64 N, i64 K, const ALoad& A, const BLoad& B, const Epi& epi, bool fused = true) {
    Gemm<ALoad, BLoad, Epi> g{batch, M, N, K, A, B, epi};
    g.run(fused);
}

// The plain epilogue: out[b, i, j] = C (+ bias[j]), stored as Out.
template <class Out> struct StoreRows {
    typedef typename AccOf<Out>::type Acc;
    static constexpr bool rows_hook = false;
    Out* out; const Out* bias; i64 M, N;
    Acc* accumulator;
    void row(i64 b, i64 i, i64 j0, const Acc* v, i64 n) const {
        Out* o = out + (b * M + i) * N + j0;
        if (bias != nullptr) {
            const Out* bb = bias + j0;
            #pragma omp simd
            for (i64 j = 0; j < n; ++j) put(o + j, v[j] + to_acc(bb[j]));
        } else {
            #pragma omp simd
            for (i64 j = 0; j < n; ++j) put(o + j, v[j]);
        }
    }
    void rows_done(i64, i64, i64) const {}
};
