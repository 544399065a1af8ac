/* The geometry of a convolution against its concrete shapes (conv_geom.h). */
#include "runner/cpu/conv_geom.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <string.h>

static const char *auto_pad_of(const struct cp_node *n)
{
    return cp_node_attr_string(n, "auto_pad", "NOTSET");
}

static bool ints_attr(const struct cp_node *n, const char *name, int64_t *out, size_t want,
                      int64_t dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    if (!a) {
        for (size_t i = 0; i < want; i++)
            out[i] = dflt;
        return true;
    }
    if (a->type != CP_ATTR_INTS || a->n != want)
        return false;
    memcpy(out, a->ints, want * sizeof *out);
    return true;
}

bool cp_conv_geom(const struct cp_node *n, const struct cp_tensor *x, const struct cp_tensor *w,
                  const struct cp_tensor *y, bool transpose, struct cp_conv_geom *gm)
{
    int64_t xd[CP_MAX_RANK], wd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    if (r < 3 || r > 5 || cp_fk_dims(w, wd) != r || cp_fk_dims(y, yd) != r)
        return false;
    int ns = r - 2;
    gm->ns = ns;
    gm->group = cp_node_attr_int(n, "group", 1);
    if (gm->group < 1)
        return false;
    int64_t ks[3], st[3], dl[3], pads[6];
    if (!ints_attr(n, "strides", st, (size_t)ns, 1) ||
        !ints_attr(n, "dilations", dl, (size_t)ns, 1) ||
        !ints_attr(n, "pads", pads, (size_t)(2 * ns), 0) ||
        !ints_attr(n, "kernel_shape", ks, (size_t)ns, -1))
        return false;
    const char *ap = auto_pad_of(n);
    bool same = strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0;
    bool valid = strcmp(ap, "VALID") == 0;
    if (!same && !valid && strcmp(ap, "NOTSET") != 0)
        return false;
    if (transpose && (same || cp_node_attr(n, "output_shape")))
        return false;
    for (int i = 0; i < ns; i++) {
        int64_t k = wd[2 + i];
        if ((ks[i] != -1 && ks[i] != k) || st[i] < 1 || dl[i] < 1)
            return false;
        int64_t range = (k - 1) * dl[i] + 1;
        int64_t in = xd[2 + i], out = yd[2 + i], pb, pe;
        if (valid) {
            pb = 0;
        } else if (same) {
            int64_t total = (out - 1) * st[i] + range - in;
            if (total < 0)
                total = 0;
            pb = strcmp(ap, "SAME_UPPER") == 0 ? total / 2 : total - total / 2;
        } else {
            pb = pads[i];
        }
        /* The end padding follows from the output size: this also covers
         * ConvTranspose's output_padding and SAME's odd totals. */
        if (!transpose) {
            pe = (out - 1) * st[i] + range - in - pb;
            if (pe < 0) /* rows past the last window are simply unused */
                pe = 0;
            if ((in + pb + pe - range) / st[i] + 1 != out)
                return false;
        } else {
            pe = (in - 1) * st[i] + range - pb - out;
        }
        if (pb < 0 || pe < 0)
            return false;
        gm->strides[i] = st[i];
        gm->dil[i] = dl[i] - 1;
        gm->pl[i] = pb;
        gm->pr[i] = pe;
    }
    return true;
}

/* ---- plain tensors, for the C kernels ---------------------------------------------------- */

bool cp_plain_conv_supports(const struct cp_graph *g, const struct cp_node *n, bool fused,
                            struct cp_conv_geom *gm)
{
    size_t max_in = fused ? 4 : 3;
    if (n->n_inputs < 2 || n->n_inputs > max_in || n->n_outputs != 1 ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) ||
        strcmp(cp_node_attr_string(n, "compute_precision", "fp32"), "fp32") != 0)
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *w = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    const struct cp_tensor *b = cp_fk_in(g, n, 2), *r = fused ? cp_fk_in(g, n, 3) : NULL;
    int rank = x->shape.rank;
    if ((rank != 3 && rank != 4) || !cp_tensor_is_plain(x) || !cp_tensor_is_plain(y) ||
        !cp_tensor_is_plain(w) || !cp_conv_geom(n, x, w, y, false, gm))
        return false;
    int64_t M = y->shape.dims[1].value;
    if (w->shape.dims[0].value != M || x->shape.dims[0].value != y->shape.dims[0].value)
        return false;
    if (b && (b->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&b->shape) ||
              cp_shape_numel(&b->shape) != M))
        return false;
    if (fused && cp_act_of(n).kind == CP_ACT_BAD)
        return false;
    return !r || (r->dtype == CP_DTYPE_F32 && cp_tensor_is_plain(r) &&
                  cp_shape_equal(&r->shape, &y->shape));
}

enum cp_status cp_plain_conv_init(const struct cp_kexec *k, struct cp_plain_conv *pc,
                                  struct cp_diag *d)
{
    const struct cp_tensor *x = k->in[0], *w = k->in[1], *y = k->out[0];
    struct cp_conv_geom gm;
    if (!cp_conv_geom(k->node, x, w, y, false, &gm))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': convolution geometry unsupported",
                           k->node->name);
    bool two = gm.ns == 2;
    pc->batch = x->shape.dims[0].value;
    pc->cin = x->shape.dims[1].value;
    pc->cout = y->shape.dims[1].value;
    pc->ih = two ? x->shape.dims[2].value : 1;
    pc->iw = x->shape.dims[two ? 3 : 2].value;
    pc->oh = two ? y->shape.dims[2].value : 1;
    pc->ow = y->shape.dims[two ? 3 : 2].value;
    pc->kh = two ? w->shape.dims[2].value : 1;
    pc->kw = w->shape.dims[two ? 3 : 2].value;
    pc->sh = two ? gm.strides[0] : 1;
    pc->dh = two ? gm.dil[0] + 1 : 1;
    pc->ph = two ? gm.pl[0] : 0;
    pc->sw = gm.strides[gm.ns - 1];
    pc->dw = gm.dil[gm.ns - 1] + 1;
    pc->pw = gm.pl[gm.ns - 1];
    pc->act = k->node->op == CP_OP_FUSED_CONV ? cp_act_of(k->node) : (struct cp_act){0};
    pc->residual = k->node->n_inputs > 3 && k->in[3];
    pc->res_first = cp_node_attr_int(k->node, "residual_first", 0) != 0;
    return CP_OK;
}
