/* ConvDeadTapEliminationPass: a Conv whose kernel taps along an axis read
 * only padding for every output position keeps the taps that read the
 * input. DeepLabV3's ASPP runs 3x3 convs dilated by 12, 24 and 36 over a
 * 6x6 map: only the centre tap ever lands inside, so the conv is a 1x1
 * one, which oneDNN runs with its 1x1 kernel rather than through im2col.
 *
 * Along an axis of input length `in`, stride s, dilation d and begin / end
 * pads pb / pe, tap j of output o reads o*s - pb + j*d. With [a, b] the
 * taps some output reads inside [0, in), the kernel becomes W[.., a..b, ..]
 * and the pads pb - a*d and pe - (k-1-b)*d: the output size is unchanged,
 * and the dropped taps only ever added zeros. Weights must be a constant
 * f32 initializer and the input's spatial dims known; auto_pad must be
 * NOTSET (explicit pads). The new weights are a new initializer (the old
 * ones stay for any other reader; unused ones are dropped at the end). */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SPATIAL 3

struct tap_axis {
    int64_t in, k, s, d, pb, pe;
    int64_t a, b; /* first and last tap that reads the input */
};

/* The taps of one axis that some output reads inside the input. False when
 * none does (the output is the bias alone: left as it is). */
static bool live_taps(struct tap_axis *t)
{
    int64_t span = (t->k - 1) * t->d + 1, out = (t->in + t->pb + t->pe - span) / t->s + 1;
    t->a = -1;
    t->b = -1;
    if (out < 1)
        return false;
    for (int64_t j = 0; j < t->k; j++) {
        int64_t off = j * t->d - t->pb; /* o*s + off must land in [0, in) */
        int64_t o0 = off >= 0 ? 0 : (-off + t->s - 1) / t->s;
        if (o0 < out && o0 * t->s + off < t->in) {
            if (t->a < 0)
                t->a = j;
            t->b = j;
        }
    }
    return t->a >= 0;
}

/* Crop node ci's weights to the live taps. OUT: *changed. */
static enum cp_status crop(struct cp_pass_ctx *ctx, int32_t ci, bool *changed)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *c = cp_graph_node(g, ci);
    if (c->n_inputs < 2 || c->inputs[1] < 0 || c->n_outputs < 1)
        return CP_OK;
    const struct cp_tensor *x = cp_graph_tensor(g, c->inputs[0]);
    const struct cp_tensor *w = cp_graph_tensor(g, c->inputs[1]);
    const float *W = cp_rw_const_data(g, c->inputs[1]);
    int r = w->shape.rank, ns = r - 2;
    if (!W || w->dtype != CP_DTYPE_F32 || ns < 1 || ns > MAX_SPATIAL || x->shape.rank != r ||
        !cp_shape_is_static(&w->shape) ||
        strcmp(cp_node_attr_string(c, "auto_pad", "NOTSET"), "NOTSET") != 0)
        return CP_OK;
    int64_t st[MAX_SPATIAL], dl[MAX_SPATIAL], pads[2 * MAX_SPATIAL];
    size_t n;
    for (int i = 0; i < ns; i++)
        st[i] = dl[i] = 1;
    memset(pads, 0, sizeof pads);
    if ((cp_node_attr(c, "strides") &&
         (!cp_rw_attr_ints(c, "strides", st, MAX_SPATIAL, &n) || n != (size_t)ns)) ||
        (cp_node_attr(c, "dilations") &&
         (!cp_rw_attr_ints(c, "dilations", dl, MAX_SPATIAL, &n) || n != (size_t)ns)) ||
        (cp_node_attr(c, "pads") &&
         (!cp_rw_attr_ints(c, "pads", pads, 2 * MAX_SPATIAL, &n) || n != (size_t)(2 * ns))))
        return CP_OK;
    struct tap_axis ax[MAX_SPATIAL];
    bool any = false;
    for (int i = 0; i < ns; i++) {
        ax[i] = (struct tap_axis){x->shape.dims[2 + i].value,
                                  w->shape.dims[2 + i].value,
                                  st[i],
                                  dl[i],
                                  pads[i],
                                  pads[ns + i],
                                  0,
                                  0};
        if (ax[i].in < 1 || ax[i].k < 1 || ax[i].s < 1 || ax[i].d < 1 || !live_taps(&ax[i]))
            return CP_OK;
        int64_t pb = ax[i].pb - ax[i].a * ax[i].d,
                pe = ax[i].pe - (ax[i].k - 1 - ax[i].b) * ax[i].d;
        if (pb < 0 || pe < 0) { /* keep this axis whole */
            ax[i].a = 0;
            ax[i].b = ax[i].k - 1;
        }
        any = any || ax[i].a > 0 || ax[i].b < ax[i].k - 1;
    }
    if (!any)
        return CP_OK;
    /* the cropped weights: [O, I/G, k'...] */
    int64_t outer = w->shape.dims[0].value * w->shape.dims[1].value, kept = 1, full = 1;
    struct cp_shape ws = w->shape;
    for (int i = 0; i < ns; i++) {
        ws.dims[2 + i].value = ax[i].b - ax[i].a + 1;
        kept *= ws.dims[2 + i].value;
        full *= ax[i].k;
    }
    float *w2 = malloc((size_t)(outer * kept) * sizeof *w2);
    if (!w2)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory cropping node '%s'", c->name);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t q = 0; q < kept; q++) {
            int64_t rem = q, src = 0, mul = 1;
            for (int i = ns - 1; i >= 0; i--) {
                int64_t len = ax[i].b - ax[i].a + 1, j = rem % len + ax[i].a;
                rem /= len;
                src += j * mul;
                mul *= ax[i].k;
            }
            w2[o * kept + q] = W[o * full + src];
        }
    char name[400];
    int32_t tw;
    snprintf(name, sizeof name, "%s_live_taps", w->name);
    enum cp_status s = cp_rw_add_initializer(g, name, CP_DTYPE_F32, &ws, w2,
                                             (size_t)(outer * kept) * sizeof *w2, &tw, ctx->d);
    if (s != CP_OK)
        return s;
    int64_t ks[MAX_SPATIAL], np[2 * MAX_SPATIAL];
    for (int i = 0; i < ns; i++) {
        ks[i] = ax[i].b - ax[i].a + 1;
        np[i] = ax[i].pb - ax[i].a * ax[i].d;
        np[ns + i] = ax[i].pe - (ax[i].k - 1 - ax[i].b) * ax[i].d;
    }
    cp_graph_node(g, ci)->inputs[1] = tw;
    if ((cp_node_attr(cp_graph_node(g, ci), "kernel_shape") &&
         cp_node_set_ints(g, ci, "kernel_shape", ks, (size_t)ns) != CP_OK) ||
        cp_node_set_ints(g, ci, "pads", np, (size_t)(2 * ns)) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory cropping node '%s'",
                           cp_graph_node(g, ci)->name);
    *changed = true;
    return CP_OK;
}

enum cp_status cp_cleanup_conv_taps(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    size_t nn = cp_graph_n_nodes(ctx->g);
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(ctx->g, (int32_t)i);
        if (n->dead || n->op != CP_OP_CONV)
            continue;
        enum cp_status st = crop(ctx, (int32_t)i, changed);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}
