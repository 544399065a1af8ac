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
 */
#include "atc_bridge/passes/fusion_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHANNELS 65536

/* The axes of a reduction: the attribute, or a constant input (opset 18). */
static bool reduce_axes(const struct cp_fuse *f, const struct cp_node *n, int64_t *axes, size_t *na)
{
    const struct cp_attr *a = cp_node_attr(n, "axes");
    if (a && a->type == CP_ATTR_INTS && a->n <= CP_MAX_RANK) {
        memcpy(axes, a->ints, a->n * sizeof *axes);
        *na = a->n;
        return true;
    }
    if (n->n_inputs > 1 && n->inputs[1] >= 0)
        return cp_fuse_const_ints(f, n->inputs[1], axes, CP_MAX_RANK, na);
    return false;
}

/* A ReduceMean over the last axis of x only, keeping dims. */
static bool is_last_axis_mean(const struct cp_fuse *f, const struct cp_node *n, int32_t x)
{
    if (n->op != CP_OP_REDUCE_MEAN || n->n_outputs != 1 || n->inputs[0] != x ||
        cp_node_attr_int(n, "keepdims", 1) != 1)
        return false;
    int rank = cp_graph_tensor(f->g, x)->shape.rank;
    int64_t axes[CP_MAX_RANK];
    size_t na;
    if (rank < 1 || !reduce_axes(f, n, axes, &na) || na != 1)
        return false;
    return axes[0] == -1 || axes[0] == rank - 1;
}

/* The sole reader of t with op `op` (t private), its index in *idx. */
static const struct cp_node *next(const struct cp_fuse *f, int32_t t, enum cp_op op, int32_t *idx)
{
    *idx = cp_fuse_only_consumer(f, t, op);
    return *idx >= 0 ? cp_graph_node(f->g, *idx) : NULL;
}

/* An optional affine step after t: Mul (scale) or Add (shift) by a
 * constant that broadcasts along `axis` of a rank-`rank` tensor with `n`
 * values. OUT: v, *node, *out (unchanged when absent). */
