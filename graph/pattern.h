/*
 * graph/pattern: the fusion patterns, described once.
 *
 * A fusion pattern is a chain of ONNX ops that one conversion pass replaces
 * by one op (or, for a layout round trip, removes). Two modules need the
 * same description and may not include each other: the passes
 * (atc_bridge/passes/), which fuse instances in a graph, and the rule engine
 * (rules/patterns.c), which finds the instances a run still executed op by
 * op in its trace's kernel table and names the pass that would fuse them.
 * A finding that names a pass which would not fuse what it saw is advice
 * that cannot take effect, so both sides run the same code, here:
 *
 *  - the pattern table (cp_pattern_get): each kind of pattern, the pass
 *    that fuses it (by its fusion-switch name; the pass tables use the
 *    CP_PASS_* names below), the op chain it consists of, and the hint a
 *    finding gives. docs/features.md's pattern table is this table, and a
 *    test holds the two together;
 *  - the node view (struct cp_pattern_view): a graph as a matcher reads it,
 *    nodes and tensors as graph.h describes them, readers of a tensor, and
 *    which tensors are graph outputs. A cp_graph provides it in the passes
 *    (struct cp_pattern_graph, below), a trace's kernel table in the rule
 *    engine;
 *  - one matcher per pattern, which decides everything the pass decides
 *    about an instance (ops, links, private intermediates, shapes, dtypes,
 *    attributes, constants) and returns the nodes the pass replaces, in the
 *    order it replaces them, with what its rewrite needs. The passes then
 *    only rewrite; the rule engine only reports.
 *
 * What a view does not know. A trace has no constant values, no attributes
 * and no graph outputs, and its view ops (Reshape and friends) run no
 * kernel. Its provider (rules/patterns_view.c) says how it fills each gap,
 * and docs/features.md lists the assumptions; the matchers see two things:
 *
 *  - cp_pattern_view.knows_values false: a constant (an initializer) has no
 *    data; every check of a constant's value then holds (the value is
 *    assumed to be the one the pattern needs), its dtype and shape are
 *    still checked;
 *  - cp_pattern_view.opset CP_PATTERN_OPSET_UNKNOWN: a recent opset is
 *    assumed (13 or later: Clip takes its bounds as inputs, Softmax works
 *    on one axis).
 *
 * Attributes a provider does not know are absent, so they take their ONNX
 * defaults; a provider that can work one out (a Transpose's perm from its
 * shapes) sets it.
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

/* cp_pattern_view.opset when the provider does not know the model's opset. */
#define CP_PATTERN_OPSET_UNKNOWN (-1)

/* The most nodes one instance of a pattern replaces. */
#define CP_PATTERN_MAX_NODES 16

/*
 * A graph as a matcher reads it. Nodes and tensors are the provider's
 * int32 indices (-1: none); every function takes the provider's `ctx`.
 * Nodes and tensors are graph.h's structs: a node's inputs and outputs are
 * tensor indices of this view, its attributes those the provider knows; a
 * tensor's kind is CP_TENSOR_INITIALIZER for a constant (whose data is set
 * when knows_values), its producer a node index of this view.
 */
struct cp_pattern_view {
    const void *ctx;
    /* How many node and tensor indices there are. */
    size_t (*n_nodes)(const void *ctx);
    size_t (*n_tensors)(const void *ctx);
    /* Node n, NULL when out of range or dead (removed). */
    const struct cp_node *(*node)(const void *ctx, int32_t n);
    /* Tensor t, NULL when out of range. */
    const struct cp_tensor *(*tensor)(const void *ctx, int32_t t);
    /* The live node writing t; -1 when none (an input or a constant). */
    int32_t (*producer)(const void *ctx, int32_t t);
    /* The distinct live nodes reading t, in index order: up to max of them
     * into out. Returns how many there are (may exceed max). */
    size_t (*readers)(const void *ctx, int32_t t, int32_t *out, size_t max);
    /* How many input slots of live nodes read t (Mul(d, d) reads d twice). */
    size_t (*n_reads)(const void *ctx, int32_t t);
    /* Whether t is a graph output (never private to a pattern). */
    bool (*is_output)(const void *ctx, int32_t t);
    /* Whether Transpose node n (rank r) may have permutation perm. NULL:
     * its perm attribute says (a graph). A provider that only knows shapes
     * (a trace: a [1,32,32,32] tensor fits six perms) says whether they
     * allow it; the round-trip matcher then tries every perm that fits. */
    bool (*perm_fits)(const void *ctx, int32_t n, const int *perm, int r);
    /* The model's opset, CP_PATTERN_OPSET_UNKNOWN when not known. */
    int64_t opset;
    /* Whether constants carry their data (see the top of this file). */
    bool knows_values;
};

