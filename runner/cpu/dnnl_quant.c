/*
 * QLinearConv, ConvInteger, QLinearMatMul and MatMulInteger on oneDNN's
 * int8 primitives: u8 or s8 source, s8 weights, s32 accumulation, the
 * requantisation (x_scale * w_scale[c] / y_scale, per tensor or per output
 * channel) as output scales, the source and destination zero points as
 * zero-point attributes, QLinearConv's int32 bias as the primitive's s32
 * bias (oneDNN adds it before the scale, as ONNX does). oneDNN picks the
 * ISA (VNNI where the CPU has it, AVX2 otherwise; see q_isa for what
 * that means for the weights); rounding is to nearest
 * even and the result saturates, as ONNX specifies.
 *
 * What oneDNN cannot express is left to the reference kernels: weight zero
 * points other than 0 (oneDNN has no per-channel weight zero point; ONNX
 * Runtime's quantizer and AMCT write symmetric s8 weights), u8 weights,
 * run-time weights or parameters, per-row parameters of a matmul's left
 * operand, convolutions other than 2-D.
 *
 * Convolutions run in the layout the primitive prefers (NHWC for int8):
 * the source and destination are reordered around it in the shared scratch.
 */
#include "runner/cpu/dnnl_util.h"
#include "runner/cpu/fast_util.h"
#include "runner/cpu/ref_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool plain(const struct cp_tensor *t)
{
    return !t || t->layout == CP_LAYOUT_UNDEF || t->layout == CP_LAYOUT_ND ||
           t->layout == CP_LAYOUT_NCHW;
}

/* Input i when present (not absent, not empty), else NULL. */
static const struct cp_tensor *opt(const struct cp_graph *g, const struct cp_node *n, int i)
{
    return i >= 0 && cp_ref_has_input(g, n, (size_t)i) ? cp_ref_in(g, n, (size_t)i) : NULL;
}

static bool is_const(const struct cp_tensor *t)
{
    return !t || (t->kind == CP_TENSOR_INITIALIZER && t->data);
}

/* Every element of an optional integer initializer is 0. */
static bool all_zero(const struct cp_tensor *t)
{
    if (!t)
        return true;
    int64_t n = cp_ref_numel(&t->shape);
    for (int64_t i = 0; i < n; i++)
        if (cp_elem_load_i64(t->data, t->dtype, i) != 0)
            return false;
    return true;
}

/* Input positions: the QLinear forms and the Integer forms. */
struct qpos {
    int x, xs, xzp, w, ws, wzp, ys, yzp, bias;
};
static const struct qpos qlinear = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const struct qpos integer = {0, -1, 2, 1, -1, 3, -1, -1, -1};

static const struct qpos *pos_of(enum cp_op op)
{
    return op == CP_OP_QLINEAR_CONV || op == CP_OP_QLINEAR_MATMUL ? &qlinear : &integer;
}

/* The checks both forms share: s8 constant weights with zero points 0,
 * constant per-tensor x and y parameters. */
static bool common_ok(const struct cp_graph *g, const struct cp_node *n, const struct qpos *P)
{
    for (size_t i = 0; i < n->n_inputs; i++)
        if (!plain(cp_ref_in(g, n, i)))
            return false;
    if (!plain(cp_ref_out(g, n, 0)))
        return false;
    const struct cp_tensor *x = opt(g, n, P->x), *w = opt(g, n, P->w);
    if (!x || !w || w->dtype != CP_DTYPE_I8 || !is_const(w))
        return false;
    const struct cp_tensor *wzp = opt(g, n, P->wzp);
    if (!is_const(wzp) || !all_zero(wzp))
        return false;
    int ps[] = {P->xs, P->xzp, P->ws, P->ys, P->yzp};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
        const struct cp_tensor *t = opt(g, n, ps[i]);
        if (!is_const(t))
            return false;
    }
    const struct cp_tensor *xzp = opt(g, n, P->xzp), *yzp = opt(g, n, P->yzp);
    const struct cp_tensor *xs = opt(g, n, P->xs), *ys = opt(g, n, P->ys);
    const struct cp_tensor *one[] = {xzp, yzp, xs, ys};
    for (size_t i = 0; i < 4; i++)
        if (one[i] && cp_ref_numel(&one[i]->shape) != 1)
            return false;
    return true;
}

