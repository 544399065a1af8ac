/*
 * FusedAttention with AVX-512: the tiles and their micro-kernels (the
 * kernel glue, the work split and the portable path are in
 * fast_attention.c).
 *
 * Vectors run along queries. A group is 32 queries (two zmm); a work item
 * holds `groups` of them for one (batch, head) and streams over the keys
 * in tiles of `kblock`. For each tile and group:
 *
 *   S   scores of the 32 queries against the tile's keys, Sᵀ[key][query]:
 *       the group's Q is packed once, transposed ([depth][32]); each key's
 *       depth values are broadcast from K wherever it lies (K rows or K
 *       columns), so K is never copied in fp32.
 *   max the tile's maximum per query is a plain vector max over keys (no
 *       horizontal reductions, since lanes are queries);
 *   exp online softmax: new running max m', scale alpha = e^(m - m'),
 *       P = e^(S - m'), running sum l = alpha l + sum P;
 *   PV  Oᵀ[dv][query] = alpha Oᵀ + P V, each V element broadcast.
 *
 * The output is Oᵀ / l, transposed back once per item. Memory beyond the
 * inputs and output is the per-thread tile state: Qᵀ and Oᵀ of the item,
 * one tile of scores, and in bf16 the converted K, V and P tiles, all sized
 * by the block sizes and not by N or M.
 *
 * bf16 (compute_precision "bf16"): Q, K and V are converted to bf16 pairs
 * (two depth values, or two keys, in one 32-bit lane) and both products use
 * vdpbf16ps with fp32 accumulation; P is rounded to bf16 for the second
 * product. Sums, max, exp and the final division stay fp32. The K and V
 * tiles are converted once per item and shared by its groups, key-major or
 * depth-major, whichever their source allows with whole vectors. A bf16
 * node without a mask (impl "fast") takes the fused path of
 * fast_attention_bf16.c for its scores and softmax instead of the tiles'
 * S, max and exp below: Q scaled before its rounding, P computed while the
 * scores are in registers; the packing, P V and the output are shared.
 *
 * exp, impl "fast": scores are kept in base-2 units (log2 e is folded into
 * the scale and the mask) and exponentiated as 2^x = 2^n 2^r, |r| <= 1/2,
 * with a degree-6 minimax polynomial and vscalefps (<= 2 ulp; underflow
 * and subnormals rounded once). impl "exact": natural units, e^x evaluated
 * in double and rounded once (correctly rounded but for rare ties).
 *
 * D and Dv are runtime values; 16, 32 and 64 have their own instances of
 * the micro-kernels with the depth loop unrolled.
 */
#include "runner/cpu/attention.h"
#include "runner/cpu/fast_attention.h"
#include "runner/cpu/fast_attention_x512.h"
#include "runner/cpu/transpose16.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

bool cp_att_x512_usable(bool bf16)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && (!bf16 || __builtin_cpu_supports("avx512bf16"));
}

/* ---- scratch layout ----------------------------------------------------- */

struct x_bufs {
    float *qt;    /* groups x [D][QW] (fp32) or [D2][QW] pairs (bf16) */
    float *o;     /* groups x [Dv][QW] */
    float *ml;    /* groups x {m[QW], l[QW]} */
    float *s;     /* [kblock][QW] scores, then P (fp32) */
    uint32_t *pp; /* [kblock/2 + 1][QW] P pairs (bf16) */
    uint32_t *kp; /* [kblock][D2] or [D2][kblock] K pairs (bf16) */
    uint32_t *vp; /* [kblock/2 + 1][Dv] or [Dv][x_vp_stride] V pairs (bf16) */
};

/* Row length of a depth-major V pair tile. */
static int64_t x_vp_stride(int64_t kblock)
{
    return kblock / 2 + 16;
}

