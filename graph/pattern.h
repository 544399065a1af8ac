/*
 * graph/pattern: the fusion patterns, described once.
 *
 * A fusion pattern is a chain of ONNX ops that one conversion pass replaces
 * by one op. Two modules need the same description and may not include
 * each other: the passes (atc_bridge/passes/), which fuse instances in a
 * graph, and the rule engine (rules/patterns.c), which finds the instances
 * a run still executed op by op in its trace's kernel table and names the
 * pass that would fuse them. Both include graph/, so the description lives
 * here:
 *
 *  - the pattern table (cp_pattern_get): each kind of pattern, the pass
 *    that fuses it (by its fusion-switch name; the pass tables use the
 *    CP_PASS_* names below), the op chain it consists of, and the hint a
 *    finding gives. docs/features.md's pattern table is this table, and a
 *    test holds the two together;
 *  - the node view (struct cp_pattern_view): a graph as a matcher sees it,
 *    nodes with an op and inputs, tensors with readers, and the one
 *    constraint every pattern puts on its intermediates: read by the
 *    pattern only (cp_pattern_view.private_to). A cp_graph provides it in
 *    the passes (input slots of live nodes; graph outputs are never
 *    private), a kernel table in the rules (kernels reading a tensor; a
 *    trace knows no graph outputs);
 *  - the matchers both sides run on their view: the activation a fused op
 *    absorbs (one activation op, or SiLU as x * Sigmoid(x)).
 *
 * A matcher decides structure only: which ops, linked how, with private
 * intermediates. What only a graph knows (constant values, dtypes, shapes,
 * attributes) a pass checks on the nodes a match returns; the rule engine
 * reports the structure, and whether the pass that would fuse it ran (it
 * then left the instance for one of those reasons).
 */
#ifndef CP_GRAPH_PATTERN_H
#define CP_GRAPH_PATTERN_H

#include "graph/graph.h"
#include "graph/op_eval.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the passes that fuse patterns (their fusion-switch names) -------------------- */

#define CP_PASS_FLASH_ATTENTION     "FlashAttentionFusionPass"
#define CP_PASS_LAYERNORM           "LayerNormFusionPass"
#define CP_PASS_GROUPNORM           "GroupNormFusionPass"
#define CP_PASS_GELU                "GeluFusionPass"
#define CP_PASS_CONV_BIAS_ACT       "ConvBiasActivationFusionPass"
#define CP_PASS_MATMUL_BIAS_ACT     "MatMulBiasActivationFusionPass"
#define CP_PASS_CONV_BN             "ConvBatchNormFusionPass"
#define CP_PASS_LAYOUT_TRANSFORM    "LayoutTransformPass"
#define CP_PASS_TRANSPOSE_ROUNDTRIP "TransposeRoundTripEliminationPass"

/* ---- the pattern table ---------------------------------------------------------------- */

/* The patterns, in docs/features.md's order, which is the order the rule
 * engine looks for them in (a kernel belongs to the first pattern that
 * takes it; the Conv and MatMul epilogues are one search). */
enum cp_pattern_id {
    CP_PATTERN_ATTENTION = 0,
    CP_PATTERN_LAYERNORM,
    CP_PATTERN_GROUPNORM,
    CP_PATTERN_GELU,      /* erf form */
    CP_PATTERN_GELU_TANH, /* tanh form: no pass fuses it */
    CP_PATTERN_CONV_ACT,
    CP_PATTERN_CONV_ADD,
    CP_PATTERN_CONV_BN,
    CP_PATTERN_MATMUL_ACT,
    CP_PATTERN_MATMUL_ADD,
    CP_PATTERN_ROUNDTRIP_TRANSDATA,
    CP_PATTERN_ROUNDTRIP_TRANSPOSE,
    CP_PATTERN_COUNT
};

struct cp_pattern_def {
    /* The kind a finding reports and the unfused_<kind>_* features count;
     * two patterns may share a kind (the GELU forms, the round trips). */
    const char *kind;
    /* The pass that fuses it, "" when none does. */
    const char *fix_pass;
    /* The ops, in chain order ([optional], a/b alternatives). */
    const char *chain;
    /* One line for a finding: what fusing it gives, or what to try. */
    const char *fix_hint;
};

/* The pattern `id` (static storage); NULL when id is out of range. */
const struct cp_pattern_def *cp_pattern_get(enum cp_pattern_id id);

/* ---- the node view ---------------------------------------------------------------------- */

/*
 * A graph as a matcher reads it. Nodes and tensors are the provider's
 * int32 indices (-1: none); every function takes the provider's `ctx`.
 */
struct cp_pattern_view {
    const void *ctx;
    /* The op of node n (CP_OP_UNKNOWN for an op outside the op table). */
    enum cp_op (*op)(const void *ctx, int32_t n);
    size_t (*n_inputs)(const void *ctx, int32_t n);
    /* The tensor input i of n reads; -1 when absent. */
    int32_t (*input)(const void *ctx, int32_t n, size_t i);
    /* The tensor output i of n writes; -1 when absent. */
    int32_t (*output)(const void *ctx, int32_t n, size_t i);
    /* The distinct nodes reading t: up to max of them into out. Returns how
     * many there are (may exceed max). */
    size_t (*readers)(const void *ctx, int32_t t, int32_t *out, size_t max);
    /* Whether t is read `reads` times and otherwise not used, so a pattern
     * making those reads may swallow its producer. */
    bool (*private_to)(const void *ctx, int32_t t, int reads);
};

/* ---- matchers ----------------------------------------------------------------------------- */

/* Whether op is one a fused op absorbs as its activation on its own:
 * Relu, LeakyRelu, Clip, Sigmoid, Gelu. */
bool cp_pattern_is_activation_op(enum cp_op op);

/* An activation found after a tensor. */
struct cp_pattern_act {
    /* CP_ACT_RELU, LEAKY_RELU, CLIP, SIGMOID, SILU, or CP_ACT_GELU for the
     * Gelu op (whose `approximate` attribute then says which form). */
    enum cp_act_kind kind;
    int32_t nodes[2]; /* the nodes it consists of, the first reading x */
    size_t n_nodes;
    int32_t out; /* its result */
    int reads;   /* the reads of x it makes */
};

/* SiLU on x: x read by exactly a Sigmoid and a Mul (x private to them), the
 * Mul multiplying x by the Sigmoid's result, which the Mul alone reads.
 * OUT: *m. */
bool cp_pattern_match_silu(const struct cp_pattern_view *v, int32_t x, struct cp_pattern_act *m);

/* The activation that reads x, x private to it: one activation op reading
 * x as its input 0 (cp_pattern_is_activation_op), or SiLU. OUT: *m. A
 * decomposed GELU is a pattern of its own, which each side matches. */
bool cp_pattern_match_activation(const struct cp_pattern_view *v, int32_t x,
                                 struct cp_pattern_act *m);

#endif