static float scalar_f(const struct cp_kexec *k, int i, int64_t j)
{
    const struct cp_tensor *t = k->in[i];
    return (float)cp_elem_load_f64(k->in_data[i], t->dtype, cp_ref_numel(&t->shape) == 1 ? 0 : j);
}

static int32_t zp_of(const struct cp_kexec *k, int i)
{
    if (i < 0 || !cp_ref_has_input(k->g, k->node, (size_t)i))
        return 0;
    return (int32_t)cp_elem_load_i64(k->in_data[i], k->in[i]->dtype, 0);
}

/* Output scales (QLinear forms) and zero points onto attr. `channels`:
 * the length of a per-channel weight scale; `mask` its oneDNN mask. The
 * scales live in `buf` (channels floats), which must outlive the call. */
static dnnl_status_t set_quant_attr(struct cp_kexec *k, const struct qpos *P,
                                    dnnl_primitive_attr_t a, int64_t channels, int mask, float *buf)
{
    dnnl_status_t s = dnnl_success;
    if (P->ys >= 0) {
        int64_t nw = cp_ref_numel(&k->in[P->ws]->shape);
        float xs = scalar_f(k, P->xs, 0), ys = scalar_f(k, P->ys, 0);
        for (int64_t c = 0; c < nw; c++)
            buf[c] = xs * scalar_f(k, P->ws, c) / ys;
        (void)channels;
        s = dnnl_primitive_attr_set_output_scales(a, nw, nw == 1 ? 0 : mask, buf);
    }
    /* The destination zero point as a run-time value. The source zero
     * point is not given to oneDNN: 2.6's AVX2 int8 matmul and convolution
     * computed wrong results with one (measured, fixed and run-time
     * values alike), so it is folded into an s32 bias instead (the
     * convolution's padding is then made explicit, with x_zp). */
    static const int32_t rt = DNNL_RUNTIME_S32_VAL;
    int32_t yzp = P->yzp >= 0 ? zp_of(k, P->yzp) : 0;
    if (s == dnnl_success && yzp != 0)
        s = dnnl_primitive_attr_set_zero_points(a, DNNL_ARG_DST, 1, 0, &rt);
    return s;
}

/* The run-time zero-point arguments set_quant_attr asked for: one s32
 * memory each, owned by the program, holding the value. Appends to
 * ids/mems. */
static bool add_zp_args(struct cp_kexec *k, struct cp_dk_prog *p, const struct qpos *P, int *ids,
                        int *mems, int *nargs)
{
    int32_t v[2] = {0, P->yzp >= 0 ? zp_of(k, P->yzp) : 0};
    int args[2] = {DNNL_ARG_SRC, DNNL_ARG_DST};
    dnnl_dims_t one = {1};
    dnnl_memory_desc_t md;
    if (dnnl_memory_desc_init_by_tag(&md, 1, one, dnnl_s32, dnnl_a) != dnnl_success)
        return false;
    for (int i = 0; i < 2; i++) {
        if (v[i] == 0)
            continue;
        int m = cp_dk_mem_owned(p, &md);
        void *h = NULL;
        if (m < 0 || dnnl_memory_get_data_handle(p->mems[m], &h) != dnnl_success || !h)
            return false;
        memcpy(h, &v[i], sizeof v[i]);
        ids[*nargs] = DNNL_ARG_ATTR_ZERO_POINTS | args[i];
        mems[(*nargs)++] = m;
    }
    return true;
}