static size_t x_round64(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* Carve the thread's scratch (base 64-byte aligned; NULL only measures).
 * Returns the bytes used. */
static size_t x_layout(const struct cp_att_geom *geo, int64_t groups, int64_t kblock, void *base,
                       struct x_bufs *b)
{
    size_t d2 = (size_t)(geo->d + 1) / 2, dv = (size_t)geo->dv, g = (size_t)groups;
    size_t kb = (size_t)kblock, kp2 = kb / 2 + 1, vs = (size_t)x_vp_stride(kblock);
    size_t sizes[7] = {
        g * (size_t)geo->d * QW * 4,
        g * dv * QW * 4,
        g * 2 * QW * 4,
        kb * QW * 4,
        geo->bf16 ? kp2 * QW * 4 : 0,
        geo->bf16 ? kb * d2 * 4 : 0,
        geo->bf16 ? (kp2 > vs ? kp2 : vs) * dv * 4 : 0,
    };
    char *p = base;
    size_t off = 0;
    void *ptr[7];
    for (int i = 0; i < 7; i++) {
        ptr[i] = p ? p + off : NULL;
        off += x_round64(sizes[i]);
    }
    if (b) {
        b->qt = ptr[0];
        b->o = ptr[1];
        b->ml = ptr[2];
        b->s = ptr[3];
        b->pp = ptr[4];
        b->kp = ptr[5];
        b->vp = ptr[6];
    }
    return off;
}

size_t cp_att_x512_scratch(const struct cp_att_geom *geo, int64_t groups, int64_t kblock)
{
    return x_layout(geo, groups, kblock, NULL, NULL);
}

/* ---- exp ---------------------------------------------------------------- */

X512_INLINE __m512d x_exp_pd(__m512d x)
{
    x = _mm512_max_pd(_mm512_set1_pd(-110.0), x);
    __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(1.4426950408889634)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(0.6931471805599453094), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(2.319046813846299558e-17), r);
    /* Taylor to degree 11 on |r| <= 0.35: truncation below 1e-13. */
    __m512d p = _mm512_set1_pd(1.0 / 39916800.0);
    static const double c[] = {
        1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
        1.0 / 24.0,      1.0 / 6.0,      0.5,           1.0,          1.0};
    for (int i = 0; i < 11; i++)
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(c[i]));
    return _mm512_scalef_pd(p, n);
}

X512_INLINE __m512 x_exp_exact(__m512 x)
{
    __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    __m256 a = _mm512_cvtpd_ps(x_exp_pd(lo)), b = _mm512_cvtpd_ps(x_exp_pd(hi));
    return _mm512_castpd_ps(
        _mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(a)), _mm256_castps_pd(b), 1));
}

X512 void cp_att_x512_exp(const float *x, float *y, int64_t n, bool exact)
{
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(k, x + i);
        _mm512_mask_storeu_ps(y + i, k, exact ? x_exp_exact(v) : x_exp2_fast(v));
    }
}

/* ---- bf16 packing ---------------------------------------------------------- */

/* The bf16 bits of f, rounded as vcvtneps2bf16 does. */
static inline uint32_t x_bf16_bits(float f)
{
    float r = cp_att_round_bf16(f);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return u >> 16;
}

/* K tile, as depth pairs: key-major kp[j][D2] when K rows are contiguous
 * (BHND, BNHD), depth-major kp[p][kblock] when K is stored transposed
 * (BHDN). An odd last depth is paired with zero. */
X512 static void x_pack_k(const struct cp_att_geom *geo, const float *k, int64_t cnt,
                          int64_t kblock, uint32_t *kp)
{
    int64_t d2 = (geo->d + 1) / 2;
    if (geo->k.d == 1) {
        for (int64_t j = 0; j < cnt; j++) {
            const float *row = k + j * geo->k.row;
            uint16_t *dst = (uint16_t *)(kp + j * d2);
            for (int64_t c = 0; c < geo->d; c += 16) {
                __mmask16 m = x_lanes(geo->d - c);
                __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, row + c));
                _mm256_mask_storeu_epi16(dst + c, m, (__m256i)v);
            }
            if (geo->d & 1)
                dst[geo->d] = 0;
        }
        return;
    }
    __m512i idx = x_interleave_idx();
    for (int64_t p = 0; p < d2; p++) {
        const float *c0 = k + 2 * p * geo->k.d, *c1 = c0 + geo->k.d;
        bool odd = 2 * p + 1 >= geo->d;
        for (int64_t j = 0; j < cnt; j += 16) {
            __mmask16 m = x_lanes(cnt - j);
            __m512 a = _mm512_maskz_loadu_ps(m, c0 + j);
            __m512 b = odd ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, c1 + j);
            _mm512_mask_storeu_epi32(kp + p * kblock + j, m, x_pair(a, b, idx));
        }
    }
}

/* V tile, as pairs of consecutive keys: key-major vp[jp][Dv] when V rows
 * are contiguous, depth-major vp[c][x_vp_stride] when V is stored
 * transposed. An odd last key is paired with zero. */
X512 static void x_pack_v(const struct cp_att_geom *geo, const float *v, int64_t cnt,
                          int64_t kblock, uint32_t *vp)
{
    int64_t dv = geo->dv, npairs = (cnt + 1) / 2;
    if (geo->v.d == 1) {
        __m512i idx = x_interleave_idx();
        for (int64_t jp = 0; jp < npairs; jp++) {
            const float *r0 = v + 2 * jp * geo->v.row, *r1 = r0 + geo->v.row;
            bool odd = 2 * jp + 1 >= cnt;
            for (int64_t c = 0; c < dv; c += 16) {
                __mmask16 m = x_lanes(dv - c);
                __m512 a = _mm512_maskz_loadu_ps(m, r0 + c);
                __m512 b = odd ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, r1 + c);
                _mm512_mask_storeu_epi32(vp + jp * dv + c, m, x_pair(a, b, idx));
            }
        }
        return;
    }
    /* 32 consecutive keys of one depth convert straight into 16 pairs. */
    int64_t vs = x_vp_stride(kblock);
    for (int64_t c = 0; c < dv; c++) {
        const float *col = v + c * geo->v.d;
        for (int64_t j = 0; j < cnt; j += 32) {
            __m512 lo = _mm512_maskz_loadu_ps(x_lanes(cnt - j), col + j);
            __m512 hi = _mm512_maskz_loadu_ps(x_lanes(cnt - j - 16), col + j + 16);
            __m512i x = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
            _mm512_mask_storeu_epi32(vp + c * vs + j / 2, x_lanes(npairs - j / 2), x);
        }
    }
}

