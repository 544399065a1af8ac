/*
 * Private to fast_attention*.c (and their tests): the fast FusedAttention
 * kernel's plan and its two implementations.
 *
 * The work is split into items: `groups` x 32 queries of one (batch, head),
 * numbered item = (b * heads + h) * qblocks + query block. Each thread takes
 * a contiguous range of items and its own slice of the scratch memory
 * (`thread_bytes`), so nothing is allocated at run time. Keys stream in
 * tiles of `kblock`.
 *
 * fast_attention_avx512.c: AVX-512F/BW/VL (+ BF16 for bf16 nodes), used
 * when the CPU has them (cp_att_x512_usable). fast_attention.c: the
 * portable path (plain C, the same tiling, one query row at a time) and
 * the kernel table entries.
 */
#ifndef CP_RUNNER_FAST_ATTENTION_H
#define CP_RUNNER_FAST_ATTENTION_H

#include "runner/cpu/attention.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cp_att_fast_plan {
    struct cp_att_geom geo;
    int64_t groups;  /* 32-query groups per item */
    int64_t kblock;  /* keys per tile */
    int64_t qblocks; /* items per (batch, head) */
    int64_t items;
    int threads;
    size_t thread_bytes; /* scratch per thread, a multiple of 64 */
};

/* The node's data. */
struct cp_att_io {
    const float *q, *k, *v, *mask; /* mask NULL when absent */
    float *y;
};

/* Whether this CPU runs the AVX-512 path (with bf16 dot products when
 * `bf16`). */
bool cp_att_x512_usable(bool bf16);
/* Scratch bytes one thread of the AVX-512 path needs. */
size_t cp_att_x512_scratch(const struct cp_att_geom *geo, int64_t groups, int64_t kblock);
/* Items [item0, item1) with one thread's scratch (64-byte aligned). */
void cp_att_x512_run(const struct cp_att_fast_plan *p, const struct cp_att_io *io, int64_t item0,
                     int64_t item1, void *scratch);
/* The exponential the kernel uses, on n floats (for tests): 2^x for impl
 * "fast" (scores in base-2 units), e^x for "exact". Only call when
 * cp_att_x512_usable(false). */
void cp_att_x512_exp(const float *x, float *y, int64_t n, bool exact);

#endif