/* Whether t is read `reads` times (input slots) and is not a graph output,
 * so a pattern making those reads may swallow its producer. */
bool cp_pattern_private(const struct cp_pattern_view *v, int32_t t, size_t reads);

/* ---- a cp_graph as a view (the passes' side) -------------------------------------------- */

/*
 * The view of a cp_graph: live nodes, input slots counted per tensor, the
 * graph's outputs. A pass initialises it once and updates it after every
 * rewrite (new tensors and nodes included), so the counts describe the
 * graph the next match reads. The graph's data is the view's: constants
 * carry their values.
 */
struct cp_pattern_graph {
    const struct cp_graph *g;
    size_t *reads;   /* per tensor: live input slots reading it */
    bool *is_output; /* per tensor: a graph output */
    size_t n_tensors;
    struct cp_pattern_view view;
};

/* Start a view of g. OUT: *pg (release with cp_pattern_graph_release, also
 * after a failure). CP_ERR_NOMEM only. */
enum cp_status cp_pattern_graph_init(struct cp_pattern_graph *pg, const struct cp_graph *g);
/* Recount after the graph changed. CP_ERR_NOMEM only (the old counts then
 * stay). */
enum cp_status cp_pattern_graph_update(struct cp_pattern_graph *pg);
void cp_pattern_graph_release(struct cp_pattern_graph *pg);

/* ---- activations, GELU, residual: what follows a fused op -------------------------------- */

/* Whether op is one a fused op absorbs as its activation on its own:
 * Relu, LeakyRelu, Clip, Sigmoid, Gelu. */
bool cp_pattern_is_activation_op(enum cp_op op);

/* An activation found after a tensor x. */
struct cp_pattern_act {
    /* CP_ACT_RELU, LEAKY_RELU, CLIP, SIGMOID, SILU, GELU or GELU_TANH (a
     * Gelu op with approximate "tanh"). CP_ACT_GELU with more than one
     * node is a decomposed GELU (cp_pattern_act_is_decomposed_gelu). */
    enum cp_act_kind kind;
    /* LeakyRelu's slope; Clip's bounds (graph/op_eval.h). NAN when the view
     * has no values. */
    float alpha, beta;
    int32_t nodes[6]; /* the nodes it consists of, in the order a pass replaces them */
    size_t n_nodes;
    int32_t out; /* its result */
    int reads;   /* the reads of x it makes */
};

/* Whether the activation is a decomposed GELU: a pattern of its own
 * (GeluFusionPass's), which a Conv or MatMul epilogue may also absorb. */
bool cp_pattern_act_is_decomposed_gelu(const struct cp_pattern_act *a);

/* SiLU on x: x read by exactly a Sigmoid and a Mul (x private to them), the
 * Mul multiplying x by the Sigmoid's result, which the Mul alone reads;
 * both single-output. The same with a HardSigmoid of alpha 1/6 and beta 1/2
 * in the Sigmoid's place is HardSwish (m->kind CP_ACT_HARD_SWISH), as
 * PyTorch writes it for opsets below 14. OUT: *m. */
bool cp_pattern_match_silu(const struct cp_pattern_view *v, int32_t x, struct cp_pattern_act *m);

/* The exact GELU on x as PyTorch exports it: Div(x, sqrt2) or Mul by
 * 1/sqrt2 in either operand order -> Erf -> Add(1) -> then 0.5 and x
 * multiplied in: Mul(x) then Mul(0.5), Mul(0.5) then Mul(x), or
 * Mul(Mul(x, 0.5)) with x * 0.5 read by the pattern only. Constants are
 * scalars (within 1e-4 relative). Tried from each reader of x in turn; only
 * the pattern's own intermediates must be private (x may have other
 * readers: m->reads says how many reads of x it makes). OUT: *m (kind
 * CP_ACT_GELU, five nodes). */
bool cp_pattern_match_gelu(const struct cp_pattern_view *v, int32_t x, struct cp_pattern_act *m);