/* Lane offsets 0, stride, ..., 15 stride for gathers; false when they
 * overflow 32 bits. */
X512_INLINE bool x_lane_offsets(int64_t stride, __m512i *idx)
{
    if (stride < 0 || stride > INT32_MAX / 16)
        return false;
    *idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int)stride));
    return true;
}

/* The group's queries times qscale, transposed: qt[c][i] = q[i, c] *
 * qscale (fp32) or depth pairs qt[p][i] (bf16, rounded after the scaling);
 * lanes past `valid` are zero. In bf16 each pair of depths is gathered
 * along the queries and converted as vectors. */
X512 static void x_pack_q(const struct cp_att_geom *geo, const float *q, int64_t valid,
                          float qscale, float *qt)
{
    __m512i rows;
    if (!geo->bf16) {
        for (int64_t c = 0; c < geo->d; c++)
            for (int64_t i = 0; i < QW; i++)
                qt[c * QW + i] = i < valid ? q[i * geo->q.row + c * geo->q.d] * qscale : 0.0f;
        return;
    }
    uint32_t *qp = (uint32_t *)qt;
    __m512 sc = _mm512_set1_ps(qscale);
    if (geo->q.d == 1) {
        /* rows of 32 depths -> 16 pairs each, transposed 16 queries at a
         * time (transpose16.h) */
        int64_t d2 = (geo->d + 1) / 2;
        for (int h = 0; h < 2; h++)
            for (int64_t c = 0; c < geo->d; c += 32) {
                __m512i r[16];
                for (int64_t i = 0; i < 16; i++) {
                    if (16 * h + i >= valid) {
                        r[i] = _mm512_setzero_si512();
                        continue;
                    }
                    const float *row = q + (16 * h + i) * geo->q.row + c;
                    __m512 lo = _mm512_maskz_loadu_ps(x_lanes(geo->d - c), row);
                    __m512 hi = _mm512_maskz_loadu_ps(x_lanes(geo->d - c - 16), row + 16);
                    r[i] =
                        (__m512i)_mm512_cvtne2ps_pbh(_mm512_mul_ps(hi, sc), _mm512_mul_ps(lo, sc));
                }
                cp_transpose16(r);
                for (int64_t p = 0; p < 16 && c / 2 + p < d2; p++)
                    _mm512_store_si512(qp + (c / 2 + p) * QW + 16 * h, r[p]);
            }
        return;
    }
    if (x_lane_offsets(geo->q.row, &rows)) {
        __m512i idx = x_interleave_idx();
        for (int h = 0; h < 2; h++) {
            __mmask16 m = x_lanes(valid - 16 * h);
            const float *base = q + 16 * h * geo->q.row;
            for (int64_t p = 0; p < (geo->d + 1) / 2; p++) {
                const float *c0 = base + 2 * p * geo->q.d;
                __m512 a = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, rows, c0, 4);
                __m512 b = 2 * p + 1 < geo->d ? _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m,
                                                                         rows, c0 + geo->q.d, 4)
                                              : _mm512_setzero_ps();
                _mm512_store_si512(qp + p * QW + 16 * h,
                                   x_pair(_mm512_mul_ps(a, sc), _mm512_mul_ps(b, sc), idx));
            }
        }
        return;
    }
    for (int64_t p = 0; p < (geo->d + 1) / 2; p++)
        for (int64_t i = 0; i < QW; i++) {
            uint32_t lo = 0, hi = 0;
            if (i < valid) {
                const float *row = q + i * geo->q.row;
                lo = x_bf16_bits(row[2 * p * geo->q.d] * qscale);
                if (2 * p + 1 < geo->d)
                    hi = x_bf16_bits(row[(2 * p + 1) * geo->q.d] * qscale);
            }
            qp[p * QW + i] = lo | hi << 16;
        }
}

/* ---- scores ------------------------------------------------------------------ */

struct x_tile {
    const float *qt;    /* group's Qᵀ (fp32) or pairs (bf16) */
    const float *k;     /* fp32: key j0 of the tile */
    int64_t krs, kds;   /* fp32: strides of K's rows and depth */
    const uint32_t *kp; /* bf16: packed K tile */
    int64_t kpitch;     /* bf16, depth-major: row length of kp */
    int64_t cnt;        /* keys in the tile */
    const float *mask;  /* at (b, h, first query of the group, key j0); NULL if none */
    int64_t mrs, mds;   /* mask strides along queries and keys */
    float mask_mul;     /* log2 e in base-2 units, else 1 */
    int64_t valid;      /* queries of the group inside N */
    float scale;        /* bf16: applied to the sums */
    float *s;           /* [cnt][QW] */
};

