/*
 * Conv, ConvTranspose and FusedConv on oneDNN (convolution and
 * deconvolution primitives), 1-D to 3-D, with groups, strides, pads
 * (explicit or auto_pad), dilations and an optional bias; FusedConv adds
 * its activation and residual as post-ops (eltwise, sum), in the order
 * residual_first says.
 *
 * Layout rule. The source, destination and residual memory descriptors
 * follow the tensors' layout tags (layout.h): NCHW (or untagged) is plain
 * nchw, NHWC is nhwc, and the blocked tags are nChw8c / nChw16c. The
 * kernel never picks an activation format of its own and never reorders
 * activations behind the plan's back: with layout_policy nchw every tensor
 * stays NCHW and the primitive runs on plain nchw, so the layout knob
 * changes what really runs and the TransData nodes the layout pass inserts
 * show in traces what a layout change costs. (An earlier version let the
 * primitive choose a blocked format and reordered around it inside the
 * kernel, which hid that cost.) The logical shape stays [N, C, H, W]
 * whatever the layout; blocked tags are only used when C is a multiple of
 * the block, so byte sizes never change.
 *
 * One exception: when the tensors' formats leave oneDNN with nothing but its
 * reference implementation (a plain loop; e.g. a blocked source into a
 * plain 4-channel destination), the primitive picks its formats and the
 * kernel reorders around it, since that is faster by far than the loop.
 * The layout pass avoids handing such pairs to a conv.
 *
 * Weights are not activations: the primitive chooses their format, and
 * constant weights are reordered into it once, in prepare, into memory the
 * kernel owns; weights that arrive at run time are reordered on every run.
 *
 * Precision. A node with compute_precision "bf16" (set by the precision
 * pass) runs with bf16 source and weights: the weights are converted once
 * at prepare, the source is converted into the shared scratch at run time
 * (cp_dk_step_to_bf16 when only the element type changes), and the
 * destination, bias and residual stay f32, so tensors are f32 at the
 * node's boundary. oneDNN 2.6 has bf16 primitives only from avx512_core
 * up: the kernels' `isa` (cp_dk_isa_bf16) says so for bf16 nodes, and the
 * plan passes them over on a lesser CPU instead of failing in prepare.
 */
#include "runner/cpu/conv_geom.h"
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/fused_act.h"
#include "runner/cpu/layout.h"

#include <stdlib.h>
#include <string.h>

/* Whether the node asks for bf16 compute; false for unknown values too
 * (supports rejects those). */
static bool wants_bf16(const struct cp_node *n)
{
    return strcmp(cp_node_attr_string(n, "compute_precision", "fp32"), "bf16") == 0;
}

static bool precision_ok(const struct cp_node *n)
{
    const char *p = cp_node_attr_string(n, "compute_precision", "fp32");
    return strcmp(p, "fp32") == 0 || strcmp(p, "bf16") == 0 || strcmp(p, "int8") == 0;
}

/* A tensor oneDNN can describe as laid out: plain at any rank, NHWC and
 * blocked at rank 4 when the shape fits the layout. */
static bool layout_ok(const struct cp_tensor *t)
{
    return cp_tensor_is_plain(t) || (t->shape.rank == 4 && cp_layout_fits(t->layout, &t->shape) &&
                                     cp_dk_layout_tag(t->layout) != dnnl_format_tag_undef);
}

static bool conv_supports_common(const struct cp_graph *g, const struct cp_node *n, bool transpose,
                                 bool fused)
{
    size_t max_in = fused ? 4 : 3;
    if (n->n_inputs < 2 || n->n_inputs > max_in || n->n_outputs != 1 ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) || !precision_ok(n))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *w = cp_fk_in(g, n, 1), *y = cp_fk_out(g, n, 0);
    const struct cp_tensor *b = cp_fk_in(g, n, 2), *r = fused ? cp_fk_in(g, n, 3) : NULL;
    struct cp_conv_geom gm;
    if (!cp_conv_geom(n, x, w, y, transpose, &gm) || !layout_ok(x) || !layout_ok(y) ||
        !cp_tensor_is_plain(w))
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
    if (fused && cp_act_of(n).kind == CP_ACT_BAD)
        return false;
    /* int8: constant weights, one scale per output channel (not transposed) */
    struct cp_dk_int8 q8;
    if (!cp_dk_int8_of(n, &q8) || (q8.on && (transpose || w->kind != CP_TENSOR_INITIALIZER ||
                                             !w->data || q8.n_w != (size_t)M)))
        return false;
    /* The residual is read as the destination is laid out. */
    return !r || (r->dtype == CP_DTYPE_F32 && cp_shape_equal(&r->shape, &y->shape) &&
                  (r->layout == y->layout || (cp_tensor_is_plain(r) && cp_tensor_is_plain(y))));
}