/* The x GeluFusionPass would start from at Erf node `erf`: of the Div or
 * Mul feeding it, the operand that is not a constant scalar. -1 when the
 * Erf is not fed so. */
int32_t cp_pattern_gelu_input(const struct cp_pattern_view *v, int32_t erf);

/* The tanh GELU at Tanh node `tanh`: Pow/Mul chain for x^3 -> Mul(0.044715)
 * -> Add(x) -> Mul(sqrt(2/pi)) -> Tanh -> Add(1) -> the multiplications by
 * 0.5 and x as for the erf form. No pass fuses it; the rule engine reports
 * it so the export can be changed. OUT: nodes (up to CP_PATTERN_MAX_NODES),
 * *n, *x. */
bool cp_pattern_match_gelu_tanh(const struct cp_pattern_view *v, int32_t tanh, int32_t *nodes,
                                size_t *n, int32_t *x);

/* The activation a fused op absorbs after x, x not a graph output: one
 * activation op reading x as its input 0 (with Clip's bounds constant
 * scalars, or attributes before opset 11, and min <= max), SiLU, or, when x
 * has exactly two reads and they are a decomposed GELU's, that GELU.
 * OUT: *m. */
bool cp_pattern_match_activation(const struct cp_pattern_view *v, int32_t x,
                                 struct cp_pattern_act *m);

/* A residual Add reading x (x private to it) whose other operand R (not x
 * itself) and result have exactly x's shape (dimensions known, or the same
 * named symbol), all f32. OUT: *add (the node), *r (R). */
bool cp_pattern_match_residual(const struct cp_pattern_view *v, int32_t x, int32_t *add,
                               int32_t *r);

/* What follows a fused op's result: an activation, a residual Add, or both
 * in either order. */
struct cp_pattern_tail {
    bool has_act;
    struct cp_pattern_act act;
    int32_t residual;    /* the residual tensor, or -1 */
    bool residual_first; /* the Add comes before the activation */
    int32_t out;         /* the tail's result (t itself when nothing follows) */
    size_t n_nodes;
    int32_t nodes[8]; /* in the order a pass replaces them */
};

/* The tail after tensor t: an activation then perhaps a residual Add, else
 * a residual Add then perhaps an activation. OUT: *tl. */
void cp_pattern_match_tail(const struct cp_pattern_view *v, int32_t t, struct cp_pattern_tail *tl);

/* ---- Conv, MatMul and Gemm epilogues ------------------------------------------------------- */

/* The most channels (or columns) a bias constant may have. */
#define CP_PATTERN_MAX_BIAS 65536

/* What ConvBiasActivationFusionPass fuses from a Conv, or
 * MatMulBiasActivationFusionPass from a MatMul, FusedMatMul or Gemm. */
struct cp_pattern_epilogue {
    int32_t op_node;  /* the Conv, MatMul, FusedMatMul or Gemm */
    int32_t bias_add; /* the Add of a constant bias, -1 when none */
    int32_t bias_src; /* the constant it adds, -1 */
    int64_t n;        /* Conv: output channels; MatMul, Gemm: output columns */
    /* Gemm only: C as the bias (bias_c >= 0: a constant row when c_const,
     * else a run-time [N] vector) or as a residual added first (c_residual
     * >= 0, the tail then holds only an activation). */
    int32_t bias_c, c_residual;
    bool c_const;
    struct cp_pattern_tail tail;
    int32_t nodes[CP_PATTERN_MAX_NODES]; /* op_node first, in replacement order */
    size_t n_nodes;
};

/* A Conv (one output, rank >= 3 f32 result) with, when it has no bias of
 * its own, an Add of a constant broadcasting along the channel axis only
 * ([C], [C,1,1], [1,C,1,1], ...) as its sole reader, then the tail. True
 * when there is something to fuse (a bias Add, an activation or a
 * residual). OUT: *m. */
bool cp_pattern_match_conv(const struct cp_pattern_view *v, int32_t conv,
                           struct cp_pattern_epilogue *m);

/* A MatMul whose right-hand side is a constant rank-2 f32 tensor (a Linear
 * layer), or a FusedMatMul with nothing fused yet (no activation, no
 * transA, at most a bias), left-hand side of rank >= 2, f32 result; then,
 * when it has no bias, an Add of a constant along the last axis with the
 * output's columns, then the tail. True when there is something to fuse.
 * OUT: *m. */
bool cp_pattern_match_matmul(const struct cp_pattern_view *v, int32_t mm,
                             struct cp_pattern_epilogue *m);

