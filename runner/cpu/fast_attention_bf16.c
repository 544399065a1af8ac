/*
 * FusedAttention in bf16 without a mask, AVX-512 BF16: scores, online
 * softmax and the bf16 probabilities of a block of keys in one pass over
 * registers (fast_attention_avx512.c runs everything else and calls in
 * through cp_att_x512_pick_fused).
 *
 * With 16-deep heads (the SD-like example) a score costs 8 vdpbf16ps lanes
 * in Q Kᵀ and 8 in P V, but its exponential, maximum and packing cost as
 * much again, all of it on the same vector pipes; the tile-wise softmax of
 * fast_attention_avx512.c also stores every score and reads it back. Here:
 *
 *   - Q is packed already scaled (scale x log2 e, so scores are in base-2
 *     units) before its rounding to bf16, as the fp32 path scales it
 *     before its products;
 *   - a block of RK keys is exponentiated while its scores are still in
 *     registers, against the group's running maximum m rather than the
 *     tile's. That is exact as long as no score exceeds m by much: P =
 *     2^(s - m) stays below 2^X_LAZY, far inside fp32's range. A block
 *     holding a larger score first sends the tile's P so far through
 *     P V, then raises m and rescales Oᵀ and l, which is what the
 *     tile-wise softmax does at every tile; past a row's first block it
 *     is rare;
 *   - 2^x is a degree-3 polynomial with 2^n added into the exponent field
 *     (x_exp2_bf16), since P is rounded to bf16 right after.
 *
 * Sums (l, and Oᵀ in the P V kernel) stay fp32, l over the unrounded P, as
 * in the tile-wise path.
 */
#include "runner/cpu/fast_attention_x512.h"

#include <math.h>

/* How far (in base-2 units) a score may exceed the running maximum before
 * the maximum is raised: P <= 2^8. */
#define X_LAZY 8.0f

/* 2^x for the probabilities, which are rounded to bf16 (a relative error
 * up to 2^-9) before the P V product: a degree-3 minimax polynomial
 * (relative error 1.0e-4, twenty times below that rounding). n = round(x)
 * by the 1.5 * 2^23 shifter, whose low bits then hold n, and 2^n is
 * applied by adding n to the exponent field. On AMD Zen 4 the multiply
 * pipes bound this loop (the vdpbf16ps of the scores share them), so only
 * the polynomial uses them: no vscalefps or product. Results below 2^-125
 * flush to zero (where the exponent addition would leave the normal
 * range); -inf gives 0 and NaN stays NaN. */
X512_INLINE __m512 x_exp2_bf16(__m512 x)
{
    const __m512 shifter = _mm512_set1_ps(12582912.0f); /* 1.5 * 2^23 */
    __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.0f), _CMP_NLT_UQ);
    __m512 t = _mm512_add_ps(x, shifter);
    __m512 r = _mm512_sub_ps(x, _mm512_sub_ps(t, shifter));
    __m512 p = _mm512_set1_ps(5.500882491469383e-02f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.422110289335251e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.932829618453979e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512i e = _mm512_slli_epi32(_mm512_castps_si512(t), 23);
    return _mm512_castsi512_ps(_mm512_maskz_add_epi32(keep, _mm512_castps_si512(p), e));
}

/* Scores of R keys from j against the group's 32 queries. */
X512_INLINE void x_fz_dots(const struct x_fz *f, int64_t j, int R, int64_t D2, bool kcol,
                           __m512 *c0, __m512 *c1)
{
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        c0[r] = c1[r] = _mm512_setzero_ps();
    const uint32_t *qp = f->qp, *kp = f->kp;
    int64_t kpitch = f->kpitch;
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
}

/* A group's softmax state while it crosses a tile. */
struct x_fz_run {
    __m512 m[2];    /* running maximum */
    __m512 base[2]; /* what is subtracted: m, or 0 where m is -inf (those P are 0) */
    __m512 lim[2];  /* m + X_LAZY: a score above it raises m */
    __m512 l[2];    /* running sum of P */
    int64_t seg;    /* first key of the tile whose P is not in Oᵀ yet */
};