/* Store a key's 32 scores and fold them into the running maximum. */
X512_INLINE void x_score_out(float *s, __m512 s0, __m512 s1, __m512 *mx0, __m512 *mx1)
{
    _mm512_store_ps(s, s0);
    _mm512_store_ps(s + 16, s1);
    *mx0 = _mm512_max_ps(*mx0, s0);
    *mx1 = _mm512_max_ps(*mx1, s1);
}

/* Add the mask to the tile's scores (times mask_mul) and recompute the
 * maximum: broadcast when the mask does not vary along queries, else
 * gathered per query. */
X512 static void x_add_mask(const struct x_tile *t, float *bmax)
{
    __m512 mx0 = _mm512_set1_ps(-INFINITY), mx1 = mx0, mm = _mm512_set1_ps(t->mask_mul);
    __m512i idx =
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                           _mm512_set1_epi32((int)t->mrs));
    __m512i idx1 = _mm512_add_epi32(idx, _mm512_set1_epi32((int)(16 * t->mrs)));
    __mmask16 k0 = x_lanes(t->valid), k1 = x_lanes(t->valid - 16);
    float *s = t->s;
    for (int64_t j = 0; j < t->cnt; j++) {
        const float *mp = t->mask + j * t->mds;
        __m512 m0, m1;
        if (t->mrs == 0) {
            m0 = m1 = _mm512_set1_ps(*mp);
        } else {
            m0 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k0, idx, mp, 4);
            m1 = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k1, idx1, mp, 4);
        }
        __m512 s0 = _mm512_fmadd_ps(m0, mm, _mm512_load_ps(s + j * QW));
        __m512 s1 = _mm512_fmadd_ps(m1, mm, _mm512_load_ps(s + j * QW + 16));
        x_score_out(s + j * QW, s0, s1, &mx0, &mx1);
    }
    _mm512_store_ps(bmax, mx0);
    _mm512_store_ps(bmax + 16, mx1);
}

/* fp32 scores of R keys from j: K[j + r, c] broadcast against Qᵀ[c]. */
X512_INLINE void x_s_f32_block(const struct x_tile *t, int64_t j, int R, int64_t D, bool kcol,
                               __m512 *mx0, __m512 *mx1)
{
    __m512 c0[RK], c1[RK];
    const float *qt = t->qt;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    if (kcol) {
        const float *kj = t->k + j;
        int64_t kds = t->kds;
        for (int64_t c = 0; c < D; c++) {
            __m512 q0 = _mm512_load_ps(qt + c * QW), q1 = _mm512_load_ps(qt + c * QW + 16);
            const float *kc = kj + c * kds;
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m512 kv = _mm512_set1_ps(kc[r]);
                c0[r] = _mm512_fmadd_ps(q0, kv, c0[r]);
                c1[r] = _mm512_fmadd_ps(q1, kv, c1[r]);
            }
        }
    } else {
        const float *kr[RK];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            kr[r] = t->k + (j + r) * t->krs;
        for (int64_t c = 0; c < D; c++) {
            __m512 q0 = _mm512_load_ps(qt + c * QW), q1 = _mm512_load_ps(qt + c * QW + 16);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m512 kv = _mm512_set1_ps(kr[r][c]);
                c0[r] = _mm512_fmadd_ps(q0, kv, c0[r]);
                c1[r] = _mm512_fmadd_ps(q1, kv, c1[r]);
            }
        }
    }
    float *s = t->s + j * QW;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        x_score_out(s + r * QW, c0[r], c1[r], mx0, mx1);
}

/* bf16 scores of R keys from j: depth pairs against Qᵀ pairs, vdpbf16ps. */
X512_INLINE void x_s_bf16_block(const struct x_tile *t, int64_t j, int R, int64_t D2, bool kcol,
                                __m512 *mx0, __m512 *mx1)
{
    __m512 c0[RK], c1[RK];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    const uint32_t *qp = (const uint32_t *)t->qt, *kp = t->kp;
    int64_t kpitch = t->kpitch;
    for (int64_t c = 0; c < D2; c++) {
        __m512bh q0 = (__m512bh)_mm512_load_si512(qp + c * QW);
        __m512bh q1 = (__m512bh)_mm512_load_si512(qp + c * QW + 16);
        const uint32_t *kc = kcol ? kp + c * kpitch + j : kp + j * D2 + c;
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            __m512bh kv = (__m512bh)_mm512_set1_epi32((int)kc[kcol ? r : r * D2]);
            c0[r] = _mm512_dpbf16_ps(c0[r], q0, kv);
            c1[r] = _mm512_dpbf16_ps(c1[r], q1, kv);
        }
    }
    __m512 sc = _mm512_set1_ps(t->scale);
    float *s = t->s + j * QW;
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        x_score_out(s + r * QW, _mm512_mul_ps(c0[r], sc), _mm512_mul_ps(c1[r], sc), mx0, mx1);
}