static bool conv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return conv_supports_common(g, n, false, false);
}

static bool deconv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return conv_supports_common(g, n, true, false);
}

static bool fconv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return conv_supports_common(g, n, false, true);
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

/* The post-ops of a FusedConv: activation and residual, in order. The
 * residual is a sum post-op (the destination is first filled with the
 * residual): oneDNN 2.6's gemm-based convolution, which plain layouts get,
 * applies a full-tensor binary post-op element by element and ran 10 to 25
 * times slower than the convolution itself; sum is fused into its
 * accumulation. OUT: *po (NULL when there are none). */
static dnnl_status_t fused_post_ops(const struct cp_kexec *k, bool residual, bool no_act,
                                    dnnl_post_ops_t *po)
{
    *po = NULL;
    struct cp_act a = cp_act_of(k->node);
    bool has_act = !no_act && cp_act_has_dnnl(&a);
    int n_act;
    bool first = cp_node_attr_int(k->node, "residual_first", 0) != 0;
    if (!has_act && !residual)
        return dnnl_success;
    dnnl_status_t s = dnnl_post_ops_create(po);
    if (s == dnnl_success && residual && first)
        s = dnnl_post_ops_append_sum(*po, 1.0f);
    if (s == dnnl_success && has_act)
        s = cp_act_dnnl_append(&a, *po, &n_act);
    if (s == dnnl_success && residual && !first)
        s = dnnl_post_ops_append_sum(*po, 1.0f);
    return s;
}

/* What a convolution primitive descriptor is made from, but for the
 * source and destination descriptors. */
struct pd_args {
    struct cp_kexec *k;
    bool transpose, fused, residual;
    bool no_act; /* leave the activation out of the post-ops (split_act below) */
    const dnnl_memory_desc_t *w_md, *b_md;
    const struct cp_conv_geom *gm;
    const float *oscales; /* int8: x_scale * w_scales[c], n_oscales of them; else NULL */
    int64_t n_oscales;
};

static dnnl_status_t make_pd(const struct pd_args *a, const dnnl_memory_desc_t *x_md,
                             const dnnl_memory_desc_t *y_md, dnnl_engine_t engine,
                             dnnl_primitive_desc_t *pd)
{
    const struct cp_conv_geom *gm = a->gm;
    dnnl_status_t s;
    union {
        dnnl_convolution_desc_t conv;
        dnnl_deconvolution_desc_t deconv;
    } od;
    *pd = NULL;
    dnnl_dims_t st = {0}, dl = {0}, pl = {0}, pr = {0};
    for (int i = 0; i < gm->ns; i++) {
        st[i] = gm->strides[i];
        dl[i] = gm->dil[i];
        pl[i] = gm->pl[i];
        pr[i] = gm->pr[i];
    }
    if (!a->transpose)
        s = dnnl_dilated_convolution_forward_desc_init(&od.conv, dnnl_forward_inference,
                                                       dnnl_convolution_direct, x_md, a->w_md,
                                                       a->b_md, y_md, st, dl, pl, pr);
    else
        s = dnnl_dilated_deconvolution_forward_desc_init(&od.deconv, dnnl_forward_inference,
                                                         dnnl_deconvolution_direct, x_md, a->w_md,
                                                         a->b_md, y_md, st, dl, pl, pr);
    if (s != dnnl_success)
        return s;
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    dnnl_post_ops_t po = NULL;
    if (!attr)
        return dnnl_out_of_memory;
    if (a->oscales)
        s = dnnl_primitive_attr_set_output_scales(attr, a->n_oscales, 1 << 1, a->oscales);
    if (s == dnnl_success && a->fused)
        s = fused_post_ops(a->k, a->residual, a->no_act, &po);
    if (s == dnnl_success && po)
        s = dnnl_primitive_attr_set_post_ops(attr, po);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(pd, &od, attr, engine, NULL);
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    return s;
}

/* Whether oneDNN fell back to its reference (plain loop) implementation. */
static bool is_reference_impl(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           impl && strncmp(impl, "ref", 3) == 0;
}

/* Build the descriptor of A on X_MD, Y_MD and put it in *PD in place of
 * the one there, unless it fails or gets the reference implementation
 * too. Whether it replaced it. */
