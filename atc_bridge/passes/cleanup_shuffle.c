/* Channel shuffles as channel Gathers, part of TransposeOptimizationPass.
 *
 * ShuffleNet writes its channel shuffle as Reshape(x, [N, g, C/g, H, W]),
 * Transpose(perm 0,2,1,3,4), Reshape(back to [N, C, H, W]), and splits the
 * result in halves with Slices on the channel axis. A 5-D Transpose has no
 * kernel that reads an NHWC or blocked map, so each block used to leave
 * its conv region for plain NCHW and come back: two TransData per shuffle
 * and per half. Here
 *
 *  - the Reshape-Transpose-Reshape becomes Gather(x, idx, axis 1), with
 *    idx[a * g + b] = b * (C / g) + a: output channel a * g + b is input
 *    channel b * (C / g) + a;
 *  - a Slice of such a Gather's result, on the channel axis only, becomes
 *    a Gather of the Gather's input with the sliced indices, so each half
 *    is one copy of the maps it keeps.
 *
 * Both are the same values as before, in plain layout. LayoutTransformPass
 * then keeps a channel Gather or Slice inside an NHWC conv region, where
 * it is a per-pixel copy of channels (runner/cpu/fast_copy.c). */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"
#include "graph/op_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The live node of op `op` producing t, read by nothing else and no graph
 * output, or -1. */
static int32_t private_producer(const struct cp_graph *g, int32_t t, enum cp_op op)
{
    const struct cp_tensor *T = t >= 0 ? cp_graph_tensor(g, t) : NULL;
    if (!T || T->kind != CP_TENSOR_INTERMEDIATE || T->producer < 0 || cp_rw_sole_consumer(g, t) < 0)
        return -1;
    const struct cp_node *p = cp_graph_node(g, T->producer);
    return !p->dead && p->op == op && p->n_outputs == 1 ? T->producer : -1;
}

/* The groups g of a channel shuffle ending in Reshape node r2, with the
 * Transpose and first Reshape. OUT: *tr, *r1, *x. 0 when it is none. */
static int64_t shuffle_groups(const struct cp_graph *g, const struct cp_node *r2, int32_t *tr,
                              int32_t *r1, int32_t *x)
{
    const struct cp_tensor *y = cp_rw_static4(g, r2->outputs[0]);
    if (!y || r2->n_inputs < 1 || (*tr = private_producer(g, r2->inputs[0], CP_OP_TRANSPOSE)) < 0)
        return 0;
    const struct cp_node *t = cp_graph_node(g, *tr);
    const struct cp_tensor *m = cp_graph_tensor(g, t->inputs[0]);
    int64_t perm[CP_MAX_RANK];
    static const int64_t want[5] = {0, 2, 1, 3, 4};
    if (t->n_inputs != 1 || m->shape.rank != 5 || !cp_shape_is_static(&m->shape) ||
        !cp_eval_transpose_perm(t, 5, perm) || memcmp(perm, want, sizeof want) != 0 ||
        (*r1 = private_producer(g, t->inputs[0], CP_OP_RESHAPE)) < 0)
        return 0;
    const struct cp_node *first = cp_graph_node(g, *r1);
    const struct cp_tensor *in = first->n_inputs >= 1 ? cp_rw_static4(g, first->inputs[0]) : NULL;
    if (!in || !cp_shape_equal(&in->shape, &y->shape) || in->dtype != y->dtype)
        return 0;
    const struct cp_dim *d = m->shape.dims, *s = in->shape.dims;
    if (d[0].value != s[0].value || d[1].value * d[2].value != s[1].value ||
        d[3].value != s[2].value || d[4].value != s[3].value || d[1].value < 1)
        return 0;
    *x = first->inputs[0];
    return d[1].value;
}

/* Replace the nodes from[0..nf) (all killed by the caller first) by
 * y = Gather(x, idx[0..n), axis 1), named after `name`. Takes idx. */
