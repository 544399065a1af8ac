/* PadFoldingPass: a constant-zero Pad of the spatial axes whose only
 * reader is a Conv or an AveragePool becomes that op's own padding.
 *
 *   Pad(x, zeros around H, W) -> Conv         => Conv, pads + the Pad's
 *   Pad(x, zeros around H, W) -> AveragePool  => AveragePool, pads + the
 *                                               Pad's, count_include_pad=1
 *
 * Inception v3 (as torchvision exports it) pads before nine of its average
 * pools; the Pad ran as a separate copy of the activation and, inside a
 * layout region, with a TransData on either side. The average counts the
 * padded zeros, which is what count_include_pad=1 divides by, so the pool
 * may only have had padding of its own when it counted it too; ceil_mode
 * must be off (its extension is never counted). Pads must be a constant,
 * non-negative, zero on the batch and channel axes; the Pad's result must
 * be read by that one node and not be a graph output. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <string.h>

#define MAX_RANK 5

/* The Pad's begin/end pads (2*rank), if it is a constant-zero spatial pad
 * of a rank-3..5 tensor. */
static bool zero_spatial_pad(const struct cp_graph *g, const struct cp_node *p, int64_t *pads,
                             int *rank)
{
    if (p->n_outputs < 1 || p->outputs[0] < 0 || p->n_inputs < 1 || p->inputs[0] < 0 ||
        strcmp(cp_node_attr_string(p, "mode", "constant"), "constant") != 0)
        return false;
    const struct cp_tensor *x = cp_graph_tensor(g, p->inputs[0]);
    int r = x->shape.rank;
    if (r < 3 || r > MAX_RANK || x->dtype != CP_DTYPE_F32)
        return false;
    size_t n = 0;
    if (cp_graph_opset(g) < 11) {
        if (!cp_rw_attr_ints(p, "pads", pads, 2 * MAX_RANK, &n) ||
            cp_node_attr_float(p, "value", 0.0f) != 0.0f)
            return false;
    } else {
        if (p->n_inputs < 2 || p->inputs[1] < 0 || (p->n_inputs > 3 && p->inputs[3] >= 0))
            return false; /* no pads, or an axes input */
        const struct cp_tensor *tp = cp_graph_tensor(g, p->inputs[1]);
        const int64_t *pv = cp_rw_const_data(g, p->inputs[1]);
        if (!pv || tp->dtype != CP_DTYPE_I64 || cp_shape_numel(&tp->shape) > 2 * MAX_RANK)
            return false;
        n = (size_t)cp_shape_numel(&tp->shape);
        memcpy(pads, pv, n * sizeof *pads);
        if (p->n_inputs > 2 && p->inputs[2] >= 0) {
            const float *v = cp_rw_const_data(g, p->inputs[2]);
            const struct cp_tensor *tv = cp_graph_tensor(g, p->inputs[2]);
            if (!v || tv->dtype != CP_DTYPE_F32 || cp_shape_numel(&tv->shape) != 1 || v[0] != 0.0f)
                return false;
        }
    }
    if (n != (size_t)(2 * r))
        return false;
    for (int i = 0; i < 2 * r; i++)
        if (pads[i] < 0 || ((i % r) < 2 && pads[i] != 0))
            return false;
    *rank = r;
    return true;
}

/* Fold Pad node pi into its reader ri when the reader allows it. */
static enum cp_status fold(struct cp_pass_ctx *ctx, int32_t pi, int32_t ri, const int64_t *pp,
                           int r, bool *changed)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *p = cp_graph_node(g, pi), *c = cp_graph_node(g, ri);
    bool pool = c->op == CP_OP_AVERAGE_POOL;
    if ((c->op != CP_OP_CONV && !pool) || c->n_inputs < 1 || c->inputs[0] != p->outputs[0] ||
        strcmp(cp_node_attr_string(c, "auto_pad", "NOTSET"), "NOTSET") != 0)
        return CP_OK;
    for (size_t j = 1; j < c->n_inputs; j++)
        if (c->inputs[j] == p->outputs[0])
            return CP_OK; /* read twice */
    int ns = r - 2;
    int64_t own[2 * (MAX_RANK - 2)] = {0};
    size_t n = 0;
    if (cp_node_attr(c, "pads") &&
        (!cp_rw_attr_ints(c, "pads", own, 2 * (MAX_RANK - 2), &n) || n != (size_t)(2 * ns)))
        return CP_OK;
    bool own_pads = false;
    for (int i = 0; i < 2 * ns; i++)
        own_pads = own_pads || own[i] != 0;
    if (pool && (cp_node_attr_int(c, "ceil_mode", 0) != 0 ||
                 (own_pads && cp_node_attr_int(c, "count_include_pad", 0) == 0)))
        return CP_OK;
    int64_t sum[2 * (MAX_RANK - 2)];
    for (int i = 0; i < ns; i++) {
        sum[i] = own[i] + pp[2 + i];
        sum[ns + i] = own[ns + i] + pp[r + 2 + i];
    }
    cp_graph_node(g, ri)->inputs[0] = p->inputs[0];
    if (cp_node_set_ints(g, ri, "pads", sum, (size_t)(2 * ns)) != CP_OK ||
        (pool && cp_node_set_int(g, ri, "count_include_pad", 1) != CP_OK) ||
        cp_rw_merge_origins(g, ri, cp_graph_node(g, pi)) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory folding node '%s'", p->name);
    cp_rw_kill(g, pi);
    *changed = true;
    return CP_OK;
}

enum cp_status cp_cleanup_pad_fold(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    struct cp_graph *g = ctx->g;
    size_t nn = cp_graph_n_nodes(g);
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *p = cp_graph_node(g, (int32_t)i);
        int64_t pads[2 * MAX_RANK];
        int r;
        if (p->dead || p->op != CP_OP_PAD || !zero_spatial_pad(g, p, pads, &r))
            continue;
        int32_t reader = cp_rw_sole_consumer(g, p->outputs[0]);
        if (reader < 0)
            continue;
        enum cp_status st = fold(ctx, (int32_t)i, reader, pads, r, changed);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}