/* oneDNN's int8 kernels without VNNI (AVX2, AVX-512 without VNNI) add
 * pairs of u8 * s8 products into s16 with saturation (vpmaddubsw), which
 * is exact only while 2 * 255 * |w| fits in s16: weights of at most 7
 * bits, as ONNX Runtime's quantizer writes with reduce_range. Wider
 * weights need VNNI (vpdpbusd accumulates in s32), so the kernels ask for
 * it for those nodes and the plan keeps the reference on other CPUs
 * (measured: wrong results on this AVX2 host with full-range weights). */
static const char *q_isa(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *w = opt(g, n, pos_of(n->op)->w);
    int64_t nw = w ? cp_ref_numel(&w->shape) : 0;
    const int8_t *v = w ? w->data : NULL;
    for (int64_t i = 0; i < nw; i++)
        if (v[i] > 64 || v[i] < -64)
            return "avx512_vnni";
    return NULL;
}

/* ---- convolutions ------------------------------------------------------------- */

static bool qconv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct qpos *P = pos_of(n->op);
    const struct cp_kernel *ref =
        n->op == CP_OP_QLINEAR_CONV ? &cp_ref_qlinear_conv : &cp_ref_conv_integer;
    if (!ref->supports(g, n) || !common_ok(g, n, P))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (x->shape.rank != 4 || cp_ref_numel(&y->shape) == 0)
        return false;
    return true;
}

/* The conv's geometry: the explicit padding the run applies. */
struct qconv_geom {
    int64_t n, c, h, w, m, kh, kw, oh, ow, group;
    int64_t pt, pl, hp, wp; /* begin padding, padded height and width */
    struct cp_ref_window win;
};

static void qconv_geom(const struct cp_kexec *k, struct qconv_geom *q)
{
    const struct qpos *P = pos_of(k->node->op);
    const struct cp_tensor *x = k->in[P->x], *w = k->in[P->w], *y = k->out[0];
    cp_ref_window_forward(k->node, &x->shape, &w->shape, &y->shape, &q->win);
    q->group = cp_node_attr_int(k->node, "group", 1);
    q->n = x->shape.dims[0].value, q->c = x->shape.dims[1].value;
    q->h = x->shape.dims[2].value, q->w = x->shape.dims[3].value;
    q->m = w->shape.dims[0].value, q->kh = w->shape.dims[2].value, q->kw = w->shape.dims[3].value;
    q->oh = y->shape.dims[2].value, q->ow = y->shape.dims[3].value;
    q->pt = q->win.pad_begin[1], q->pl = q->win.pad_begin[2];
    /* Just the rows and columns the windows read. */
    q->hp = (q->oh - 1) * q->win.stride[1] + (q->kh - 1) * q->win.dilation[1] + 1;
    q->wp = (q->ow - 1) * q->win.stride[2] + (q->kw - 1) * q->win.dilation[2] + 1;
}

/* Write x (NCHW) into the padded NHWC buffer, x_zp around it. */
static void pad_input(const struct cp_kexec *k, const struct qconv_geom *q, uint8_t *dst)
{
    const struct qpos *P = pos_of(k->node->op);
    const uint8_t *x = k->in_data[P->x];
    uint8_t zp = (uint8_t)zp_of(k, P->xzp);
    for (int64_t n = 0; n < q->n; n++)
        for (int64_t h = 0; h < q->hp; h++) {
            int64_t ih = h - q->pt;
            uint8_t *row = dst + (n * q->hp + h) * q->wp * q->c;
            if (ih < 0 || ih >= q->h) {
                memset(row, zp, (size_t)(q->wp * q->c));
                continue;
            }
            for (int64_t w = 0; w < q->wp; w++) {
                int64_t iw = w - q->pl;
                uint8_t *px = row + w * q->c;
                if (iw < 0 || iw >= q->w) {
                    memset(px, zp, (size_t)q->c);
                    continue;
                }
                const uint8_t *src = x + (n * q->c * q->h + ih) * q->w + iw;
                for (int64_t c = 0; c < q->c; c++)
                    px[c] = src[c * q->h * q->w];
            }
        }
}