static enum cp_status add_channel_gather(struct cp_pass_ctx *ctx, const char *name, int32_t x,
                                         int32_t y, int64_t *idx, int64_t n, const int32_t *from,
                                         size_t nf)
{
    struct cp_graph *g = ctx->g;
    struct cp_shape is;
    cp_shape_set(&is, 1, &n);
    char iname[400];
    snprintf(iname, sizeof iname, "%s_channels", name);
    int32_t ti, ni;
    enum cp_status st = cp_rw_add_initializer(g, iname, CP_DTYPE_I64, &is, idx,
                                              (size_t)n * sizeof *idx, &ti, ctx->d);
    if (st != CP_OK)
        return st;
    int32_t ins[2] = {x, ti};
    if ((st = cp_rw_add_node(g, name, "Gather", "", ins, 2, &y, 1, from, nf, &ni, ctx->d)) != CP_OK)
        return st;
    if (cp_node_set_int(g, ni, "axis", 1) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory rewriting node '%s'", name);
    return CP_OK;
}

static enum cp_status rewrite_shuffle(struct cp_pass_ctx *ctx, int32_t i, bool *done)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *r2 = cp_graph_node(g, i);
    int32_t tr, r1, x;
    *done = false;
    if (r2->n_outputs != 1)
        return CP_OK;
    int64_t groups = shuffle_groups(g, r2, &tr, &r1, &x);
    if (groups == 0)
        return CP_OK;
    int64_t c = cp_graph_tensor(g, x)->shape.dims[1].value, per = c / groups;
    int64_t *idx = malloc((size_t)c * sizeof *idx);
    if (!idx)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory rewriting node '%s'", r2->name);
    for (int64_t a = 0; a < per; a++)
        for (int64_t b = 0; b < groups; b++)
            idx[a * groups + b] = b * per + a;
    char name[300];
    snprintf(name, sizeof name, "%s", r2->name);
    int32_t y = r2->outputs[0], from[3] = {r1, tr, i};
    cp_rw_kill(g, i);
    cp_rw_kill(g, tr);
    cp_rw_kill(g, r1);
    *done = true;
    return add_channel_gather(ctx, name, x, y, idx, c, from, 3);
}

/* Slice node i of a channel Gather's result, on the channel axis only. */
static enum cp_status rewrite_slice(struct cp_pass_ctx *ctx, int32_t i, bool *done)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *s = cp_graph_node(g, i);
    *done = false;
    int64_t first[CP_MAX_RANK], step[CP_MAX_RANK];
    if (!cp_rw_channel_slice(g, s, first, step))
        return CP_OK;
    int32_t mt = s->inputs[0];
    const struct cp_tensor *m = cp_graph_tensor(g, mt);
    if (m->kind != CP_TENSOR_INTERMEDIATE || m->producer < 0)
        return CP_OK;
    int32_t gi = m->producer;
    const struct cp_tensor *it = cp_rw_channel_gather(g, cp_graph_node(g, gi));
    if (!it || it->dtype != CP_DTYPE_I64)
        return CP_OK;
    const int64_t *idx = it->data;
    int64_t n_idx = it->shape.dims[0].value;
    const struct cp_tensor *y = cp_graph_tensor(g, s->outputs[0]);
    int64_t n = y->shape.dims[1].value;
    int64_t *sel = malloc((size_t)(n > 0 ? n : 1) * sizeof *sel);
    if (!sel)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory rewriting node '%s'", s->name);
    for (int64_t j = 0; j < n; j++) {
        int64_t at = first[1] + j * step[1];
        if (at < 0 || at >= n_idx) {
            free(sel);
            return CP_OK;
        }
        sel[j] = idx[at];
    }
    char name[300];
    snprintf(name, sizeof name, "%s", s->name);
    int32_t x = cp_graph_node(g, gi)->inputs[0], out = s->outputs[0], from[2] = {gi, i};
    cp_rw_kill(g, i);
    *done = true;
    enum cp_status st = add_channel_gather(ctx, name, x, out, sel, n, from, 2);
    if (st == CP_OK && cp_rw_n_uses(g, mt) == 0 && !cp_rw_is_graph_output(g, mt))
        cp_rw_kill(g, gi);
    return st;
}

enum cp_status cp_cleanup_channel_shuffle(struct cp_pass_ctx *ctx, bool *changed)
{
    enum cp_status st = cp_cleanup_each(ctx, CP_OP_RESHAPE, rewrite_shuffle, changed);
    return st == CP_OK ? cp_cleanup_each(ctx, CP_OP_SLICE, rewrite_slice, changed) : st;
}