/* A Gemm (rank-2 f32 result) and what MatMulBiasActivationFusionPass makes
 * of it: C ([N] or [1, N], beta non-zero) as the bias, or C of the output's
 * shape with beta 1 as a residual added before the activation; then the
 * tail. False when C broadcasts otherwise (the Gemm stays). A Gemm with
 * nothing after it is still true (the pass rewrites every Gemm; n_nodes is
 * then 1, which the rule engine does not report). OUT: *m. */
bool cp_pattern_match_gemm(const struct cp_pattern_view *v, int32_t gemm,
                           struct cp_pattern_epilogue *m);

/* The Conv ConvBatchNormFusionPass folds into BatchNormalization node `bn`:
 * an inference BatchNormalization (five inputs, one output, training_mode
 * 0) whose f32 input is made by a Conv (one output) that it alone reads,
 * with a static weight of rank >= 3 and every weight, bias and statistic a
 * constant f32 of the right size. Returns the Conv, or -1. */
int32_t cp_pattern_match_conv_bn(const struct cp_pattern_view *v, int32_t bn);

/* ---- normalisations -------------------------------------------------------------------- */

/* A decomposed LayerNorm as LayerNormFusionPass fuses it. */
struct cp_pattern_layernorm {
    int32_t x;         /* the normalised input */
    int32_t eps;       /* the epsilon constant */
    int32_t gamma_src; /* the scale constant, -1 when there is no Mul */
    int32_t beta_src;  /* the shift constant, -1 when there is no Add */
    int32_t out;       /* the result */
    int64_t h;         /* size of the last axis */
    int32_t nodes[9];  /* ReduceMean, Sub, Pow/Mul, ReduceMean, Add, Sqrt, Div, [Mul], [Add] */
    size_t n_nodes;
};

/* From ReduceMean node `rm` over x: ReduceMean(x) -> Sub(x, mean) -> Pow(d,
 * 2) or Mul(d, d) -> ReduceMean -> Add(eps) -> Sqrt -> Div(d, .) ->
 * [Mul(gamma)] -> [Add(beta)]. Both means over the last axis only with
 * keepdims; x f32 with a last axis of 1..65536; every intermediate private
 * (d to the square and the Div); eps a constant scalar >= 0; gamma and beta
 * constants broadcasting along the last axis. OUT: *m. */
bool cp_pattern_match_layernorm(const struct cp_pattern_view *v, int32_t rm,
                                struct cp_pattern_layernorm *m);

/* PyTorch's GroupNorm as GroupNormFusionPass fuses it. */
struct cp_pattern_groupnorm {
    int32_t x;         /* the input [N, C, ...] */
    int32_t shape_src; /* the second Reshape's shape input (-1): its Shape(x) may go too */
    int32_t gamma_src, beta_src; /* per-channel constants, -1 when absent */
    int32_t out;
    int64_t groups, channels;
    bool has_act;
    struct cp_pattern_act act;
    int32_t nodes[CP_PATTERN_MAX_NODES]; /* Reshape, InstanceNorm, Reshape, [Mul], [Add], [act] */
    size_t n_nodes;
};

/* From InstanceNormalization node `in`: Reshape(x [N, C, spatial...]) to
 * [N, G, C/G * spatial] (private) -> InstanceNormalization with scale 1 and
 * bias 0 of G values -> Reshape back to x's shape -> [Mul(gamma)] ->
 * [Add(beta)] (constants broadcasting along the channel axis) -> [an
 * activation, cp_pattern_match_activation]. x f32, C a multiple of G, up to
 * 65536 channels, N known or the same symbol on both sides. OUT: *m. */
bool cp_pattern_match_groupnorm(const struct cp_pattern_view *v, int32_t in,
                                struct cp_pattern_groupnorm *m);

/* ---- attention -------------------------------------------------------------------------- */

/* Scaled dot-product attention as FlashAttentionFusionPass fuses it. */
struct cp_pattern_attention {
    int32_t nodes[CP_PATTERN_MAX_NODES]; /* every node the fused one replaces */
    size_t n_nodes;
    int32_t q, k, v, mask, out;                  /* tensors of the new node (mask -1) */
    const char *q_fmt, *k_fmt, *v_fmt, *out_fmt; /* "BHND", "BHDN", "BNHD" (static) */
    int64_t heads;
    float scale;     /* product of the scales absorbed; NAN without values */
    int32_t qk_node; /* the MatMul(Q, Kᵀ), whose name the fused node's derives from */
};