static enum cp_status qconv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    const struct qpos *P = pos_of(k->node->op);
    const struct cp_tensor *x = k->in[P->x], *y = k->out[0];
    struct qconv_geom q;
    qconv_geom(k, &q);
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_dims_t xd = {q.n, q.c, q.hp, q.wp}, yd = {q.n, q.m, q.oh, q.ow};
    dnnl_dims_t wd = {q.group, q.m / q.group, q.c / q.group, q.kh, q.kw}, bd = {q.m};
    int wnd = q.group > 1 ? 5 : 4;
    if (q.group == 1) {
        wd[0] = q.m, wd[1] = q.c, wd[2] = q.kh, wd[3] = q.kw;
    }
    dnnl_dims_t strides = {q.win.stride[1], q.win.stride[2]};
    dnnl_dims_t dil = {q.win.dilation[1] - 1, q.win.dilation[2] - 1};
    dnnl_dims_t pads = {0, 0};
    dnnl_data_type_t xt = cp_dk_dtype(x->dtype), yt = cp_dk_dtype(y->dtype);
    dnnl_memory_desc_t x_md, y_user, w_user, b_md, y_any, w_any;
    if (dnnl_memory_desc_init_by_tag(&x_md, 4, xd, xt, dnnl_nhwc) ||
        dnnl_memory_desc_init_by_tag(&y_user, 4, yd, yt, dnnl_nchw) ||
        dnnl_memory_desc_init_by_tag(&w_user, wnd, wd, dnnl_s8,
                                     q.group > 1 ? dnnl_goihw : dnnl_oihw) ||
        dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_s32, dnnl_a) ||
        dnnl_memory_desc_init_by_tag(&y_any, 4, yd, yt, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&w_any, wnd, wd, dnnl_s8, dnnl_format_tag_any))
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    /* The padded source first: scratch offset 0, where the run writes it. */
    int xm = cp_dk_mem_scratch(p, &x_md);
    /* bias - x_zp * (sum of the weights of each output channel) */
    int bm = cp_dk_mem_owned(p, &b_md);
    void *bh = NULL;
    if (xm != 0 || bm < 0 || dnnl_memory_get_data_handle(p->mems[bm], &bh) != dnnl_success || !bh)
        return cp_dk_fail(k, d, "memory", dnnl_out_of_memory);
    const int8_t *wv = k->in_data[P->w];
    const int32_t *bias = cp_ref_has_input(k->g, k->node, (size_t)(P->bias >= 0 ? P->bias : 99))
                              ? k->in_data[P->bias]
                              : NULL;
    int64_t per = q.c / q.group * q.kh * q.kw;
    int32_t xzp = zp_of(k, P->xzp);
    for (int64_t m = 0; m < q.m; m++) {
        int64_t sum = 0;
        for (int64_t i = 0; i < per; i++)
            sum += wv[m * per + i];
        ((int32_t *)bh)[m] = (int32_t)((bias ? bias[m] : 0) - (int64_t)xzp * sum);
    }
    dnnl_convolution_desc_t cd;
    dnnl_status_t s = dnnl_dilated_convolution_forward_desc_init(
        &cd, dnnl_forward_inference, dnnl_convolution_direct, &x_md, &w_any, &b_md, &y_any, strides,
        dil, pads, pads);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "int8 convolution descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    if (!attr)
        return cp_dk_fail(k, d, "attribute", dnnl_out_of_memory);
    float *scales = calloc((size_t)(q.m > 0 ? q.m : 1), sizeof *scales);
    if (!scales) {
        dnnl_primitive_attr_destroy(attr);
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    }
    s = set_quant_attr(k, P, attr, q.m, 1 << 1, scales);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &cd, attr, p->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    free(scales);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "int8 convolution primitive descriptor", s);
    enum cp_status st = CP_ERR_INTERNAL;
    const dnnl_memory_desc_t *ww = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    const dnnl_memory_desc_t *yw = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int wm = cp_dk_mem_user(p, &w_user, k->in_data[P->w]);
    if (!dnnl_memory_desc_equal(ww, &w_user)) {
        int packed = cp_dk_mem_owned(p, ww);
        if ((st = cp_dk_reorder_now(p, wm, packed)) != CP_OK)
            goto out;
        wm = packed;
    }
    int ym_user = cp_dk_mem_user(p, &y_user, k->out_data[0]);
    int ym = dnnl_memory_desc_equal(yw, &y_user) ? ym_user : cp_dk_mem_scratch(p, yw);
    int ids[6] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, 0, 0};
    int mems[6] = {xm, wm, ym, bm, -1, -1};
    int nargs = 4;
    st = CP_ERR_INTERNAL;
    if (!add_zp_args(k, p, P, ids, mems, &nargs))
        goto out;
    if ((st = cp_dk_step_add(p, pd, nargs, ids, mems)) != CP_OK)
        goto out;
    if (ym != ym_user && (st = cp_dk_step_reorder(p, ym, ym_user)) != CP_OK)
        goto out;
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
out:
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_diag_set(d, st, "node '%s' (%s): could not build the oneDNN int8 program",
                           k->node->name, cp_op_name(k->node->op));
    return CP_OK;
}

