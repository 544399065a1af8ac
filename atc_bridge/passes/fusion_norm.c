/*
 * LayerNormFusionPass, GroupNormFusionPass and GeluFusionPass: the
 * normalisations and GELU that exporters write out op by op, folded back
 * into one op each.
 *
 * LayerNorm (opset < 17 exports): ReduceMean(x) -> Sub(x, mean) ->
 * Pow(d, 2) (or Mul(d, d)) -> ReduceMean -> Add(eps) -> Sqrt -> Div(d, .)
 * -> [Mul(gamma)] -> [Add(beta)], both means over the last axis only,
 * becomes LayerNormalization(axis -1, epsilon). Our LayerNormalization
 * kernels do not depend on the opset, and inference accepts the op at any
 * opset, so the result is valid in an opset-14 graph too.
 *
 * GroupNorm (PyTorch): Reshape(x, [N, G, -1]) -> InstanceNormalization
 * (scale 1, bias 0) -> Reshape(back to x's shape, usually via Shape(x)) ->
 * [Mul(gamma [C,1,1])] -> [Add(beta [C,1,1])], then an optional activation
 * (SiLU as x*Sigmoid(x)), becomes GroupNormalization(num_groups G).
 *
 * GELU: Div(x, sqrt2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), in any of the
 * operand orders PyTorch produces, becomes Gelu(approximate "none").
 *
 * What is fused is graph/pattern.h's (cp_pattern_match_layernorm,
 * _groupnorm, _gelu), which the rule engine runs on traces too; this file
 * rewrites.
 */
#include "atc_bridge/passes/fusion_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* n per-channel values: those of constant `src`, or `dflt` when src < 0. */
static void channel_values(const struct cp_fuse *f, int32_t src, int64_t n, float dflt, float *v)
{
    size_t got;
    if (src >= 0 && cp_fuse_const_floats(f, src, v, (size_t)n, &got) && got == (size_t)n)
        return;
    for (int64_t k = 0; k < n; k++)
        v[k] = dflt;
}

/* A 1-D input of n values: the pattern's own constant `src` when it is
 * already 1-D, else a new weight. */
static enum cp_status affine_input(struct cp_fuse *f, const char *base, const char *what,
                                   int32_t src, const float *v, int64_t n, int32_t *t)
{
    if (src >= 0 && cp_graph_tensor(f->g, src)->shape.rank == 1) {
        *t = src;
        return CP_OK;
    }
    char name[512];
    snprintf(name, sizeof name, "%s_%s", base, what);
    return cp_fuse_new_weight(f, name, v, 1, &n, t);
}

/* The per-channel scale and bias inputs ([n] each): gamma from gsrc (else
 * ones), beta from bsrc (else zeros). */
static enum cp_status affine_inputs(struct cp_fuse *f, const char *base, int32_t gsrc, int32_t bsrc,
                                    int64_t n, int32_t *tg, int32_t *tb)
{
    float *gamma = malloc((size_t)n * sizeof *gamma), *beta = malloc((size_t)n * sizeof *beta);
    enum cp_status st = CP_OK;
    if (!gamma || !beta) {
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing '%s'", base);
        goto out;
    }
    channel_values(f, gsrc, n, 1.0f, gamma);
    channel_values(f, bsrc, n, 0.0f, beta);
    st = affine_input(f, base, "scale", gsrc, gamma, n, tg);
    if (st == CP_OK)
        st = affine_input(f, base, "bias", bsrc, beta, n, tb);
out:
    free(gamma);
    free(beta);
    return st;
}

/* ---- LayerNorm ---------------------------------------------------------- */

static enum cp_status fuse_layernorm(struct cp_fuse *f, int32_t ri, bool *changed)
{
    struct cp_pattern_layernorm m;
    if (!cp_pattern_match_layernorm(&f->pg.view, ri, &m))
        return CP_OK;
    const struct cp_node *rm = cp_graph_node(f->g, ri);
    const char *base = cp_graph_tensor(f->g, m.x)->name;
    float eps = 0.0f;
    cp_fuse_const_scalar(f, m.eps, &eps);
    int32_t tg, tb;
    enum cp_status st = affine_inputs(f, base, m.gamma_src, m.beta_src, m.h, &tg, &tb);
    if (st != CP_OK)
        return st;
    int32_t ins[3] = {m.x, tg, tb}, idx;
    if ((st = cp_fuse_replace(f, m.nodes, m.n_nodes, "LayerNormalization", "", ins, 3, m.out,
                              "_layernorm", &idx)) != CP_OK)
        return st;
    if (idx < 0)
        return CP_OK; /* switched off for this instance */
    if (cp_node_set_int(f->g, idx, "axis", -1) != CP_OK ||
        cp_node_set_float(f->g, idx, "epsilon", eps) != CP_OK)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", rm->name);
    *changed = true;
    return CP_OK;
}

