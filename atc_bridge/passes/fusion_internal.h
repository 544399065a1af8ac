/*
 * Private to the fusion pass family (fusion*.c): the rewriting helpers and
 * the passes' run functions, listed in fusion.c's table.
 *
 * What each pass fuses is decided by graph/pattern.h's matchers, which the
 * rule engine runs on traces too, so a finding names a pass only for what
 * that pass would fuse. A pass run keeps a `struct cp_fuse`: the graph and
 * its view for the matchers (struct cp_pattern_graph: live nodes, reads
 * counted per input slot, graph outputs never private). A pass asks a
 * matcher, then rewrites the nodes it returned with the helpers below;
 * every rewrite updates the view (cp_fuse_recount), which is cheap for the
 * graphs a conversion sees.
 *
 * Constants are initializers (the importer turns Constant nodes into
 * initializers; constant folding leaves initializers too).
 */
#ifndef CP_ATC_FUSION_INTERNAL_H
#define CP_ATC_FUSION_INTERNAL_H

#include "atc_bridge/passes/pass.h"
#include "graph/pattern.h"

#include <stdbool.h>
#include <stdint.h>

struct cp_fuse {
    struct cp_graph *g;
    struct cp_diag *d;
    /* The running pass and the config's switches: instances switched off
     * ("Pass@NODE:off") are declined by cp_fuse_replace. */
    const char *pass;
    const char *switches;
    /* The graph as graph/pattern.h's matchers see it (pg.view). */
    struct cp_pattern_graph pg;
};

/* Start a pass run on ctx->g (and its pass name and switches). OUT: f (release with
 * cp_fuse_release, also after a failure). CP_ERR_NOMEM into ctx->d. */
enum cp_status cp_fuse_init(struct cp_fuse *f, struct cp_pass_ctx *ctx);
void cp_fuse_release(struct cp_fuse *f);
/* Update the view after the graph changed (new tensors included).
 * CP_ERR_NOMEM into f->d. */
enum cp_status cp_fuse_recount(struct cp_fuse *f);

/* Constant data of an f32 initializer. OUT: *n elements copied into out (at
 * most max). False when t is not a constant float tensor that fits (the
 * test the matchers made: graph/pattern_internal.h). */
bool cp_fuse_const_floats(const struct cp_fuse *f, int32_t t, float *out, size_t max, size_t *n);
/* A constant with one element (any rank). */
bool cp_fuse_const_scalar(const struct cp_fuse *f, int32_t t, float *v);

/* A new f32 initializer holding `n` floats copied from v, with the given
 * shape, named after `base`. OUT: *t. */
enum cp_status cp_fuse_new_weight(struct cp_fuse *f, const char *base, const float *v, int rank,
                                  const int64_t *dims, int32_t *t);

/* Replace the nodes `dead[0..n_dead)` with one node `op_type` of `domain`
 * (CP_DOMAIN or "") that writes `out` (a tensor one of them produced). The
 * new node's origins are the union of theirs, in the order of `dead`; its
 * name is the last dead node's name with `suffix`. OUT: *idx; -1 when the
 * running pass is switched off for one of the nodes ("Pass@NODE:off"):
 * then nothing changed and the caller leaves the pattern as it is. */
enum cp_status cp_fuse_replace(struct cp_fuse *f, const int32_t *dead, size_t n_dead,
                               const char *op_type, const char *domain, const int32_t *ins,
                               size_t n_ins, int32_t out, const char *suffix, int32_t *idx);

/* Copy every attribute of node `from` onto node `to` (Conv's geometry onto
 * a FusedConv). */
enum cp_status cp_fuse_copy_attrs(struct cp_fuse *f, int32_t to, const struct cp_node *from);
/* Copy only the int8 mark of `from` (compute_precision "int8" and the
 * int8_* scales of Int8QuantizationPass), if it has one. */
enum cp_status cp_fuse_copy_int8(struct cp_fuse *f, int32_t to, const struct cp_node *from);

/* Mark a node dead when none of its outputs is read any more (e.g. the
 * Shape feeding a swallowed Reshape). */
void cp_fuse_drop_if_unused(struct cp_fuse *f, int32_t node);

/* Set the activation attributes (activation, activation_alpha,
 * activation_beta) a matcher found on a fused node. */
enum cp_status cp_fuse_set_activation(struct cp_fuse *f, int32_t node,
                                      const struct cp_pattern_act *a);

/* Set the activation (and residual_first) attributes of a matched tail. */
enum cp_status cp_fuse_set_tail(struct cp_fuse *f, int32_t node, const struct cp_pattern_tail *tl);

/* ---- the passes ---------------------------------------------------------- */

enum cp_status cp_fusion_conv_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_matmul_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_layernorm_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_groupnorm_run(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_fusion_gelu_run(struct cp_pass_ctx *ctx, bool *changed);

/* ---- [quant] ---- */
enum cp_status cp_quant_qdq_fold_run(struct cp_pass_ctx *ctx, bool *changed); /* quant_qdq.c */
/* ---- end [quant] ---- */

#endif