/* All keys of the tile; the tile's maximum per query into bmax[QW]. */
X512_INLINE void x_s(const struct x_tile *t, int64_t D, bool bf16, bool kcol, float *bmax)
{
    __m512 mx0 = _mm512_set1_ps(-INFINITY), mx1 = mx0;
    int64_t j = 0;
    for (; j + RK <= t->cnt; j += RK)
        if (bf16)
            x_s_bf16_block(t, j, RK, D, kcol, &mx0, &mx1);
        else
            x_s_f32_block(t, j, RK, D, kcol, &mx0, &mx1);
    for (; j < t->cnt; j++)
        if (bf16)
            x_s_bf16_block(t, j, 1, D, kcol, &mx0, &mx1);
        else
            x_s_f32_block(t, j, 1, D, kcol, &mx0, &mx1);
    _mm512_store_ps(bmax, mx0);
    _mm512_store_ps(bmax + 16, mx1);
    if (t->mask)
        x_add_mask(t, bmax);
}

/* One function per depth (D, or D/2 pairs in bf16), precision and K
 * layout. */
#define X_S(name, D, BF16, KCOL)                                                                   \
    X512 static void name(const struct x_tile *t, int64_t d, float *bmax)                          \
    {                                                                                              \
        (void)d;                                                                                   \
        x_s(t, D, BF16, KCOL, bmax);                                                               \
    }
X_S(x_s_f32_16r, 16, false, false)
X_S(x_s_f32_32r, 32, false, false)
X_S(x_s_f32_64r, 64, false, false)
X_S(x_s_f32_nr, d, false, false)
X_S(x_s_f32_16c, 16, false, true)
X_S(x_s_f32_32c, 32, false, true)
X_S(x_s_f32_64c, 64, false, true)
X_S(x_s_f32_nc, d, false, true)
X_S(x_s_bf16_8r, 8, true, false)
X_S(x_s_bf16_16r, 16, true, false)
X_S(x_s_bf16_32r, 32, true, false)
X_S(x_s_bf16_nr, d, true, false)
X_S(x_s_bf16_8c, 8, true, true)
X_S(x_s_bf16_16c, 16, true, true)
X_S(x_s_bf16_32c, 32, true, true)
X_S(x_s_bf16_nc, d, true, true)

typedef void (*x_s_fn)(const struct x_tile *t, int64_t d, float *bmax);

static x_s_fn x_pick_s(const struct cp_att_geom *geo)
{
    /* [precision][layout][16, 32, 64, other] */
    static const x_s_fn fns[2][2][4] = {
        {{x_s_f32_16r, x_s_f32_32r, x_s_f32_64r, x_s_f32_nr},
         {x_s_f32_16c, x_s_f32_32c, x_s_f32_64c, x_s_f32_nc}},
        {{x_s_bf16_8r, x_s_bf16_16r, x_s_bf16_32r, x_s_bf16_nr},
         {x_s_bf16_8c, x_s_bf16_16c, x_s_bf16_32c, x_s_bf16_nc}},
    };
    int depth = geo->d == 16 ? 0 : geo->d == 32 ? 1 : geo->d == 64 ? 2 : 3;
    return fns[geo->bf16][geo->k.d != 1][depth];
}

/* ---- online softmax ----------------------------------------------------------- */

X512_INLINE __m512 x_exp_any(__m512 x, bool exact)
{
    return exact ? x_exp_exact(x) : x_exp2_fast(x);
}

/* Fold the tile's maxima into the running max m and sum l of the group,
 * turn the scores into P (in place, fp32; or into pairs pp, bf16) and
 * return alpha = e^(m_old - m_new) per query in alpha[QW]. A query whose
 * scores are all -inf so far keeps m = -inf and subtracts 0 instead, so
 * that its P are 0 rather than NaN. */