enum cp_status cp_fusion_layernorm_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_fuse f;
    enum cp_status st = cp_fuse_init(&f, ctx);
    *changed = false;
    for (size_t i = 0; st == CP_OK && i < cp_graph_n_nodes(f.g); i++) {
        const struct cp_node *n = cp_graph_node(f.g, (int32_t)i);
        if (!n->dead && n->op == CP_OP_REDUCE_MEAN)
            st = fuse_layernorm(&f, (int32_t)i, changed);
    }
    cp_fuse_release(&f);
    return st;
}

/* ---- GroupNorm ---------------------------------------------------------- */

static enum cp_status fuse_groupnorm(struct cp_fuse *f, int32_t ii, bool *changed)
{
    struct cp_pattern_groupnorm m;
    if (!cp_pattern_match_groupnorm(&f->pg.view, ii, &m))
        return CP_OK;
    const struct cp_node *in = cp_graph_node(f->g, ii);
    const char *base = cp_graph_tensor(f->g, m.x)->name;
    int32_t tg, tb;
    enum cp_status st = affine_inputs(f, base, m.gamma_src, m.beta_src, m.channels, &tg, &tb);
    if (st != CP_OK)
        return st;
    int32_t ins[3] = {m.x, tg, tb}, idx;
    float eps = cp_node_attr_float(in, "epsilon", 1e-5f);
    if ((st = cp_fuse_replace(f, m.nodes, m.n_nodes, "GroupNormalization", CP_DOMAIN, ins, 3, m.out,
                              "_groupnorm", &idx)) != CP_OK)
        return st;
    if (idx < 0)
        return CP_OK; /* switched off for this instance */
    if (cp_node_set_int(f->g, idx, "num_groups", m.groups) != CP_OK ||
        cp_node_set_float(f->g, idx, "epsilon", eps) != CP_OK)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", in->name);
    if (m.has_act && (st = cp_fuse_set_activation(f, idx, &m.act)) != CP_OK)
        return st;
    /* The Shape(x) that fed the second Reshape has no reader left. */
    int32_t sh = m.shape_src >= 0 ? f->pg.view.producer(&f->pg, m.shape_src) : -1;
    if (sh >= 0 && cp_graph_node(f->g, sh)->op == CP_OP_SHAPE)
        cp_fuse_drop_if_unused(f, sh);
    *changed = true;
    return CP_OK;
}

enum cp_status cp_fusion_groupnorm_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_fuse f;
    enum cp_status st = cp_fuse_init(&f, ctx);
    *changed = false;
    for (size_t i = 0; st == CP_OK && i < cp_graph_n_nodes(f.g); i++) {
        const struct cp_node *n = cp_graph_node(f.g, (int32_t)i);
        if (!n->dead && n->op == CP_OP_INSTANCE_NORMALIZATION)
            st = fuse_groupnorm(&f, (int32_t)i, changed);
    }
    cp_fuse_release(&f);
    return st;
}

/* ---- GELU --------------------------------------------------------------- */

static enum cp_status fuse_gelu(struct cp_fuse *f, int32_t ei, bool *changed)
{
    int32_t x = cp_pattern_gelu_input(&f->pg.view, ei);
    struct cp_pattern_act a;
    if (x < 0 || !cp_pattern_match_gelu(&f->pg.view, x, &a))
        return CP_OK;
    const struct cp_node *e = cp_graph_node(f->g, ei);
    int32_t idx;
    enum cp_status st =
        cp_fuse_replace(f, a.nodes, a.n_nodes, "Gelu", CP_DOMAIN, &x, 1, a.out, "_gelu", &idx);
    if (st == CP_OK && idx < 0)
        return CP_OK; /* switched off for this instance */
    if (st == CP_OK && cp_node_set_string(f->g, idx, "approximate", "none") != CP_OK)
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", e->name);
    if (st == CP_OK)
        *changed = true;
    return st;
}

enum cp_status cp_fusion_gelu_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_fuse f;
    enum cp_status st = cp_fuse_init(&f, ctx);
    *changed = false;
    for (size_t i = 0; st == CP_OK && i < cp_graph_n_nodes(f.g); i++) {
        const struct cp_node *n = cp_graph_node(f.g, (int32_t)i);
        if (!n->dead && n->op == CP_OP_ERF)
            st = fuse_gelu(&f, (int32_t)i, changed);
    }
    cp_fuse_release(&f);
    return st;
}
