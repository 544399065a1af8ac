/*
 * Conv and ConvTranspose on oneDNN (convolution and deconvolution
 * primitives), f32, 1-D to 3-D, with groups, strides, pads (explicit or
 * auto_pad), dilations and an optional bias.
 *
 * Activations stay plain (NCHW) in the arena. The primitive chooses its
 * weight format; constant weights are reordered into it once, in prepare,
 * into memory the kernel owns; weights that arrive at run time are
 * reordered on every run. Source and destination can either be plain (the
 * primitive reads and writes the arena directly) or in the primitive's
 * preferred blocked format with reorders around it in the shared scratch;
 * CONV_BLOCKED_IO picks, and bench numbers decided (see the report in
 * fast_kernels.c).
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"

#include <string.h>

#ifndef CONV_BLOCKED_IO
#define CONV_BLOCKED_IO 1
#endif

struct conv_geom {
    int ns; /* spatial dims */
    int64_t group;
    dnnl_dims_t strides, dil, pl, pr;
};

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

/* Geometry of a Conv (transpose = false) or ConvTranspose, checked against
 * the concrete shapes. False when oneDNN cannot express it. */
static bool conv_geom(const struct cp_node *n, const struct cp_tensor *x, const struct cp_tensor *w,
                      const struct cp_tensor *y, bool transpose, struct conv_geom *gm)
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

static bool conv_supports_common(const struct cp_graph *g, const struct cp_node *n, bool transpose)
{
    if (n->n_inputs < 2 || n->n_inputs > 3 || n->n_outputs != 1 ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *w = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    const struct cp_tensor *b = cp_fk_in(g, n, 2);
    struct conv_geom gm;
    if (!conv_geom(n, x, w, y, transpose, &gm))
        return false;
    int64_t G = gm.group, C = x->shape.dims[1].value, M = y->shape.dims[1].value;
    int64_t w0 = w->shape.dims[0].value, w1 = w->shape.dims[1].value;
    if (C % G || M % G)
        return false;
    if (!transpose && (w0 != M || w1 * G != C))
        return false;
    if (transpose && (w0 != C || w1 * G != M))
        return false;
    if (b && (b->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&b->shape) ||
              cp_shape_numel(&b->shape) != M))
        return false;
    return true;
}

static bool conv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return conv_supports_common(g, n, false);
}

static bool deconv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return conv_supports_common(g, n, true);
}

/* The user's weight layout as a oneDNN descriptor: Conv weights are
 * [G*O, I, k...] (goihw when grouped), ConvTranspose's are [G*I, O, k...],
 * described with strides. */
static bool weights_md(dnnl_memory_desc_t *md, const struct cp_tensor *w, int64_t G, bool transpose)
{
    int r = w->shape.rank, ns = r - 2;
    int64_t ksz = 1;
    for (int i = 0; i < ns; i++)
        ksz *= w->shape.dims[2 + i].value;
    dnnl_dims_t dims, st;
    int nd = 0;
    int64_t a = w->shape.dims[0].value, b = w->shape.dims[1].value;
    if (!transpose) { /* [G*O, I, k] */
        int64_t O = a / G, I = b;
        if (G > 1) {
            dims[nd] = G;
            st[nd++] = O * I * ksz;
        }
        dims[nd] = O;
        st[nd++] = I * ksz;
        dims[nd] = I;
        st[nd++] = ksz;
    } else { /* [G*I, O, k]: oneDNN wants (G,) O, I */
        int64_t I = a / G, O = b;
        if (G > 1) {
            dims[nd] = G;
            st[nd++] = I * O * ksz;
        }
        dims[nd] = O;
        st[nd++] = ksz;
        dims[nd] = I;
        st[nd++] = O * ksz;
    }
    int64_t s = 1;
    for (int i = ns - 1; i >= 0; i--) {
        dims[nd + i] = w->shape.dims[2 + i].value;
        st[nd + i] = s;
        s *= w->shape.dims[2 + i].value;
    }
    nd += ns;
    return dnnl_memory_desc_init_by_strides(md, nd, dims, dnnl_f32, st) == dnnl_success;
}

static dnnl_format_tag_t plain_tag(int r)
{
    return r == 3 ? dnnl_ncw : r == 4 ? dnnl_nchw : dnnl_ncdhw;
}