static bool affine_step(const struct cp_fuse *f, int32_t t, enum cp_op op, int rank, int axis,
                        int64_t n, float *v, int32_t *node, int32_t *out, int32_t *src)
{
    int32_t i;
    const struct cp_node *s = next(f, t, op, &i);
    int o = s ? cp_fuse_other(s, t) : -1;
    if (o < 0)
        return false;
    const struct cp_tensor *c = cp_graph_tensor(f->g, s->inputs[o]);
    if (c->shape.rank < 1 || c->shape.rank > rank)
        return false;
    int off = rank - c->shape.rank;
    for (int k = 0; k < c->shape.rank; k++)
        if (c->shape.dims[k].value != (k + off == axis ? n : 1))
            return false;
    if (axis < off)
        return false;
    size_t got;
    if (!cp_fuse_const_floats(f, s->inputs[o], v, (size_t)n, &got) || got != (size_t)n)
        return false;
    *node = i;
    *out = s->outputs[0];
    *src = s->inputs[o];
    return true;
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

/* The per-channel scale and bias inputs ([n] each). */
static enum cp_status affine_inputs(struct cp_fuse *f, const char *base, const float *gamma,
                                    int32_t gsrc, const float *beta, int32_t bsrc, int64_t n,
                                    int32_t *tg, int32_t *tb)
{
    enum cp_status st = affine_input(f, base, "scale", gsrc, gamma, n, tg);
    return st == CP_OK ? affine_input(f, base, "bias", bsrc, beta, n, tb) : st;
}

/* ---- LayerNorm ---------------------------------------------------------- */

static enum cp_status fuse_layernorm(struct cp_fuse *f, int32_t ri, bool *changed)
{
    const struct cp_node *rm = cp_graph_node(f->g, ri);
    int32_t x = rm->inputs[0];
    const struct cp_tensor *tx = cp_graph_tensor(f->g, x);
    if (!is_last_axis_mean(f, rm, x) || tx->dtype != CP_DTYPE_F32)
        return CP_OK;
    int rank = tx->shape.rank;
    int64_t h = tx->shape.dims[rank - 1].value;
    if (h < 1 || h > MAX_CHANNELS)
        return CP_OK;
    int32_t dead[CP_FUSE_MAX_NODES];
    size_t nd = 0;
    dead[nd++] = ri;
    int32_t i;
    const struct cp_node *sub = next(f, rm->outputs[0], CP_OP_SUB, &i);
    if (!sub || sub->inputs[0] != x || sub->inputs[1] != rm->outputs[0])
        return CP_OK;
    dead[nd++] = i;
    int32_t d = sub->outputs[0];
    int32_t readers[3];
    size_t nr = cp_fuse_consumers(f, d, readers, 3);
    if (nr != 2)
        return CP_OK;
    const struct cp_node *sq = NULL, *dv = NULL;
    int32_t sqi = -1, dvi = -1;
    for (size_t k = 0; k < 2; k++) {
        const struct cp_node *n = cp_graph_node(f->g, readers[k]);
        bool square =
            (n->op == CP_OP_POW && n->inputs[0] == d && cp_fuse_const_is(f, n->inputs[1], 2.0f)) ||
            (n->op == CP_OP_MUL && n->inputs[0] == d && n->inputs[1] == d);
        if (square && !sq) {
            sq = n;
            sqi = readers[k];
        } else if (n->op == CP_OP_DIV && n->inputs[0] == d) {
            dv = n;
            dvi = readers[k];
        }
    }
    /* d is read by the square (once, or twice for Mul(d, d)) and the Div. */
    int32_t want = sq && sq->op == CP_OP_MUL ? 3 : 2;
    if (!sq || !dv || !cp_fuse_private(f, d, want))
        return CP_OK;
    dead[nd++] = sqi;
    const struct cp_node *rm2 = next(f, sq->outputs[0], CP_OP_REDUCE_MEAN, &i);
    if (!rm2 || !is_last_axis_mean(f, rm2, sq->outputs[0]))
        return CP_OK;
    dead[nd++] = i;
    const struct cp_node *ae = next(f, rm2->outputs[0], CP_OP_ADD, &i);
    int o = ae ? cp_fuse_other(ae, rm2->outputs[0]) : -1;
    float eps;
    if (o < 0 || !cp_fuse_const_scalar(f, ae->inputs[o], &eps) || !(eps >= 0.0f))
        return CP_OK;
    dead[nd++] = i;
    const struct cp_node *sr = next(f, ae->outputs[0], CP_OP_SQRT, &i);
    if (!sr || !cp_fuse_private(f, sr->outputs[0], 1) || dv->inputs[1] != sr->outputs[0])
        return CP_OK;
    dead[nd++] = i;
    dead[nd++] = dvi;
    int32_t out = dv->outputs[0];
    float *gamma = malloc((size_t)h * sizeof *gamma), *beta = malloc((size_t)h * sizeof *beta);
    enum cp_status st = CP_OK;
    if (!gamma || !beta) {
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", rm->name);
        goto out;
    }
    for (int64_t k = 0; k < h; k++) {
        gamma[k] = 1.0f;
        beta[k] = 0.0f;
    }
    int32_t step, gsrc = -1, bsrc = -1;
    if (affine_step(f, out, CP_OP_MUL, rank, rank - 1, h, gamma, &step, &out, &gsrc))
        dead[nd++] = step;
    if (affine_step(f, out, CP_OP_ADD, rank, rank - 1, h, beta, &step, &out, &bsrc))
        dead[nd++] = step;
    int32_t tg, tb;
    if ((st = affine_inputs(f, tx->name, gamma, gsrc, beta, bsrc, h, &tg, &tb)) != CP_OK)
        goto out;
    int32_t ins[3] = {x, tg, tb}, idx;
    if ((st = cp_fuse_replace(f, dead, nd, "LayerNormalization", "", ins, 3, out, "_layernorm",
                              &idx)) != CP_OK)
        goto out;
    if (cp_node_set_int(f->g, idx, "axis", -1) != CP_OK ||
        cp_node_set_float(f->g, idx, "epsilon", eps) != CP_OK) {
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", rm->name);
        goto out;
    }
    *changed = true;
out:
    free(gamma);
    free(beta);
    return st;
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

static bool all_equal(const struct cp_fuse *f, int32_t t, int64_t n, float v)
{
    float *buf = malloc((size_t)(n > 0 ? n : 1) * sizeof *buf);
    size_t got = 0;
    bool ok = buf && cp_fuse_const_floats(f, t, buf, (size_t)n, &got) && got == (size_t)n;
    for (size_t k = 0; ok && k < got; k++)
        ok = buf[k] == v;
    free(buf);
    return ok;
}

static enum cp_status fuse_groupnorm(struct cp_fuse *f, int32_t ii, bool *changed)
{
    const struct cp_node *in = cp_graph_node(f->g, ii);
    if (in->n_inputs != 3 || in->n_outputs != 1)
        return CP_OK;
    const struct cp_node *r1 = cp_fuse_producer(f, in->inputs[0]);
    if (!r1 || r1->op != CP_OP_RESHAPE || !cp_fuse_private(f, in->inputs[0], 1))
        return CP_OK;
    int32_t x = r1->inputs[0];
    const struct cp_tensor *tx = cp_graph_tensor(f->g, x);
    const struct cp_tensor *tr = cp_graph_tensor(f->g, in->inputs[0]);
    /* [N, C, spatial...] -> [N, G, C/G * spatial]; N may be dynamic (batch
     * profiles), the rest must be known. */
    if (tx->dtype != CP_DTYPE_F32 || tx->shape.rank < 3 || tr->shape.rank != 3)
        return CP_OK;
    int64_t c = tx->shape.dims[1].value, groups = tr->shape.dims[1].value, per = 1;
    for (int k = 2; k < tx->shape.rank; k++)
        per = tx->shape.dims[k].value >= 0 && per >= 0 ? per * tx->shape.dims[k].value : -1;
    if (groups < 1 || c < 1 || c % groups != 0 || c > MAX_CHANNELS || per < 0 ||
        tr->shape.dims[2].value != c / groups * per ||
        tr->shape.dims[0].value != tx->shape.dims[0].value ||
        (tx->shape.dims[0].value < 0 &&
         !(tx->shape.dims[0].sym && tr->shape.dims[0].sym &&
           strcmp(tx->shape.dims[0].sym, tr->shape.dims[0].sym) == 0)))
        return CP_OK;
    if (!all_equal(f, in->inputs[1], groups, 1.0f) || !all_equal(f, in->inputs[2], groups, 0.0f))
        return CP_OK;
    int32_t dead[CP_FUSE_MAX_NODES];
    size_t nd = 0;
    dead[nd++] = cp_graph_tensor(f->g, in->inputs[0])->producer;
    dead[nd++] = ii;
    int32_t i;
    const struct cp_node *r2 = next(f, in->outputs[0], CP_OP_RESHAPE, &i);
    if (!r2 || !cp_shape_equal(&cp_graph_tensor(f->g, r2->outputs[0])->shape, &tx->shape))
        return CP_OK;
    dead[nd++] = i;
    int32_t shape_src = r2->n_inputs > 1 ? r2->inputs[1] : -1;
    int32_t out = r2->outputs[0];
    float *gamma = malloc((size_t)c * sizeof *gamma), *beta = malloc((size_t)c * sizeof *beta);
    enum cp_status st = CP_OK;
    if (!gamma || !beta) {
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", in->name);
        goto out;
    }
    for (int64_t k = 0; k < c; k++) {
        gamma[k] = 1.0f;
        beta[k] = 0.0f;
    }
    int rank = tx->shape.rank;
    int32_t step, gsrc = -1, bsrc = -1;
    if (affine_step(f, out, CP_OP_MUL, rank, 1, c, gamma, &step, &out, &gsrc))
        dead[nd++] = step;
    if (affine_step(f, out, CP_OP_ADD, rank, 1, c, beta, &step, &out, &bsrc))
        dead[nd++] = step;
    struct cp_fuse_act act;
    bool has_act = cp_fuse_match_activation(f, out, &act);
    if (has_act) {
        for (size_t k = 0; k < act.n_nodes; k++)
            dead[nd++] = act.nodes[k];
        out = act.out;
    }
    int32_t tg, tb;
    if ((st = affine_inputs(f, tx->name, gamma, gsrc, beta, bsrc, c, &tg, &tb)) != CP_OK)
        goto out;
    int32_t ins[3] = {x, tg, tb}, idx;
    float eps = cp_node_attr_float(in, "epsilon", 1e-5f);
    if ((st = cp_fuse_replace(f, dead, nd, "GroupNormalization", CP_DOMAIN, ins, 3, out,
                              "_groupnorm", &idx)) != CP_OK)
        goto out;
    if (cp_node_set_int(f->g, idx, "num_groups", groups) != CP_OK ||
        cp_node_set_float(f->g, idx, "epsilon", eps) != CP_OK) {
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", in->name);
        goto out;
    }
    if (has_act && (st = cp_fuse_set_activation(f, idx, &act)) != CP_OK)
        goto out;
    /* The Shape(x) that fed the second Reshape has no reader left. */
    const struct cp_node *sh = shape_src >= 0 ? cp_fuse_producer(f, shape_src) : NULL;
    if (sh && sh->op == CP_OP_SHAPE)
        cp_fuse_drop_if_unused(f, cp_graph_tensor(f->g, shape_src)->producer);
    *changed = true;
out:
    free(gamma);
    free(beta);
    return st;
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
    const struct cp_node *e = cp_graph_node(f->g, ei);
    const struct cp_node *d = cp_fuse_producer(f, e->inputs[0]);
    if (!d || (d->op != CP_OP_DIV && d->op != CP_OP_MUL) || d->n_inputs != 2)
        return CP_OK;
    float c;
    int32_t x = cp_fuse_const_scalar(f, d->inputs[1], &c) ? d->inputs[0] : d->inputs[1];
    struct cp_fuse_act a;
    if (!cp_fuse_match_gelu(f, x, &a))
        return CP_OK;
    int32_t idx;
    enum cp_status st =
        cp_fuse_replace(f, a.nodes, a.n_nodes, "Gelu", CP_DOMAIN, &x, 1, a.out, "_gelu", &idx);
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