X512_INLINE void x_softmax(float *s, int64_t cnt, const float *bmax, float *ml, float *alpha,
                           uint32_t *pp, bool exact)
{
    __m512 base[2];
    for (int v = 0; v < 2; v++) {
        __m512 m_old = _mm512_load_ps(ml + 16 * v);
        __m512 m_new = _mm512_max_ps(m_old, _mm512_load_ps(bmax + 16 * v));
        __mmask16 dead = _mm512_cmp_ps_mask(m_new, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
        base[v] = _mm512_mask_blend_ps(dead, m_new, _mm512_setzero_ps());
        __m512 a = x_exp_any(_mm512_sub_ps(m_old, base[v]), exact);
        _mm512_store_ps(alpha + 16 * v, a);
        _mm512_store_ps(ml + 16 * v, m_new);
        _mm512_store_ps(ml + QW + 16 * v, _mm512_mul_ps(_mm512_load_ps(ml + QW + 16 * v), a));
    }
    __m512 l0 = _mm512_setzero_ps(), l1 = l0;
    if (!pp) {
        for (int64_t j = 0; j < cnt; j++) {
            __m512 p0 = x_exp_any(_mm512_sub_ps(_mm512_load_ps(s + j * QW), base[0]), exact);
            __m512 p1 = x_exp_any(_mm512_sub_ps(_mm512_load_ps(s + j * QW + 16), base[1]), exact);
            l0 = _mm512_add_ps(l0, p0);
            l1 = _mm512_add_ps(l1, p1);
            _mm512_store_ps(s + j * QW, p0);
            _mm512_store_ps(s + j * QW + 16, p1);
        }
    } else {
        __m512i idx = x_interleave_idx();
        for (int64_t j = 0; j < cnt; j += 2) {
            __m512 p[2][2];
            for (int u = 0; u < 2; u++)
                for (int v = 0; v < 2; v++) {
                    if (j + u >= cnt) {
                        p[u][v] = _mm512_setzero_ps();
                        continue;
                    }
                    __m512 x = _mm512_sub_ps(_mm512_load_ps(s + (j + u) * QW + 16 * v), base[v]);
                    p[u][v] = x_exp_any(x, exact);
                }
            l0 = _mm512_add_ps(l0, _mm512_add_ps(p[0][0], p[1][0]));
            l1 = _mm512_add_ps(l1, _mm512_add_ps(p[0][1], p[1][1]));
            _mm512_store_si512(pp + j / 2 * QW, x_pair(p[0][0], p[1][0], idx));
            _mm512_store_si512(pp + j / 2 * QW + 16, x_pair(p[0][1], p[1][1], idx));
        }
    }
    _mm512_store_ps(ml + QW, _mm512_add_ps(_mm512_load_ps(ml + QW), l0));
    _mm512_store_ps(ml + QW + 16, _mm512_add_ps(_mm512_load_ps(ml + QW + 16), l1));
}

X512 static void x_softmax_fast(float *s, int64_t cnt, const float *bmax, float *ml, float *alpha,
                                uint32_t *pp)
{
    x_softmax(s, cnt, bmax, ml, alpha, pp, false);
}

X512 static void x_softmax_exact(float *s, int64_t cnt, const float *bmax, float *ml, float *alpha,
                                 uint32_t *pp)
{
    x_softmax(s, cnt, bmax, ml, alpha, pp, true);
}

/* ---- P V ------------------------------------------------------------------------ */

/* Oᵀ[c0 + c] = alpha Oᵀ[c0 + c] + sum_j P[j] V[j, c0 + c] for C depths:
 * fp32 one key per step, bf16 a pair of keys per step (vdpbf16ps). */
X512_INLINE void x_pv_block(const struct x_pv *a, int64_t c0, int C, int64_t DV, bool bf16,
                            bool vcol)
{
    float *o = a->o + c0 * QW;
    __m512 al0 = _mm512_load_ps(a->alpha), al1 = _mm512_load_ps(a->alpha + 16);
    __m512 o0[RV], o1[RV];
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        o0[c] = _mm512_mul_ps(_mm512_load_ps(o + c * QW), al0);
        o1[c] = _mm512_mul_ps(_mm512_load_ps(o + c * QW + 16), al1);
    }
    int64_t cnt = a->cnt;
    if (bf16) {
        const uint32_t *pp = a->pp;
        int64_t npairs = (cnt + 1) / 2, vpitch = a->vpitch;
        for (int64_t jp = 0; jp < npairs; jp++) {
            __m512bh p0 = (__m512bh)_mm512_load_si512(pp + jp * QW);
            __m512bh p1 = (__m512bh)_mm512_load_si512(pp + jp * QW + 16);
            const uint32_t *vj = vcol ? a->vp + c0 * vpitch + jp : a->vp + jp * DV + c0;
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                __m512bh vv = (__m512bh)_mm512_set1_epi32((int)vj[vcol ? c * vpitch : c]);
                o0[c] = _mm512_dpbf16_ps(o0[c], p0, vv);
                o1[c] = _mm512_dpbf16_ps(o1[c], p1, vv);
            }
        }
    } else {
        const float *p = a->p;
        int64_t vrs = vcol ? 1 : a->vrs, vds = vcol ? a->vds : 1;
        const float *vj = a->v + c0 * vds;
        for (int64_t j = 0; j < cnt; j++, vj += vrs) {
            __m512 p0 = _mm512_load_ps(p + j * QW), p1 = _mm512_load_ps(p + j * QW + 16);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) {
                __m512 vv = _mm512_set1_ps(vj[c * vds]);
                o0[c] = _mm512_fmadd_ps(p0, vv, o0[c]);
                o1[c] = _mm512_fmadd_ps(p1, vv, o1[c]);
            }
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
        _mm512_store_ps(o + c * QW, o0[c]);
        _mm512_store_ps(o + c * QW + 16, o1[c]);
    }
}