static bool replace_pd(const struct pd_args *a, const dnnl_memory_desc_t *x_md,
                       const dnnl_memory_desc_t *y_md, dnnl_engine_t engine,
                       dnnl_primitive_desc_t *pd)
{
    dnnl_primitive_desc_t pd2 = NULL;
    if (make_pd(a, x_md, y_md, engine, &pd2) != dnnl_success || is_reference_impl(pd2)) {
        dnnl_primitive_desc_destroy(pd2);
        return false;
    }
    dnnl_primitive_desc_destroy(*pd);
    *pd = pd2;
    return true;
}

/* Whether oneDNN picked its gemm-based convolution (im2col + sgemm), which
 * plain NCHW and NHWC tensors get. */
static bool is_gemm_impl(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           impl && strstr(impl, "gemm:") != NULL; /* "x64:gemm:jit" */
}

/* The activation of a FusedConv as in-place eltwise steps on the
 * destination (memory Y, descriptor Y_MD), one per oneDNN part. */
static enum cp_status add_act_steps(struct cp_dk_prog *p, const struct cp_kexec *k,
                                    const dnnl_memory_desc_t *y_md, int y)
{
    struct cp_act a = cp_act_of(k->node);
    dnnl_alg_kind_t alg;
    float alpha, beta;
    for (int part = 0; cp_act_dnnl_part(&a, part, &alg, &alpha, &beta); part++) {
        dnnl_eltwise_desc_t ed;
        dnnl_primitive_desc_t epd = NULL;
        dnnl_primitive_attr_t attr = cp_dk_attr_create();
        if (!attr)
            return CP_ERR_NOMEM;
        dnnl_status_t s =
            dnnl_eltwise_forward_desc_init(&ed, dnnl_forward_inference, alg, y_md, alpha, beta);
        if (s == dnnl_success)
            s = dnnl_primitive_desc_create(&epd, &ed, attr, p->engine, NULL);
        dnnl_primitive_attr_destroy(attr);
        if (s != dnnl_success)
            return CP_ERR_INTERNAL;
        int ids[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
        int mems[2] = {y, y};
        enum cp_status st = cp_dk_step_add(p, epd, 2, ids, mems);
        dnnl_primitive_desc_destroy(epd);
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

/* The step after a convolution whose residual could not be a post-op:
 * DST = the residual at RES_PTR + conv (memory CONV, descriptor CONV_MD).
 * The residual is the first source, which oneDNN lets the destination
 * share (memplan.c may give both one buffer). */
static enum cp_status add_residual(struct cp_dk_prog *p, const dnnl_memory_desc_t *conv_md,
                                   int conv, const dnnl_memory_desc_t *res_md, void *res_ptr,
                                   const dnnl_memory_desc_t *dst_md, int dst)
{
    dnnl_binary_desc_t bd;
    dnnl_primitive_desc_t bpd = NULL;
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    if (!attr)
        return CP_ERR_NOMEM;
    dnnl_status_t s = dnnl_binary_desc_init(&bd, dnnl_binary_add, res_md, conv_md, dst_md);
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&bpd, &bd, attr, p->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    if (s != dnnl_success)
        return CP_ERR_INTERNAL;
    int ids[3] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_DST};
    int mems[3] = {cp_dk_mem_user(p, res_md, res_ptr), conv, dst};
    enum cp_status st = cp_dk_step_add(p, bpd, 3, ids, mems);
    dnnl_primitive_desc_destroy(bpd);
    return st;
}

static enum cp_status conv_prepare_common(struct cp_kexec *k, struct cp_diag *d, bool transpose,
                                          bool fused)
{
    const struct cp_tensor *x = k->in[0], *w = k->in[1], *y = k->out[0];
    const struct cp_tensor *bias = k->node->n_inputs > 2 ? k->in[2] : NULL;
    const struct cp_tensor *res = fused && k->node->n_inputs > 3 ? k->in[3] : NULL;
    struct cp_conv_geom gm;
    if (!cp_conv_geom(k->node, x, w, y, transpose, &gm))
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "node '%s': convolution geometry unsupported",
                           k->node->name);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    bool bf16 = wants_bf16(k->node);
    struct cp_dk_int8 q8;
    cp_dk_int8_of(k->node, &q8);
    /* compute types of src and weights */
    dnnl_data_type_t cdt = bf16 ? dnnl_bf16 : dnnl_f32, xdt = cdt, wdt = cdt;
    if (q8.on) {
        xdt = q8.x_signed ? dnnl_s8 : dnnl_u8;
        wdt = dnnl_s8;
    }
    dnnl_dims_t yd;
    cp_fk_dims(y, yd);
    dnnl_memory_desc_t x_user, x_md, y_md, w_user, w_any, b_md, r_md;
    if (!cp_dk_md_tensor(&x_user, x, dnnl_f32) || !cp_dk_md_tensor(&x_md, x, xdt) ||
        !cp_dk_md_tensor(&y_md, y, dnnl_f32) || !weights_md(&w_user, w, gm.group, transpose) ||
        (res && !cp_dk_md_tensor(&r_md, res, dnnl_f32)))
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    dnnl_memory_desc_init_by_tag(&w_any, w_user.ndims, w_user.dims, wdt, dnnl_format_tag_any);
    if (bias) {
        dnnl_dims_t bd = {yd[1]};
        dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_x);
    }
    /* int8: the output scales, and the bias in accumulator units (oneDNN 2
     * adds the bias to the s32 sum before scaling) */
    float *oscales = NULL;
    int bm_int8 = -1;
    if (q8.on) {
        oscales = malloc((size_t)yd[1] * sizeof *oscales);
        if (!oscales)
            return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
        for (int64_t c = 0; c < yd[1]; c++)
            oscales[c] = q8.x_scale * q8.w_scales[c];
        void *bh = NULL;
        if (bias && ((bm_int8 = cp_dk_mem_owned(p, &b_md)) < 0 ||
                     dnnl_memory_get_data_handle(p->mems[bm_int8], &bh) != dnnl_success || !bh)) {
            free(oscales);
            return cp_dk_fail(k, d, "memory", dnnl_out_of_memory);
        }
        for (int64_t c = 0; bias && c < yd[1]; c++)
            ((float *)bh)[c] = ((const float *)k->in_data[2])[c] / oscales[c];
    }
    dnnl_primitive_desc_t pd = NULL;
    struct pd_args a = {k,      transpose,           fused, res != NULL, false,
                        &w_any, bias ? &b_md : NULL, &gm,   oscales,     q8.on ? yd[1] : 0};
    dnnl_status_t s = make_pd(&a, &x_md, &y_md, p->engine, &pd);
    if (s == dnnl_success && is_reference_impl(pd)) {
        /* The tags as given only have oneDNN's reference implementation
         * (e.g. blocked in, plain out with few channels): let the primitive
         * choose and reorder around it rather than run the slow loop. */
        dnnl_memory_desc_t x_any, y_any;
        dnnl_memory_desc_init_by_tag(&x_any, x_md.ndims, x_md.dims, xdt, dnnl_format_tag_any);
        dnnl_memory_desc_init_by_tag(&y_any, y_md.ndims, y_md.dims, dnnl_f32, dnnl_format_tag_any);
        replace_pd(&a, &x_any, &y_any, p->engine, &pd);
    }
    /* oneDNN 2.6's jit convolutions take a sum post-op only first: an
     * activation followed by the residual (EfficientNetV2's fused blocks)
     * got the reference loop, 200 times slower. Then the convolution runs
     * with its activation alone and a binary add follows it. */
    bool split_res = false;
    if (s == dnnl_success && res && is_reference_impl(pd)) {
        struct pd_args a2 = a;
        a2.residual = false;
        split_res = replace_pd(&a2, &x_md, &y_md, p->engine, &pd);
    }
    /* oneDNN 2.6's gemm convolution applies an eltwise post-op in a
     * separate, slow pass over the output: a FusedConv with ReLU6 on plain
     * NCHW ran 2 to 6 times slower than the Conv and Clip it replaced
     * (mobilenet_v2 with the layout pass off: +37%). Then the convolution
     * keeps its bias and residual sum, and the activation follows as
     * eltwise steps in place, so the fused node is never slower than its
     * unfused form; the trace names the split implementation. Only when
     * the residual is summed before the activation (or there is none), so
     * the order of the two stays as the node says. */
    bool split_act = false;
    struct cp_act act = cp_act_of(k->node);
    if (s == dnnl_success && fused && !split_res && cp_act_has_dnnl(&act) &&
        (!res || cp_node_attr_int(k->node, "residual_first", 0) != 0) && is_gemm_impl(pd)) {
        struct pd_args a2 = a;
        a2.no_act = true;
        split_act = replace_pd(&a2, &x_md, &y_md, p->engine, &pd);
    }
    if (s != dnnl_success) {
        free(oscales);
        return cp_dk_fail(k, d, "convolution primitive descriptor", s);
    }
    enum cp_status st = CP_ERR_INTERNAL;
    const dnnl_memory_desc_t *w_md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    /* Weights: packed once if constant, else reordered each run; int8
     * weights are quantized first, into memory the program owns. */
    int wm_user = cp_dk_mem_user(p, &w_user, k->in_data[1]), wm;
    bool w_const = w->kind == CP_TENSOR_INITIALIZER;
    if (q8.on) {
        dnnl_memory_desc_t w_s8 = w_user;
        w_s8.data_type = dnnl_s8;
        void *wh = NULL;
        int64_t wn = cp_shape_numel(&w->shape), m = yd[1];
        wm_user = cp_dk_mem_owned(p, &w_s8);
        if (wm_user < 0 || dnnl_memory_get_data_handle(p->mems[wm_user], &wh) != dnnl_success ||
            !wh)
            goto out;
        cp_dk_quantize_weights(k->in_data[1], wh, wn, q8.w_scales, m, wn / m);
        w_user = w_s8;
    }
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
    /* Source: read in place, or converted (to bf16, or to the format of
     * the fallback above) in scratch. */
    const dnnl_memory_desc_t *xq = dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0);
    const dnnl_memory_desc_t *yq = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int xm = cp_dk_mem_user(p, &x_user, k->in_data[0]);
    if (!dnnl_memory_desc_equal(xq, &x_user)) {
        int xb = cp_dk_mem_scratch(p, xq);
        if ((st = q8.on  ? cp_dk_step_quantize(p, xm, xb, 1.0f / q8.x_scale)
                  : bf16 ? cp_dk_step_to_bf16(p, xm, xb)
                         : cp_dk_step_reorder(p, xm, xb)) != CP_OK)
            goto out;
        xm = xb;
    }
    int ym_user = cp_dk_mem_user(p, &y_md, k->out_data[0]), ym = ym_user;
    if (!dnnl_memory_desc_equal(yq, &y_md) || split_res)
        ym = cp_dk_mem_scratch(p, yq); /* split: the residual may share the output */
    /* The residual goes into the destination first, for the sum post-op
     * (a oneDNN reorder between equal descriptors is a parallel copy). */
    if (res && !split_res && (ym != ym_user || k->in_data[3] != k->out_data[0]) &&
        (st = cp_dk_step_reorder(p, cp_dk_mem_user(p, &r_md, k->in_data[3]), ym)) != CP_OK)
        goto out;
    int ids[4] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, 0};
    int mems[4] = {xm, wm, ym, -1};
    int nargs = 3;
    if (bias) {
        ids[nargs] = DNNL_ARG_BIAS;
        mems[nargs++] = q8.on ? bm_int8 : cp_dk_mem_user(p, &b_md, k->in_data[2]);
    }
    if ((st = cp_dk_step_add(p, pd, nargs, ids, mems)) != CP_OK)
        goto out;
    if (split_res) {
        st = add_residual(p, yq, ym, &r_md, k->in_data[3], &y_md, ym_user);
        goto out_built;
    }
    if (ym != ym_user && (st = cp_dk_step_reorder(p, ym, ym_user)) != CP_OK)
        goto out;
    if (split_act) {
        if ((st = add_act_steps(p, k, &y_md, ym_user)) != CP_OK)
            goto out;
        k->impl = "onednn:fused_conv+eltwise";
    }
    st = CP_OK;
