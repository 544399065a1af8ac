/*
 * Private to runner/cpu: a 16 x 16 transpose of 32-bit elements in AVX-512
 * registers, for the kernels that turn rows into columns (fast_transpose.c,
 * and the packing of queries and outputs in fast_attention_avx512.c). 64
 * shuffles; gathers or scatters of the same elements cost several times
 * more on the AMD Zen 4 machine (one element every cycle or two).
 */
#ifndef CP_RUNNER_TRANSPOSE16_H
#define CP_RUNNER_TRANSPOSE16_H

#include <immintrin.h>

/* r[i] holds row i (16 elements); afterwards r[j] holds column j. */
__attribute__((target("avx512f"), always_inline)) static inline void cp_transpose16(__m512i *r)
{
    __m512i t[16];
    /* 32-bit, then 64-bit interleaves within 128-bit lanes */
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* r[4q + j] now holds, in 128-bit lane L, elements j of rows 4q..4q+3
     * at columns 4L + j: gather the lanes across the four groups q */
    for (int j = 0; j < 4; j++) {
        __m512i a = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x88); /* lanes 0, 2 of each */
        __m512i b = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x88);
        __m512i c = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xdd); /* lanes 1, 3 of each */
        __m512i e = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xdd);
        t[j] = _mm512_shuffle_i32x4(a, b, 0x88);      /* lane 0: column j */
        t[8 + j] = _mm512_shuffle_i32x4(a, b, 0xdd);  /* lane 2: column 8 + j */
        t[4 + j] = _mm512_shuffle_i32x4(c, e, 0x88);  /* lane 1: column 4 + j */
        t[12 + j] = _mm512_shuffle_i32x4(c, e, 0xdd); /* lane 3: column 12 + j */
    }
    for (int i = 0; i < 16; i++)
        r[i] = t[i];
}

#endif
