/*
 * Private to the fusion pass family (fusion*.c): pattern-matching helpers
 * and the passes' run functions, listed in fusion.c's table.
 *
 * A pass run keeps a `struct cp_fuse`: the graph plus, for every tensor,
 * how many live node inputs read it. A pattern may swallow an intermediate
 * tensor only when every reader of it is inside the pattern and it is not a
 * graph output (cp_fuse_private); otherwise removing its producer would
 * leave someone without data. After a rewrite the counts are recomputed
 * (cp_fuse_recount), which is cheap for the graphs a conversion sees.
 *
 * Constants are initializers (the importer turns Constant nodes into
 * initializers; constant folding leaves initializers too).
 *
 * The activation and residual matchers are shared by the Conv, MatMul and
 * GroupNorm passes: they read the chain after a tensor and say which nodes
 * it consists of, so one rewrite removes them all. The structure of an
 * activation (which ops, SiLU's shape) is graph/pattern.h's, which the rule
 * engine matches on traces too; these add what only a graph knows (Clip's
 * constant bounds, attributes).
 */
#ifndef CP_ATC_FUSION_INTERNAL_H
#define CP_ATC_FUSION_INTERNAL_H

#include "atc_bridge/passes/pass.h"
#include "graph/pattern.h"

#include <stdbool.h>
#include <stdint.h>

#define CP_FUSE_MAX_NODES 16

struct cp_fuse {
    struct cp_graph *g;
    struct cp_diag *d;
    int32_t *uses;   /* per tensor: live node inputs that read it */
    bool *is_output; /* per tensor: a graph output */
    size_t n_tensors;
    /* The graph as graph/pattern.h's matchers see it: live nodes, reads
     * counted per input slot, graph outputs never private. */
    struct cp_pattern_view view;
};

/* Start a pass run on ctx->g. OUT: f. CP_ERR_NOMEM into ctx->d. */
enum cp_status cp_fuse_init(struct cp_fuse *f, struct cp_pass_ctx *ctx);
void cp_fuse_release(struct cp_fuse *f);
/* Recount uses after the graph changed (new tensors included). */
enum cp_status cp_fuse_recount(struct cp_fuse *f);

/* Whether tensor t is read by exactly `n` live inputs and is not a graph
 * output: the pattern that reads it `n` times may remove its producer. */
bool cp_fuse_private(const struct cp_fuse *f, int32_t t, int32_t n);

/* The live node producing t, or NULL. */
struct cp_node *cp_fuse_producer(const struct cp_fuse *f, int32_t t);
/* The live consumers of t: up to `max` node indices into out. Returns how
 * many there are (may exceed max). */
size_t cp_fuse_consumers(const struct cp_fuse *f, int32_t t, int32_t *out, size_t max);
/* The single live consumer of t with op `op` when t has exactly one reader;
 * else -1. */
int32_t cp_fuse_only_consumer(const struct cp_fuse *f, int32_t t, enum cp_op op);

/* For a binary node that reads t as one operand: the index of the other
 * input (0 or 1), or -1 when t is not an operand or it reads t twice. */
int cp_fuse_other(const struct cp_node *n, int32_t t);

/* Constant data of an f32 initializer. OUT: *n elements copied
 * into out (at most max). False when t is not a constant float tensor that
 * fits. */
bool cp_fuse_const_floats(const struct cp_fuse *f, int32_t t, float *out, size_t max, size_t *n);
/* A constant with one element (any rank). */
bool cp_fuse_const_scalar(const struct cp_fuse *f, int32_t t, float *v);
/* The constant equals v within a relative tolerance of 1e-5. */
bool cp_fuse_const_is(const struct cp_fuse *f, int32_t t, float v);
/* Constant ints (i64/i32 initializer or inferred value). */
bool cp_fuse_const_ints(const struct cp_fuse *f, int32_t t, int64_t *out, size_t max, size_t *n);