X512_INLINE void x_fz_bounds(struct x_fz_run *st)
{
    for (int v = 0; v < 2; v++) {
        __mmask16 dead = _mm512_cmp_ps_mask(st->m[v], _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
        st->base[v] = _mm512_maskz_mov_ps((__mmask16)~dead, st->m[v]);
        st->lim[v] = _mm512_add_ps(st->m[v], _mm512_set1_ps(X_LAZY));
    }
}

/* Oᵀ += P V for the tile's keys [seg, j) (j even, or the tile's end). */
X512 static void x_fz_flush(const struct x_fz *f, const struct x_fz_run *st, int64_t j)
{
    if (j <= st->seg)
        return;
    struct x_pv a = f->pv;
    a.pp = f->pp;
    a.cnt = j - st->seg;
    a.vp = f->vcol ? f->pv.vp + st->seg / 2 : f->pv.vp + st->seg / 2 * f->dv;
    f->pv_fn(&a, f->dv);
}

/* A block whose maximum bm exceeds lim: the P so far into Oᵀ, then m
 * raised to max(m, bm), and Oᵀ and l multiplied by 2^(m_old - m_new). */
X512 static void x_fz_raise(const struct x_fz *f, struct x_fz_run *st, int64_t j, const __m512 *bm)
{
    x_fz_flush(f, st, j);
    st->seg = j;
    __m512 alpha[2];
    for (int v = 0; v < 2; v++) {
        __m512 m_new = _mm512_max_ps(st->m[v], bm[v]);
        __mmask16 dead = _mm512_cmp_ps_mask(m_new, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
        __m512 b = _mm512_maskz_mov_ps((__mmask16)~dead, m_new);
        alpha[v] = x_exp2_fast(_mm512_sub_ps(st->m[v], b));
        st->l[v] = _mm512_mul_ps(st->l[v], alpha[v]);
        st->m[v] = m_new;
    }
    float *o = f->pv.o;
    for (int64_t c = 0; c < f->dv; c++) {
        _mm512_store_ps(o + c * QW, _mm512_mul_ps(_mm512_load_ps(o + c * QW), alpha[0]));
        _mm512_store_ps(o + c * QW + 16, _mm512_mul_ps(_mm512_load_ps(o + c * QW + 16), alpha[1]));
    }
    x_fz_bounds(st);
}

/* R keys from j: scores, P, pairs of P (R = RK, 2, or 1 for an odd last
 * key, paired with zero). */
X512_INLINE void x_fz_block(const struct x_fz *f, struct x_fz_run *st, int64_t j, int R, int64_t D2,
                            bool kcol, __m512i idx)
{
    __m512 c0[RK], c1[RK];
    x_fz_dots(f, j, R, D2, kcol, c0, c1);
    __m512 bm[2] = {c0[0], c1[0]};
#pragma GCC unroll 8
    for (int r = 1; r < R; r++) {
        bm[0] = _mm512_max_ps(bm[0], c0[r]);
        bm[1] = _mm512_max_ps(bm[1], c1[r]);
    }
    __mmask16 up = _mm512_cmp_ps_mask(bm[0], st->lim[0], _CMP_GT_OQ) |
                   _mm512_cmp_ps_mask(bm[1], st->lim[1], _CMP_GT_OQ);
    if (__builtin_expect(up != 0, 0))
        x_fz_raise(f, st, j, bm);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++) {
        c0[r] = x_exp2_bf16(_mm512_sub_ps(c0[r], st->base[0]));
        c1[r] = x_exp2_bf16(_mm512_sub_ps(c1[r], st->base[1]));
        st->l[0] = _mm512_add_ps(st->l[0], c0[r]);
        st->l[1] = _mm512_add_ps(st->l[1], c1[r]);
    }
    uint32_t *pp = f->pp + (j - st->seg) / 2 * QW;
#pragma GCC unroll 4
    for (int r = 0; r < R; r += 2) {
        __m512 n0 = r + 1 < R ? c0[r + 1] : _mm512_setzero_ps();
        __m512 n1 = r + 1 < R ? c1[r + 1] : _mm512_setzero_ps();
        _mm512_store_si512(pp + r / 2 * QW, x_pair(c0[r], n0, idx));
        _mm512_store_si512(pp + r / 2 * QW + 16, x_pair(c1[r], n1, idx));
    }
}

/* One group against one tile: every key's P, Oᵀ += P V, m and l. */
X512_INLINE void x_fz_tile(const struct x_fz *f, int64_t D2, bool kcol)
{
    __m512i idx = x_interleave_idx();
    struct x_fz_run st;
    for (int v = 0; v < 2; v++) {
        st.m[v] = _mm512_load_ps(f->ml + 16 * v);
        st.l[v] = _mm512_load_ps(f->ml + QW + 16 * v);
    }
    st.seg = 0;
    x_fz_bounds(&st);
    int64_t j = 0, cnt = f->cnt;
    for (; j + RK <= cnt; j += RK)
        x_fz_block(f, &st, j, RK, D2, kcol, idx);
    for (; j + 2 <= cnt; j += 2)
        x_fz_block(f, &st, j, 2, D2, kcol, idx);
    if (j < cnt)
        x_fz_block(f, &st, j, 1, D2, kcol, idx);
    x_fz_flush(f, &st, cnt);
    for (int v = 0; v < 2; v++) {
        _mm512_store_ps(f->ml + 16 * v, st.m[v]);
        _mm512_store_ps(f->ml + QW + 16 * v, st.l[v]);
    }
}

/* One instance per depth (D/2 pairs) and K layout. */
#define X_FZ(name, D2, KCOL)                                                                       \
    X512 static void name(const struct x_fz *f, int64_t d2)                                        \
    {                                                                                              \
        (void)d2;                                                                                  \
        x_fz_tile(f, D2, KCOL);                                                                    \
    }
X_FZ(x_fz_8r, 8, false)
X_FZ(x_fz_16r, 16, false)
X_FZ(x_fz_32r, 32, false)
X_FZ(x_fz_nr, d2, false)
X_FZ(x_fz_8c, 8, true)
X_FZ(x_fz_16c, 16, true)
X_FZ(x_fz_32c, 32, true)
X_FZ(x_fz_nc, d2, true)

x_fz_fn cp_att_x512_pick_fused(const struct cp_att_geom *geo)
{
    /* [K layout][D = 16, 32, 64, other] */
    static const x_fz_fn fns[2][4] = {{x_fz_8r, x_fz_16r, x_fz_32r, x_fz_nr},
                                      {x_fz_8c, x_fz_16c, x_fz_32c, x_fz_nc}};
    int depth = geo->d == 16 ? 0 : geo->d == 32 ? 1 : geo->d == 64 ? 2 : 3;
    return fns[geo->k.d != 1][depth];
}