static enum cp_status qconv_run(struct cp_kexec *k)
{
    struct qconv_geom q;
    qconv_geom(k, &q);
    pad_input(k, &q, k->scratch);
    return cp_dk_prog_run(k->state, k->scratch);
}

const struct cp_kernel cp_dnnl_qlinear_conv = {"onednn:qlinear_conv",
                                               CP_OP_QLINEAR_CONV,
                                               qconv_supports,
                                               qconv_prepare,
                                               qconv_run,
                                               cp_dk_kernel_release,
                                               q_isa};
const struct cp_kernel cp_dnnl_conv_integer = {"onednn:conv_integer",
                                               CP_OP_CONV_INTEGER,
                                               qconv_supports,
                                               qconv_prepare,
                                               qconv_run,
                                               cp_dk_kernel_release,
                                               q_isa};

/* ---- matmuls -------------------------------------------------------------------- */

/* A [..., M, K] (batch folded into M), B [K, N]. */
static bool qmm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct qpos *P = pos_of(n->op);
    const struct cp_kernel *ref =
        n->op == CP_OP_QLINEAR_MATMUL ? &cp_ref_qlinear_matmul : &cp_ref_matmul_integer;
    if (!ref->supports(g, n) || !common_ok(g, n, P))
        return false;
    const struct cp_tensor *a = cp_ref_in(g, n, (size_t)P->x), *b = cp_ref_in(g, n, (size_t)P->w),
                           *y = cp_ref_out(g, n, 0);
    if (a->shape.rank < 2 || b->shape.rank != 2 || cp_ref_numel(&y->shape) == 0)
        return false;
    const struct cp_tensor *ws = opt(g, n, P->ws);
    return !ws || cp_ref_numel(&ws->shape) == 1 || ws->shape.rank == 1;
}