/* The attention ending in Softmax node `softmax`:
 *
 *   MatMul(Q, Kᵀ) -> [Mul or Div by a scalar] -> [Add(mask)] -> Softmax(last
 *                 axis) -> MatMul(., V)
 *
 * MatMuls plain (MatMul, or a FusedMatMul with nothing fused, transB
 * reading K or V transposed), every intermediate private, 4-D static f32
 * operands with matching batch and head dimensions, the mask broadcasting
 * to the scores. Walking back from Q, K and V through private Transposes,
 * one head-splitting Reshape and (Q, K) scalar scales, it takes the
 * furthest source in one of FusedAttention's formats; forward, a private
 * Transpose(0,2,1,3) then Reshape to [B, N, H*Dv] is the head merge.
 * OUT: *m. */
bool cp_pattern_match_attention(const struct cp_pattern_view *v, int32_t softmax,
                                struct cp_pattern_attention *m);

/* ---- Transpose round trips ---------------------------------------------------------------- */

/* The most entries, ops or exits a round trip may have. */
#define CP_PATTERN_MAX_REGION 256

/*
 * The region TransposeRoundTripEliminationPass removes: the tensors that
 * flow from Transposes with permutation `perm` (entries) through ops that
 * can be rewritten for the unpermuted tensors (elementwise ops, reductions
 * with keepdims, Softmax from opset 13, LayerNormalization) to Transposes
 * with the inverse permutation (exits). The pass drops entries and exits;
 * the ops stay, rewritten.
 */
struct cp_pattern_roundtrip {
    int rank;
    int perm[CP_MAX_RANK], inv[CP_MAX_RANK];
    int32_t entries[CP_PATTERN_MAX_REGION];
    size_t n_entries;
    int32_t nodes[CP_PATTERN_MAX_REGION]; /* the region's ops, in discovery order */
    size_t n_nodes;
    int32_t exits[CP_PATTERN_MAX_REGION];
    size_t n_exits;
    bool *space; /* per tensor: in permuted space */
    /* inputs of region ops that must turn out permuted once the region is
     * complete (produced by a region op not reached yet) */
    int32_t pending[CP_PATTERN_MAX_REGION];
    size_t n_pending;
    uint8_t *role; /* per node: 0 none, 1 entry, 2 op, 3 exit */
    int32_t *work; /* tensor worklist */
    size_t n_work;
};

/* The region grown from Transpose node `seed` (rank >= 2, not the
 * identity), when the pass can remove it: every way out of permuted space
 * is an exit, no graph output inside, every side input fits (constants,
 * scalars, the axes of a reduction), LayerNorms over axes that stop being
 * trailing f32 (the pass writes them out). OUT: *R, whose arrays are
 * allocated for the view's sizes (release with cp_pattern_roundtrip_release
 * whatever the result). CP_ERR_NOMEM into *st. */
bool cp_pattern_match_roundtrip(const struct cp_pattern_view *v, int32_t seed,
                                struct cp_pattern_roundtrip *R, enum cp_status *st);
void cp_pattern_roundtrip_release(struct cp_pattern_roundtrip *R);

/* Normalised axes of reduction node n on a rank-r tensor (the attribute, or
 * a constant i64 input 1); *na = 0 when it reduces over everything. False
 * when they cannot be read. */
bool cp_pattern_reduce_axes(const struct cp_pattern_view *v, const struct cp_node *n, int r,
                            int64_t *axes, size_t *na);
/* Whether op is a reduction a round trip may hold (ReduceMean, ReduceSum,
 * ReduceMax), and whether its constant operands are permuted with the data
 * (the broadcasting ops and LayerNormalization). */
bool cp_pattern_roundtrip_is_reduce(enum cp_op op);
bool cp_pattern_roundtrip_permutes_constants(enum cp_op op);
/* LayerNormalization node n's first normalised axis on a rank-r tensor. */
int cp_pattern_layernorm_axis(const struct cp_node *n, int r);
/* Whether LayerNorm node n in region R still normalises trailing axes, in
 * order, once unpermuted. OUT: *new_axis. */
bool cp_pattern_roundtrip_ln_trailing(const struct cp_pattern_roundtrip *R, const struct cp_node *n,
                                      int *new_axis);

#endif