X512_INLINE void x_pv(const struct x_pv *a, int64_t DV, bool bf16, bool vcol)
{
    int64_t c = 0;
    for (; c + RV <= DV; c += RV)
        x_pv_block(a, c, RV, DV, bf16, vcol);
    for (; c < DV; c++)
        x_pv_block(a, c, 1, DV, bf16, vcol);
}

#define X_PV(name, DV, BF16, VCOL)                                                                 \
    X512 static void name(const struct x_pv *a, int64_t dv)                                        \
    {                                                                                              \
        (void)dv;                                                                                  \
        x_pv(a, DV, BF16, VCOL);                                                                   \
    }
X_PV(x_pv_f32_16r, 16, false, false)
X_PV(x_pv_f32_32r, 32, false, false)
X_PV(x_pv_f32_64r, 64, false, false)
X_PV(x_pv_f32_nr, dv, false, false)
X_PV(x_pv_f32_16c, 16, false, true)
X_PV(x_pv_f32_32c, 32, false, true)
X_PV(x_pv_f32_64c, 64, false, true)
X_PV(x_pv_f32_nc, dv, false, true)
X_PV(x_pv_bf16_16r, 16, true, false)
X_PV(x_pv_bf16_32r, 32, true, false)
X_PV(x_pv_bf16_64r, 64, true, false)
X_PV(x_pv_bf16_nr, dv, true, false)
X_PV(x_pv_bf16_16c, 16, true, true)
X_PV(x_pv_bf16_32c, 32, true, true)
X_PV(x_pv_bf16_64c, 64, true, true)
X_PV(x_pv_bf16_nc, dv, true, true)

static x_pv_fn x_pick_pv(const struct cp_att_geom *geo)
{
    static const x_pv_fn fns[2][2][4] = {
        {{x_pv_f32_16r, x_pv_f32_32r, x_pv_f32_64r, x_pv_f32_nr},
         {x_pv_f32_16c, x_pv_f32_32c, x_pv_f32_64c, x_pv_f32_nc}},
        {{x_pv_bf16_16r, x_pv_bf16_32r, x_pv_bf16_64r, x_pv_bf16_nr},
         {x_pv_bf16_16c, x_pv_bf16_32c, x_pv_bf16_64c, x_pv_bf16_nc}},
    };
    int depth = geo->dv == 16 ? 0 : geo->dv == 32 ? 1 : geo->dv == 64 ? 2 : 3;
    return fns[geo->bf16][geo->v.d != 1][depth];
}

/* ---- work items ----------------------------------------------------------------- */

/* Oᵀ / l back to the output rows of the group: 16 depths of 16 queries
 * at a time, transposed in registers (transpose16.h). */
X512 static void x_store_out(const struct cp_att_geom *geo, const float *o, const float *ml,
                             int64_t valid, float *y)
{
    float inv[QW] __attribute__((aligned(64)));
    for (int v = 0; v < 2; v++)
        _mm512_store_ps(inv + 16 * v,
                        _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_load_ps(ml + QW + 16 * v)));
    for (int64_t h = 0; h < 2 && 16 * h < valid; h++)
        for (int64_t c0 = 0; c0 < geo->dv; c0 += 16) {
            __m512i r[16];
            for (int64_t c = 0; c < 16; c++)
                r[c] = c0 + c < geo->dv ? _mm512_load_si512(o + (c0 + c) * QW + 16 * h)
                                        : _mm512_setzero_si512();
            cp_transpose16(r);
            __mmask16 m = x_lanes(geo->dv - c0);
            for (int64_t i = 0; i < 16 && 16 * h + i < valid; i++)
                _mm512_mask_storeu_ps(y + (16 * h + i) * geo->out.row + c0, m,
                                      _mm512_mul_ps((__m512)r[i], _mm512_set1_ps(inv[16 * h + i])));
        }
}