/* A new f32 initializer holding `n` floats copied from v, with the given
 * shape, named after `base`. OUT: *t. */
enum cp_status cp_fuse_new_weight(struct cp_fuse *f, const char *base, const float *v, int rank,
                                  const int64_t *dims, int32_t *t);

/* Replace the nodes `dead[0..n_dead)` with one node `op_type` of `domain`
 * (CP_DOMAIN or "") that writes `out` (a tensor one of them produced). The
 * new node's origins are the union of theirs; its name is the last dead
 * node's name with `suffix`. OUT: *idx. */
enum cp_status cp_fuse_replace(struct cp_fuse *f, const int32_t *dead, size_t n_dead,
                               const char *op_type, const char *domain, const int32_t *ins,
                               size_t n_ins, int32_t out, const char *suffix, int32_t *idx);

/* Copy every attribute of node `from` onto node `to` (Conv's geometry onto
 * a FusedConv). */
enum cp_status cp_fuse_copy_attrs(struct cp_fuse *f, int32_t to, const struct cp_node *from);

/* Mark a node dead when none of its outputs is read any more (e.g. the
 * Shape feeding a swallowed Reshape). */
void cp_fuse_drop_if_unused(struct cp_fuse *f, int32_t node);

/* ---- shared matchers ---------------------------------------------------- */

/* A fused activation found after a tensor. */
struct cp_fuse_act {
    enum cp_act_kind kind; /* never CP_ACT_NONE or CP_ACT_BAD */
    float alpha, beta;     /* LeakyRelu's slope; Clip's bounds (graph/op_eval.h) */
    int32_t out;           /* the activation's result */
    int32_t uses;          /* reads of the input tensor the pattern accounts for */
    size_t n_nodes;        /* the nodes it consists of */
    int32_t nodes[6];
};

/* The activation that reads tensor x, when every reader of x and of the
 * activation's intermediates belongs to it. */
bool cp_fuse_match_activation(const struct cp_fuse *f, int32_t x, struct cp_fuse_act *a);

/* Decomposed exact GELU on x: Div(x, sqrt2) (or Mul by 1/sqrt2) -> Erf ->
 * Add(1) -> then 0.5 and x multiplied in any of PyTorch's orders. Only the
 * pattern's own intermediates must be private (x may have other readers:
 * a->uses says how many reads of x it makes). */
bool cp_fuse_match_gelu(const struct cp_fuse *f, int32_t x, struct cp_fuse_act *a);

/* A residual Add reading x (private, one reader) whose other operand R has
 * exactly x's static shape. OUT: *add (node index), *r. */
bool cp_fuse_match_residual(const struct cp_fuse *f, int32_t x, int32_t *add, int32_t *r);

/* What follows a fused op's result: an activation, a residual Add, or both
 * in either order (residual_first: the Add comes before the activation). */
struct cp_fuse_tail {
    bool has_act;
    struct cp_fuse_act act;
    int32_t residual; /* the residual tensor, or -1 */
    bool residual_first;
    int32_t out; /* the tail's result (t itself when nothing follows) */
    size_t n_nodes;
    int32_t nodes[8];
};

/* Match the tail after tensor t (activation and/or residual Add). */
void cp_fuse_match_tail(const struct cp_fuse *f, int32_t t, struct cp_fuse_tail *tl);

/* Set the activation (and residual_first) attributes on a fused node. */
enum cp_status cp_fuse_set_tail(struct cp_fuse *f, int32_t node, const struct cp_fuse_tail *tl);

/* Set the activation attributes on a fused node. */
enum cp_status cp_fuse_set_activation(struct cp_fuse *f, int32_t node, const struct cp_fuse_act *a);

/* ---- the passes ---------------------------------------------------------- */

enum cp_status cp_fusion_conv_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_matmul_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_layernorm_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_groupnorm_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_gelu_run(struct cp_pass_ctx *ctx, bool *changed);

#endif
