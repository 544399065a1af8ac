/* Private to the cleanup pass family: the run functions behind the table
 * in cleanup.c, and the constant evaluator constant folding uses. */
#ifndef CP_ATC_CLEANUP_INTERNAL_H
#define CP_ATC_CLEANUP_INTERNAL_H

#include "atc_bridge/passes/pass.h"

enum cp_status cp_cleanup_constant_folding(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_cleanup_identity(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_cleanup_dead_nodes(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_cleanup_conv_bn(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_cleanup_conv_taps(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_cleanup_pad_fold(struct cp_pass_ctx *ctx, bool *changed);
enum cp_status cp_cleanup_transpose(struct cp_pass_ctx *ctx, bool *changed);
/* Call fn on every live node of op `op`, nodes appended on the way
 * included; OR each call's *done into *changed. Stops at an error. */
enum cp_status cp_cleanup_each(struct cp_pass_ctx *ctx, enum cp_op op,
                               enum cp_status (*fn)(struct cp_pass_ctx *ctx, int32_t i, bool *done),
                               bool *changed);
/* Channel shuffles and channel Slices of them as channel Gathers
 * (cleanup_shuffle.c); part of TransposeOptimizationPass. */
enum cp_status cp_cleanup_channel_shuffle(struct cp_pass_ctx *ctx, bool *changed);

/* Evaluate node `n` on constant inputs (cleanup_eval.c). Every present
 * input is an initializer with data; outputs have static shapes and known
 * dtypes. OUT: data[i] (malloc'ed, caller frees) and nbytes[i] for each
 * output. Returns false, with nothing allocated, when the op, a dtype or an
 * attribute is one the evaluator does not handle: the node then stays. */
bool cp_fold_eval(const struct cp_graph *g, const struct cp_node *n, void **data, size_t *nbytes);

/* ---- [elementwise] ---- */
/* The elementwise family's ops on constant inputs (cleanup_eval_elementwise.c):
 * in[i] / in_data[i] for node n's inputs, out / out_data its one output.
 * False, with nothing written, for what it does not handle. */
bool cp_fold_eval_elementwise(const struct cp_node *n, const struct cp_tensor *const *in,
                              const void *const *in_data, const struct cp_tensor *out,
                              void *out_data);
/* ---- [control] ---- */

/* Replace every If whose condition is known by the nodes of the branch it
 * takes (control.c); part of ConstantFoldingPass. */
enum cp_status cp_control_fold_if(struct cp_pass_ctx *ctx, bool *changed);
/* Before subgraph `sub` of control-flow node n (in g) is cleaned: an
 * outer-scope reference bound to an initializer of g, read in sub only by
 * data-movement ops whose other inputs are initializers (Silero's LSTM
 * weights, sliced into gates), is read from a copy made an initializer of
 * sub, so ConstantFoldingPass can fold those ops. OUT: *changed. */
enum cp_status cp_control_borrow_constants(struct cp_graph *g, const struct cp_node *n,
                                           struct cp_graph *sub, bool *changed, struct cp_diag *d);

#endif