static enum cp_status conv_prepare_common(struct cp_kexec *k, struct cp_diag *d, bool transpose)
{
    const struct cp_tensor *x = k->in[0], *w = k->in[1], *y = k->out[0];
    const struct cp_tensor *bias = k->node->n_inputs > 2 ? k->in[2] : NULL;
    struct conv_geom gm;
    if (!conv_geom(k->node, x, w, y, transpose, &gm))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': convolution geometry unsupported",
                           k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    int r = x->shape.rank;
    dnnl_dims_t xd, yd; /* oneDNN reads DNNL_MAX_NDIMS entries */
    cp_fk_dims(x, xd);
    cp_fk_dims(y, yd);
    dnnl_memory_desc_t x_user, y_user, w_user, b_md, x_any, y_any, w_any;
    if (dnnl_memory_desc_init_by_tag(&x_user, r, xd, dnnl_f32, plain_tag(r)) != dnnl_success ||
        dnnl_memory_desc_init_by_tag(&y_user, r, yd, dnnl_f32, plain_tag(r)) != dnnl_success ||
        !weights_md(&w_user, w, gm.group, transpose))
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    const dnnl_memory_desc_t *w_ud = &w_user;
    dnnl_memory_desc_init_by_tag(&w_any, w_ud->ndims, w_ud->dims, dnnl_f32, dnnl_format_tag_any);
    bool blocked = CONV_BLOCKED_IO;
    dnnl_memory_desc_init_by_tag(&x_any, r, xd, dnnl_f32,
                                 blocked ? dnnl_format_tag_any : plain_tag(r));
    dnnl_memory_desc_init_by_tag(&y_any, r, yd, dnnl_f32,
                                 blocked ? dnnl_format_tag_any : plain_tag(r));
    if (bias) {
        dnnl_dims_t bd = {yd[1]};
        dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x);
    }
    dnnl_status_t s;
    union {
        dnnl_convolution_desc_t conv;
        dnnl_deconvolution_desc_t deconv;
    } od;
    if (!transpose)
        s = dnnl_dilated_convolution_forward_desc_init(
            &od.conv, dnnl_forward_inference, dnnl_convolution_direct, &x_any, &w_any,
            bias ? &b_md : NULL, &y_any, gm.strides, gm.dil, gm.pl, gm.pr);
    else
        s = dnnl_dilated_deconvolution_forward_desc_init(
            &od.deconv, dnnl_forward_inference, dnnl_deconvolution_direct, &x_any, &w_any,
            bias ? &b_md : NULL, &y_any, gm.strides, gm.dil, gm.pl, gm.pr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "convolution descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_primitive_desc_t pd = NULL;
    s = attr ? dnnl_primitive_desc_create(&pd, &od, attr, p->engine, NULL) : dnnl_out_of_memory;
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "convolution primitive descriptor", s);
    enum cp_status st = CP_ERR_INTERNAL;
    const dnnl_memory_desc_t *x_md = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *y_md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    /* Weights: packed once if constant, else reordered each run. */
    int wm_user = cp_dk_mem_user(p, &w_user, k->in_data[1]), wm;
    bool w_const = w->kind == CP_TENSOR_INITIALIZER;
    if (dnnl_memory_desc_equal(w_md, &w_user)) {
        wm = wm_user;
    } else if (w_const) {
        wm = cp_dk_mem_owned(p, w_md);
        if ((st = cp_dk_reorder_now(p, wm_user, wm)) != CP_OK)
            goto out;
    } else {
        wm = cp_dk_mem_scratch(p, w_md);
        if ((st = cp_dk_step_reorder(p, wm_user, wm)) != CP_OK)
            goto out;
    }
    int xm_user = cp_dk_mem_user(p, &x_user, k->in_data[0]), xm = xm_user;
    if (!dnnl_memory_desc_equal(x_md, &x_user)) {
        xm = cp_dk_mem_scratch(p, x_md);
        if ((st = cp_dk_step_reorder(p, xm_user, xm)) != CP_OK)
            goto out;
    }
    int ym_user = cp_dk_mem_user(p, &y_user, k->out_data[0]), ym = ym_user;
    if (!dnnl_memory_desc_equal(y_md, &y_user))
        ym = cp_dk_mem_scratch(p, y_md);
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS};
    int mems[4] = {xm, wm, ym, -1};
    if (bias)
        mems[3] = cp_dk_mem_user(p, &b_md, k->in_data[2]);
    if ((st = cp_dk_step_add(p, pd, bias ? 4 : 3, ids, mems)) != CP_OK)
        goto out;
    if (ym != ym_user && (st = cp_dk_step_reorder(p, ym, ym_user)) != CP_OK)
        goto out;
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
    st = CP_OK;
out:
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_diag_set(d, st, "node '%s' (%s): could not build the oneDNN program",
                           k->node->name, cp_op_name(k->node->op));
    return CP_OK;
}

static enum cp_status conv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return conv_prepare_common(k, d, false);
}

static enum cp_status deconv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return conv_prepare_common(k, d, true);
}

const struct cp_kernel cp_dnnl_conv = {"onednn:conv", CP_OP_CONV,       conv_supports,
                                       conv_prepare,  cp_dk_kernel_run, cp_dk_kernel_release};
const struct cp_kernel cp_dnnl_deconv = {"onednn:deconv",  CP_OP_CONV_TRANSPOSE,
                                         deconv_supports,  deconv_prepare,
                                         cp_dk_kernel_run, cp_dk_kernel_release};
