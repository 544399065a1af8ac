/* The cleanup pass family (see pass.h): the table, and the two smallest
 * passes, Identity/Dropout removal and dead-node elimination. Constant
 * folding is in cleanup_fold.c (with its evaluator in cleanup_eval.c),
 * Conv+BatchNorm folding in cleanup_convbn.c, dead Conv taps in
 * cleanup_convtap.c, Pad folding in cleanup_padfold.c, transposes in cleanup_transpose.c,
 * channel shuffles in cleanup_shuffle.c. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"
#include "graph/op_eval.h"
#include "graph/pattern.h"

#include <stddef.h>
#include <stdlib.h>

const struct cp_pass cp_cleanup_passes[] = {
    {"ConstantFoldingPass", "GraphFusion",
     "fold nodes whose inputs are all constant (shape arithmetic chains, constant weights "
     "transforms) into initializers",
     cp_cleanup_constant_folding},
    {"IdentityEliminationPass", "GraphFusion",
     "remove Identity and inference-mode Dropout nodes, rewiring their consumers",
     cp_cleanup_identity},
    {"TransposeOptimizationPass", "GraphFusion",
     "cancel and merge consecutive Transposes; fold a last-two-dims Transpose into MatMul "
     "(FusedMatMul transA/transB); a channel shuffle and channel Slices of it become channel "
     "Gathers",
     cp_cleanup_transpose},
    {CP_PASS_CONV_BN, "GraphFusion",
     "fold an inference BatchNormalization into the preceding Conv's weights and bias",
     cp_cleanup_conv_bn},
    {"ConvDeadTapEliminationPass", "GraphFusion",
     "crop Conv kernel taps that only ever read padding (dilated convs on small maps) to the "
     "taps that read the input",
     cp_cleanup_conv_taps},
    {"PadFoldingPass", "GraphFusion",
     "fold a constant-zero spatial Pad into the padding of the Conv or AveragePool reading it",
     cp_cleanup_pad_fold},
    {"DeadNodeEliminationPass", "GraphFusion",
     "remove nodes whose outputs reach no graph output (also run once after all passes)",
     cp_cleanup_dead_nodes},
    {NULL, NULL, NULL, NULL},
};

enum cp_status cp_cleanup_each(struct cp_pass_ctx *ctx, enum cp_op op,
                               enum cp_status (*fn)(struct cp_pass_ctx *ctx, int32_t i, bool *done),
                               bool *changed)
{
    /* the array may grow under fn: its bound is read on every step */
    for (size_t i = 0; i < cp_graph_n_nodes(ctx->g); i++) {
        const struct cp_node *n = cp_graph_node(ctx->g, (int32_t)i);
        if (n->dead || n->op != op)
            continue;
        bool done = false;
        enum cp_status st = fn(ctx, (int32_t)i, &done);
        if (st != CP_OK)
            return st;
        *changed |= done;
    }
    return CP_OK;
}

/* ---- IdentityEliminationPass --------------------------------------------------- */

/* Dropout is an identity at inference: when training_mode is absent or a
 * constant false, and the mask output is not needed. */
static bool dropout_is_identity(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_eval_dropout_is_identity(g, n))
        return false;
    if (n->n_outputs >= 2 && n->outputs[1] >= 0 &&
        (cp_rw_n_uses(g, n->outputs[1]) || cp_rw_is_graph_output(g, n->outputs[1])))
        return false;
    return true;
}

/* y = Identity(x) where y is a graph output: keep the name y by letting x's
 * producer write y directly. false when x has no producer node (an input or
 * an initializer) or is itself a graph output; the node then stays. */
static bool rewire_producer(struct cp_graph *g, int32_t node, int32_t x, int32_t y)
{
    const struct cp_tensor *tx = cp_graph_tensor(g, x);
    if (tx->kind != CP_TENSOR_INTERMEDIATE || tx->producer < 0 || cp_rw_is_graph_output(g, x))
        return false;
    int32_t p = tx->producer;
    struct cp_node *P = cp_graph_node(g, p);
    if (!P || P->dead)
        return false;
    cp_rw_kill(g, node);
    for (size_t j = 0; j < P->n_outputs; j++)
        if (P->outputs[j] == x)
            P->outputs[j] = y;
    cp_graph_tensor(g, y)->producer = p;
    cp_graph_tensor(g, x)->producer = -1;
    cp_rw_replace_uses(g, x, y);
    return true;
}

enum cp_status cp_cleanup_identity(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    *changed = false;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead || (n->op != CP_OP_IDENTITY && n->op != CP_OP_DROPOUT))
            continue;
        if (n->n_inputs < 1 || n->inputs[0] < 0 || n->n_outputs < 1 || n->outputs[0] < 0)
            continue;
        if (n->op == CP_OP_DROPOUT && !dropout_is_identity(g, n))
            continue;
        int32_t x = n->inputs[0], y = n->outputs[0];
        if (!cp_rw_is_graph_output(g, y)) {
            cp_rw_kill(g, (int32_t)i);
            cp_rw_replace_uses(g, y, x);
            *changed = true;
        } else if (rewire_producer(g, (int32_t)i, x, y)) {
            *changed = true;
        }
    }
    return CP_OK;
}

/* ---- DeadNodeEliminationPass ------------------------------------------------------ */

enum cp_status cp_cleanup_dead_nodes(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    *changed = false;
    size_t nt = cp_graph_n_tensors(g), nn = cp_graph_n_nodes(g);
    int32_t *prod = cp_calloc(nt + 1, sizeof *prod);
    int32_t *stack = cp_calloc(nt + cp_graph_n_outputs(g) + 1, sizeof *stack);
    bool *live = cp_calloc(nn + 1, sizeof *live);
    bool *seen = cp_calloc(nt + 1, sizeof *seen);
    enum cp_status st = CP_OK;
    if (!prod || !stack || !live || !seen) {
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory finding dead nodes");
        goto out;
    }
    for (size_t t = 0; t < nt; t++)
        prod[t] = -1;
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0)
                prod[n->outputs[j]] = (int32_t)i;
    }
    /* Walk back from the graph outputs; each tensor is pushed once. */
    size_t sp = 0;
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++) {
        int32_t t = cp_graph_output(g, i);
        if (t >= 0 && !seen[t]) {
            seen[t] = true;
            stack[sp++] = t;
        }
    }
    while (sp) {
        int32_t t = stack[--sp];
        int32_t p = prod[t];
        if (p < 0 || live[p])
            continue;
        live[p] = true;
        const struct cp_node *n = cp_graph_node(g, p);
        for (size_t j = 0; j < n->n_inputs; j++) {
            int32_t u = n->inputs[j];
            if (u >= 0 && !seen[u]) {
                seen[u] = true;
                stack[sp++] = u;
            }
        }
    }
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (!n->dead && !live[i]) {
            cp_rw_kill(g, (int32_t)i);
            *changed = true;
        }
    }
out:
    free(prod);
    free(stack);
    free(live);
    free(seen);
    return st;
}
