/* ConvBatchNormFusionPass: Conv (with or without bias) followed by an
 * inference BatchNormalization becomes one Conv with folded weights:
 *
 *   s[o]  = scale[o] / sqrt(var[o] + epsilon)
 *   W'[o] = W[o] * s[o]
 *   B'[o] = (B[o] - mean[o]) * s[o] + bias[o]      (B = 0 without a bias)
 *
 * computed in double and stored as new f32 initializers (the old weights
 * stay for any other reader; unused ones are dropped at the end). The Conv
 * must feed only the BatchNormalization, and every weight must be a
 * constant f32 initializer: graph/pattern.h's cp_pattern_match_conv_bn,
 * which the rule engine runs on traces too, decides. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"
#include "graph/pattern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static enum cp_status fold(struct cp_pass_ctx *ctx, int32_t ci, int32_t bi)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *c = cp_graph_node(g, ci), *bn = cp_graph_node(g, bi);
    const struct cp_tensor *w = cp_graph_tensor(g, c->inputs[1]);
    int64_t oc = w->shape.dims[0].value, per = cp_shape_numel(&w->shape) / oc;
    const float *W = w->data;
    const float *B =
        c->n_inputs >= 3 && c->inputs[2] >= 0 ? cp_rw_const_data(g, c->inputs[2]) : NULL;
    const float *scale = cp_rw_const_data(g, bn->inputs[1]);
    const float *bias = cp_rw_const_data(g, bn->inputs[2]);
    const float *mean = cp_rw_const_data(g, bn->inputs[3]);
    const float *var = cp_rw_const_data(g, bn->inputs[4]);
    double eps = cp_node_attr_float(bn, "epsilon", 1e-5f);

    float *w2 = malloc((size_t)(oc * per) * sizeof *w2);
    float *b2 = malloc((size_t)oc * sizeof *b2);
    if (!w2 || !b2) {
        free(w2);
        free(b2);
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory folding node '%s'", bn->name);
    }
    for (int64_t o = 0; o < oc; o++) {
        double s = (double)scale[o] / sqrt((double)var[o] + eps);
        for (int64_t k = 0; k < per; k++)
            w2[o * per + k] = (float)((double)W[o * per + k] * s);
        b2[o] = (float)(((B ? (double)B[o] : 0.0) - (double)mean[o]) * s + (double)bias[o]);
    }
    char name[400];
    int32_t tw, tb;
    snprintf(name, sizeof name, "%s_bn_folded_weight", c->name);
    enum cp_status st = cp_rw_add_initializer(g, name, CP_DTYPE_F32, &w->shape, w2,
                                              (size_t)(oc * per) * sizeof *w2, &tw, ctx->d);
    if (st != CP_OK) {
        free(b2);
        return st;
    }
    struct cp_shape bs;
    cp_shape_set(&bs, 1, &oc);
    snprintf(name, sizeof name, "%s_bn_folded_bias", c->name);
    st =
        cp_rw_add_initializer(g, name, CP_DTYPE_F32, &bs, b2, (size_t)oc * sizeof *b2, &tb, ctx->d);
    if (st != CP_OK)
        return st;

    int32_t ins[3] = {c->inputs[0], tw, tb}, outs[1] = {bn->outputs[0]}, from[2] = {ci, bi};
    cp_rw_kill(g, ci);
    cp_rw_kill(g, bi);
    int32_t nc;
    st = cp_rw_add_node(g, c->name, c->op_type, c->domain, ins, 3, outs, 1, from, 2, &nc, ctx->d);
    if (st != CP_OK)
        return st;
    /* The arena keeps the dead Conv's attributes; `c` is still valid. */
    if (cp_rw_copy_attrs(g, nc, cp_graph_node(g, ci)) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory folding node '%s'", bn->name);
    return CP_OK;
}

enum cp_status cp_cleanup_conv_bn(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    *changed = false;
    struct cp_pattern_graph pg;
    enum cp_status st = CP_OK;
    if (cp_pattern_graph_init(&pg, g) != CP_OK)
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory folding batch normalisations");
    size_t nn = cp_graph_n_nodes(g);
    for (size_t i = 0; i < nn && st == CP_OK; i++) {
        const struct cp_node *bn = cp_graph_node(g, (int32_t)i);
        if (bn->dead || bn->op != CP_OP_BATCH_NORMALIZATION)
            continue;
        int32_t ci = cp_pattern_match_conv_bn(&pg.view, (int32_t)i);
        if (ci < 0)
            continue;
        if ((st = fold(ctx, ci, (int32_t)i)) != CP_OK)
            break;
        *changed = true;
        if (cp_pattern_graph_update(&pg) != CP_OK)
            st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory folding batch normalisations");
    }
    cp_pattern_graph_release(&pg);
    return st;
}