out_built:
    if (st == CP_OK)
        k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
out:
    dnnl_primitive_desc_destroy(pd);
    free(oscales);
    if (st != CP_OK)
        return cp_diag_set(d, st, "node '%s' (%s): could not build the oneDNN program",
                           k->node->name, cp_op_name(k->node->op));
    if (q8.on)
        k->impl = k->impl && strcmp(k->impl, "onednn:fused_conv+eltwise") == 0
                      ? "onednn:fused_conv+eltwise:int8"
                  : fused ? "onednn:fused_conv:int8"
                          : "onednn:conv:int8";
    return CP_OK;
}

static enum cp_status conv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return conv_prepare_common(k, d, false, false);
}

static enum cp_status deconv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return conv_prepare_common(k, d, true, false);
}

static enum cp_status fconv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    return conv_prepare_common(k, d, false, true);
}

const struct cp_kernel cp_dnnl_conv = {"onednn:conv", CP_OP_CONV,       conv_supports,
                                       conv_prepare,  cp_dk_kernel_run, cp_dk_kernel_release,
                                       cp_dk_isa_bf16};
const struct cp_kernel cp_dnnl_deconv = {
    "onednn:deconv",  CP_OP_CONV_TRANSPOSE, deconv_supports, deconv_prepare,
    cp_dk_kernel_run, cp_dk_kernel_release, cp_dk_isa_bf16};
const struct cp_kernel cp_dnnl_fused_conv = {
    "onednn:fused_conv", CP_OP_FUSED_CONV,     fconv_supports, fconv_prepare,
    cp_dk_kernel_run,    cp_dk_kernel_release, cp_dk_isa_bf16};
