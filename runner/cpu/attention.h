/*
 * Private to runner/cpu: what the FusedAttention kernels share.
 *
 * FusedAttention (graph.h) computes softmax(scale * Q Kᵀ + mask) V per
 * batch and head. Its operands come in three memory formats (BHND, BHDN,
 * BNHD); every format keeps either the row (token) or the depth dimension
 * contiguous, so an operand is fully described by four element strides
 * (batch, head, row, depth) over a base pointer. `cp_att_geom_init` reads a
 * node into that description once, and the kernels index through it:
 * ref_attention.c (the reference, plain loops in double) and
 * fast_attention*.c (tiled, online softmax, never holding the N x M
 * scores).
 *
 * Attributes read here besides graph.h's: `scale` defaults to 1/sqrt(D)
 * (as ONNX's Attention op); `impl` (string) "fast" (default: a vectorised
 * exp within 2 ulp) or "exact" (exp evaluated in double, correctly rounded
 * but for rare ties), set from --op_select_implmode.
 */
#ifndef CP_RUNNER_ATTENTION_H
#define CP_RUNNER_ATTENTION_H

#include "runner/cpu/kernel.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Element strides of one operand along batch, head, row and depth. For the
 * mask, row is the query and depth the key (0 where it broadcasts). */
struct cp_att_strides {
    int64_t b, h, row, d;
};

struct cp_att_geom {
    int64_t batch, heads;
    int64_t n;  /* queries */
    int64_t m;  /* keys and values */
    int64_t d;  /* depth of Q and K */
    int64_t dv; /* depth of V and the output */
    struct cp_att_strides q, k, v, out, mask;
    bool has_mask;
    float scale;
    bool bf16;  /* compute_precision "bf16": Q, K, V rounded to bf16 */
    bool exact; /* impl "exact" */
};

/* Read node n (FusedAttention with concrete shapes) into *geo. False when
 * the node is malformed or not f32: unknown format, precision or impl,
 * shapes that disagree, a mask that does not broadcast to [B, H, N, M]. */
bool cp_att_geom_init(const struct cp_graph *g, const struct cp_node *n, struct cp_att_geom *geo);

/* f32 -> bf16 -> f32, rounding to nearest even as vcvtneps2bf16 does (NaN
 * stays NaN); branch-free, so loops calling it vectorise. */
static inline float cp_att_round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    bool nan = (u & 0x7fffffffu) > 0x7f800000u;
    u = nan ? (u | 0x00400000u) : u + 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

extern const struct cp_kernel cp_ref_fused_attention;
extern const struct cp_kernel cp_fast_attention_avx512, cp_fast_attention;

#endif