X512 void cp_att_x512_run(const struct cp_att_fast_plan *p, const struct cp_att_io *io,
                          int64_t item0, int64_t item1, void *scratch)
{
    const struct cp_att_geom *geo = &p->geo;
    struct x_bufs bf;
    x_layout(geo, p->groups, p->kblock, scratch, &bf);
    x_s_fn s_fn = x_pick_s(geo);
    x_pv_fn pv_fn = x_pick_pv(geo);
    /* bf16 without a mask: the fused path of fast_attention_bf16.c, with Q
     * scaled before its rounding. */
    bool fused = geo->bf16 && !geo->exact && !io->mask;
    x_fz_fn fz_fn = fused ? cp_att_x512_pick_fused(geo) : NULL;
    void (*smx)(float *, int64_t, const float *, float *, float *, uint32_t *) =
        geo->exact ? x_softmax_exact : x_softmax_fast;
    /* "fast" works in base-2 units: log2 e folded into scale and mask. */
    float unit = geo->exact ? 1.0f : 1.44269504088896341f;
    int64_t dq = geo->bf16 ? (geo->d + 1) / 2 : geo->d;
    int64_t vpitch = geo->v.d == 1 ? geo->dv : x_vp_stride(p->kblock);
    float bmax[QW] __attribute__((aligned(64)));
    float alpha[QW] __attribute__((aligned(64)));
    float ones[QW] __attribute__((aligned(64)));
    for (int i = 0; i < QW; i++)
        ones[i] = 1.0f;

    for (int64_t item = item0; item < item1; item++) {
        int64_t bh = item / p->qblocks, qb = item % p->qblocks;
        int64_t b = bh / geo->heads, h = bh % geo->heads;
        int64_t i0 = qb * p->groups * QW;
        int64_t ng = (geo->n - i0 + QW - 1) / QW;
        ng = ng < p->groups ? ng : p->groups;
        const float *q = io->q + b * geo->q.b + h * geo->q.h;
        const float *k = io->k + b * geo->k.b + h * geo->k.h;
        const float *v = io->v + b * geo->v.b + h * geo->v.h;
        const float *mask = io->mask ? io->mask + b * geo->mask.b + h * geo->mask.h : NULL;
        float *y = io->y + b * geo->out.b + h * geo->out.h;

        for (int64_t g = 0; g < ng; g++) {
            int64_t first = i0 + g * QW, valid = geo->n - first < QW ? geo->n - first : QW;
            x_pack_q(geo, q + first * geo->q.row, valid,
                     !geo->bf16 || fused ? geo->scale * unit : 1.0f, bf.qt + g * dq * QW);
            memset(bf.o + g * geo->dv * QW, 0, (size_t)geo->dv * QW * sizeof(float));
            float *ml = bf.ml + g * 2 * QW;
            for (int i = 0; i < QW; i++) {
                ml[i] = -INFINITY;
                ml[QW + i] = 0.0f;
            }
        }
        for (int64_t j0 = 0; j0 < geo->m; j0 += p->kblock) {
            int64_t cnt = geo->m - j0 < p->kblock ? geo->m - j0 : p->kblock;
            const float *kt = k + j0 * geo->k.row, *vt = v + j0 * geo->v.row;
            if (geo->bf16) {
                x_pack_k(geo, kt, cnt, p->kblock, bf.kp);
                x_pack_v(geo, vt, cnt, p->kblock, bf.vp);
            }
            for (int64_t g = 0; g < ng; g++) {
                int64_t first = i0 + g * QW, valid = geo->n - first < QW ? geo->n - first : QW;
                struct x_tile t = {
                    .qt = bf.qt + g * dq * QW,
                    .k = kt,
                    .krs = geo->k.row,
                    .kds = geo->k.d,
                    .kp = bf.kp,
                    .kpitch = p->kblock,
                    .cnt = cnt,
                    .mask = mask ? mask + first * geo->mask.row + j0 * geo->mask.d : NULL,
                    .mrs = geo->mask.row,
                    .mds = geo->mask.d,
                    .mask_mul = unit,
                    .valid = valid,
                    .scale = geo->scale * unit,
                    .s = bf.s,
                };
                float *ml = bf.ml + g * 2 * QW;
                if (fused) {
                    struct x_fz f = {
                        .qp = (const uint32_t *)t.qt,
                        .kp = bf.kp,
                        .kpitch = p->kblock,
                        .cnt = cnt,
                        .ml = ml,
                        .pp = bf.pp,
                        .pv = {.vp = bf.vp,
                               .vpitch = vpitch,
                               .o = bf.o + g * geo->dv * QW,
                               .alpha = ones},
                        .vcol = geo->v.d != 1,
                        .pv_fn = pv_fn,
                        .dv = geo->dv,
                    };
                    fz_fn(&f, dq);
                    continue;
                }
                s_fn(&t, dq, bmax);
                smx(bf.s, cnt, bmax, ml, alpha, geo->bf16 ? bf.pp : NULL);
                struct x_pv a = {
                    .p = bf.s,
                    .pp = bf.pp,
                    .v = vt,
                    .vrs = geo->v.row,
                    .vds = geo->v.d,
                    .vp = bf.vp,
                    .vpitch = vpitch,
                    .cnt = cnt,
                    .o = bf.o + g * geo->dv * QW,
                    .alpha = alpha,
                };
                pv_fn(&a, geo->dv);
            }
        }
        for (int64_t g = 0; g < ng; g++) {
            int64_t first = i0 + g * QW, valid = geo->n - first < QW ? geo->n - first : QW;
            x_store_out(geo, bf.o + g * geo->dv * QW, bf.ml + g * 2 * QW, valid,
                        y + first * geo->out.row);
        }
    }
}
