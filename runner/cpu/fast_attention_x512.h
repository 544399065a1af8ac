/*
 * Private to fast_attention_avx512.c and fast_attention_bf16.c: what the
 * two halves of the AVX-512 FusedAttention path share.
 *
 * fast_attention_avx512.c holds the work items, the packing of Q, K and V,
 * the score and P V micro-kernels and the tile-wise softmax that every
 * fp32 node and every node with a mask runs. fast_attention_bf16.c holds
 * the path of bf16 nodes without a mask (the attention of diffusion
 * U-Nets and most encoders), where scores, softmax and the bf16 P are one
 * pass over registers; it calls back into the P V micro-kernel through
 * `x_pv_fn`.
 *
 * Layouts (see fast_attention_avx512.c): a group is QW = 32 queries, two
 * vectors, lanes along queries; bf16 operands are packed as pairs (two
 * depths or two keys) in 32-bit lanes for vdpbf16ps.
 */
#ifndef CP_RUNNER_FAST_ATTENTION_X512_H
#define CP_RUNNER_FAST_ATTENTION_X512_H

#include "runner/cpu/attention.h"

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

#define X512        __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define X512_INLINE X512 static inline __attribute__((always_inline))

#define QW 32 /* queries per group (two vectors) */
#define RK 8  /* keys per register block of the score micro-kernels */
#define RV 8  /* output depths per register block of the PV micro-kernel */

/* The first n of 16 lanes (none when n <= 0). */
static inline __mmask16 x_lanes(int64_t n)
{
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}

/* 2^x: x = n + r with |r| <= 1/2, 2^r by a degree-6 minimax polynomial
 * (relative error 1.9e-9), 2^n applied by vscalefps (exact, and rounding
 * once into the subnormal range). */
X512_INLINE __m512 x_exp2_fast(__m512 x)
{
    /* 2^-200 is 0 in single precision; the clamp keeps r finite for -inf.
     * max(c, x) returns x when x is NaN. */
    x = _mm512_max_ps(_mm512_set1_ps(-200.0f), x);
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.534581242594868e-04f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.339993090368807e-03f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(9.618489071726799e-03f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.550328642129898e-02f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(2.402264624834061e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(6.931471824645996e-01f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* Interleave the two halves of a 32 x bf16 vector: lanes i of the low and
 * high halves become the pair in 32-bit lane i. */
X512_INLINE __m512i x_interleave_idx(void)
{
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                            6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
}

/* Pairs (a[i], b[i]) of two fp32 vectors as 16 x 32-bit bf16 pairs. */
X512_INLINE __m512i x_pair(__m512 a, __m512 b, __m512i idx)
{
    return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(b, a));
}

/* One group's Oᵀ += P V over one run of keys. */
struct x_pv {
    const float *p;     /* fp32: [cnt][QW] */
    const uint32_t *pp; /* bf16: [cnt/2][QW] pairs */
    const float *v;     /* fp32: value row j0 */
    int64_t vrs, vds;   /* fp32: V strides of rows and depth */
    const uint32_t *vp; /* bf16: packed V, from the run's first pair of keys */
    int64_t vpitch;     /* bf16, depth-major: row length of vp */
    int64_t cnt;
    float *o;           /* group's Oᵀ [Dv][QW] */
    const float *alpha; /* [QW]: Oᵀ is multiplied by it first */
};

typedef void (*x_pv_fn)(const struct x_pv *a, int64_t dv);

/* One group against one key tile in the fused bf16 path. */
struct x_fz {
    const uint32_t *qp; /* group's Q pairs [D2][QW], scaled (base-2 units) */
    const uint32_t *kp; /* packed K tile: key-major [cnt][D2] or depth-major */
    int64_t kpitch;     /* depth-major kp: row length */
    int64_t cnt;        /* keys in the tile */
    float *ml;          /* group's running m[QW] and l[QW] */
    uint32_t *pp;       /* P pairs, [cnt/2 + 1][QW] */
    struct x_pv pv;     /* the tile's P V: vp, vpitch, o and alpha (all ones) set */
    bool vcol;          /* V packed depth-major */
    x_pv_fn pv_fn;
    int64_t dv;
};

typedef void (*x_fz_fn)(const struct x_fz *f, int64_t d2);

/* The fused tile function for a geometry (D = 16, 32, 64 unrolled; K
 * key-major or depth-major). */
x_fz_fn cp_att_x512_pick_fused(const struct cp_att_geom *geo);

#endif