static enum cp_status qmm_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    const struct qpos *P = pos_of(k->node->op);
    const struct cp_tensor *a = k->in[P->x], *b = k->in[P->w], *y = k->out[0];
    int64_t K = a->shape.dims[a->shape.rank - 1].value, N = b->shape.dims[1].value;
    int64_t M = cp_ref_numel(&a->shape) / K;
    struct cp_dk_prog *p = cp_dk_kernel_prog(k);
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    dnnl_dims_t ad = {M, K}, bd = {K, N}, yd = {M, N}, cd = {1, N};
    dnnl_memory_desc_t a_md, b_user, b_any, y_md, c_md;
    int32_t xzp = zp_of(k, P->xzp);
    if (dnnl_memory_desc_init_by_tag(&a_md, 2, ad, cp_dk_dtype(a->dtype), dnnl_ab) ||
        dnnl_memory_desc_init_by_tag(&b_user, 2, bd, dnnl_s8, dnnl_ab) ||
        dnnl_memory_desc_init_by_tag(&b_any, 2, bd, dnnl_s8, dnnl_format_tag_any) ||
        dnnl_memory_desc_init_by_tag(&y_md, 2, yd, cp_dk_dtype(y->dtype), dnnl_ab) ||
        dnnl_memory_desc_init_by_tag(&c_md, 2, cd, dnnl_s32, dnnl_ab))
        return cp_dk_fail(k, d, "memory descriptor", dnnl_invalid_arguments);
    /* x_zp as a bias: -x_zp * (column sums of B), exact in s32. */
    int cm = -1;
    if (xzp != 0) {
        void *ch = NULL;
        cm = cp_dk_mem_owned(p, &c_md);
        if (cm < 0 || dnnl_memory_get_data_handle(p->mems[cm], &ch) != dnnl_success || !ch)
            return cp_dk_fail(k, d, "memory", dnnl_out_of_memory);
        const int8_t *bv = k->in_data[P->w];
        for (int64_t j = 0; j < N; j++) {
            int64_t sum = 0;
            for (int64_t t = 0; t < K; t++)
                sum += bv[t * N + j];
            ((int32_t *)ch)[j] = (int32_t)(-(int64_t)xzp * sum);
        }
    }
    dnnl_matmul_desc_t md;
    dnnl_status_t s = dnnl_matmul_desc_init(&md, &a_md, &b_any, cm >= 0 ? &c_md : NULL, &y_md);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "int8 matmul descriptor", s);
    dnnl_primitive_attr_t attr = cp_dk_attr_create();
    if (!attr)
        return cp_dk_fail(k, d, "attribute", dnnl_out_of_memory);
    float *scales = cp_calloc((size_t)(N > 0 ? N : 1), sizeof *scales);
    if (!scales) {
        dnnl_primitive_attr_destroy(attr);
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    }
    s = set_quant_attr(k, P, attr, N, 1 << 1, scales);
    dnnl_primitive_desc_t pd = NULL;
    if (s == dnnl_success)
        s = dnnl_primitive_desc_create(&pd, &md, attr, p->engine, NULL);
    dnnl_primitive_attr_destroy(attr);
    free(scales);
    if (s != dnnl_success)
        return cp_dk_fail(k, d, "int8 matmul primitive descriptor", s);
    enum cp_status st = CP_ERR_INTERNAL;
    const dnnl_memory_desc_t *bw = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    int bm = cp_dk_mem_user(p, &b_user, k->in_data[P->w]);
    if (!dnnl_memory_desc_equal(bw, &b_user)) {
        int packed = cp_dk_mem_owned(p, bw);
        if ((st = cp_dk_reorder_now(p, bm, packed)) != CP_OK)
            goto out;
        bm = packed;
    }
    int ids[6] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST, DNNL_ARG_BIAS, 0, 0};
    int mems[6] = {cp_dk_mem_user(p, &a_md, k->in_data[P->x]),
                   bm,
                   cp_dk_mem_user(p, &y_md, k->out_data[0]),
                   cm,
                   -1,
                   -1};
    int nargs = cm >= 0 ? 4 : 3;
    st = CP_ERR_INTERNAL;
    if (!add_zp_args(k, p, P, ids, mems, &nargs))
        goto out;
    if ((st = cp_dk_step_add(p, pd, nargs, ids, mems)) != CP_OK)
        goto out;
    k->scratch_bytes = cp_dk_prog_scratch_bytes(p);
out:
    dnnl_primitive_desc_destroy(pd);
    if (st != CP_OK)
        return cp_diag_set(d, st, "node '%s' (%s): could not build the oneDNN int8 program",
                           k->node->name, cp_op_name(k->node->op));
    return CP_OK;
}

const struct cp_kernel cp_dnnl_qlinear_matmul = {
    "onednn:qlinear_matmul", CP_OP_QLINEAR_MATMUL, qmm_supports, qmm_prepare,
    cp_dk_kernel_run,        cp_dk_kernel_release, q_isa};
const struct cp_kernel cp_dnnl_matmul_integer = {
    "onednn:matmul_integer", CP_OP_MATMUL_INTEGER, qmm_supports, qmm_prepare,
    cp_dk_kernel_run,        cp_dk_kernel_release, q_isa};
