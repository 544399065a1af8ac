/* Reference kernels of the quantization ops.
 *
 * QuantizeLinear:   y = saturate(rint(x / scale) + zero_point)
 * DequantizeLinear: y = (x - zero_point) * scale
 * with scale and zero point per tensor, per axis or per block (opset 21);
 * rint rounds half to even and saturate clamps to the range of y's dtype,
 * as ONNX specifies. The division and product are in f32, as ONNX's own
 * reference computes them.
 *
 * DynamicQuantizeLinear picks a uint8 scale and zero point covering
 * [min(0, min x), max(0, max x)] and quantizes with them.
 *
 * ConvInteger / MatMulInteger accumulate (x - x_zp) * (w - w_zp) in int32.
 * QLinearConv / QLinearMatMul do the same and requantize:
 * y = saturate(rint(acc * (x_scale * w_scale / y_scale)) + y_zp), the
 * weight's scale and zero point per output channel (Conv) or column
 * (MatMul), the left operand's per row for MatMul. */
#include "runner/cpu/ref_util.h"

#include <math.h>
#include <string.h>

/* ---- common --------------------------------------------------------------------- */

static bool is_plain(const struct cp_tensor *t)
{
    return !t || t->layout == CP_LAYOUT_UNDEF || t->layout == CP_LAYOUT_ND ||
           t->layout == CP_LAYOUT_NCHW || t->layout == CP_LAYOUT_NCDHW;
}

static bool all_plain(const struct cp_graph *g, const struct cp_node *n)
{
    for (size_t i = 0; i < n->n_inputs; i++)
        if (!is_plain(cp_ref_in(g, n, i)))
            return false;
    for (size_t i = 0; i < n->n_outputs; i++)
        if (!is_plain(cp_ref_out(g, n, i)))
            return false;
    return true;
}

static bool is_qint(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8 || dt == CP_DTYPE_I16 || dt == CP_DTYPE_U16;
}

static bool is_8bit(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8;
}

static bool is_scale(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_F16 || dt == CP_DTYPE_BF16;
}

static void qrange(enum cp_dtype dt, double *lo, double *hi)
{
    switch (dt) {
    case CP_DTYPE_I8:
        *lo = -128, *hi = 127;
        break;
    case CP_DTYPE_I16:
        *lo = -32768, *hi = 32767;
        break;
    case CP_DTYPE_U16:
        *lo = 0, *hi = 65535;
        break;
    default:
        *lo = 0, *hi = 255;
        break;
    }
}

/* rint (half to even, the default rounding mode) then clamp to y's range. */
static double saturate_round(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    v = nearbyint(v);
    return v < lo ? lo : v > hi ? hi : v;
}

/* Input i when present and not empty, else NULL. */
static const struct cp_tensor *opt_in(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    return cp_ref_has_input(g, n, i) ? cp_ref_in(g, n, i) : NULL;
}

static const void *opt_data(const struct cp_kexec *k, size_t i)
{
    return cp_ref_has_input(k->g, k->node, i) ? k->in_data[i] : NULL;
}

/* ---- QuantizeLinear / DequantizeLinear --------------------------------------------- */

/* Where element i of x finds its scale: per tensor (axis -1), per axis
 * (block 0) or per block along `axis`. */
struct qparams {
    int axis;
    int64_t block;
    int64_t len, inner;      /* x's dim at axis, product of dims after it */
    int64_t s_axis, s_inner; /* the scale's dim at axis and its inner span */
};

static bool qdq_params_ok(const struct cp_graph *g, const struct cp_node *n,
                          const struct cp_tensor *x, const struct cp_tensor *s,
                          const struct cp_tensor *zp)
{
    if (zp && !cp_shape_equal(&zp->shape, &s->shape))
        return false;
    int64_t block = cp_node_attr_int(n, "block_size", 0);
    int64_t ns = cp_ref_numel(&s->shape);
    if (block == 0 && ns == 1)
        return true;
    int r = x->shape.rank;
    int64_t axis = cp_node_attr_int(n, "axis", 1);
    if (cp_ref_opset(g) < 13 || axis < -r || axis >= r)
        return false;
    if (axis < 0)
        axis += r;
    if (block < 0)
        return false;
    if (block == 0)
        return s->shape.rank == 1 && ns == x->shape.dims[axis].value;
    if (s->shape.rank != r)
        return false;
    for (int k = 0; k < r; k++) {
        int64_t len = x->shape.dims[k].value;
        int64_t want = k == axis ? (len + block - 1) / block : len;
        if (s->shape.dims[k].value != want)
            return false;
    }
    return true;
}

static void qdq_params(const struct cp_kexec *k, struct qparams *p)
{
    const struct cp_shape *x = &k->in[0]->shape, *s = &k->in[1]->shape;
    p->block = cp_node_attr_int(k->node, "block_size", 0);
    p->axis = -1;
    if (p->block == 0 && cp_ref_numel(s) == 1)
        return;
    int r = x->rank;
    int64_t axis = cp_node_attr_int(k->node, "axis", 1);
    p->axis = (int)(axis < 0 ? axis + r : axis);
    p->len = x->dims[p->axis].value;
    p->inner = cp_ref_span(x, p->axis + 1, r);
    p->s_axis = p->block ? s->dims[p->axis].value : p->len;
    p->s_inner = p->inner;
}

static int64_t qparam_index(const struct qparams *p, int64_t i)
{
    if (p->axis < 0)
        return 0;
    int64_t inner = i % p->inner, a = i / p->inner % p->len, outer = i / p->inner / p->len;
    if (p->block == 0)
        return a;
    return (outer * p->s_axis + a / p->block) * p->s_inner + inner;
}

static bool quantize_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || !all_plain(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *s = cp_ref_in(g, n, 1), *zp = opt_in(g, n, 2),
                           *y = cp_ref_out(g, n, 0);
    if (!x || !s || !is_scale(s->dtype) || !is_qint(y->dtype) || (zp && zp->dtype != y->dtype))
        return false;
    if (x->dtype != CP_DTYPE_F32 && x->dtype != CP_DTYPE_F16 && x->dtype != CP_DTYPE_BF16 &&
        x->dtype != CP_DTYPE_I32)
        return false;
    return cp_shape_equal(&x->shape, &y->shape) && qdq_params_ok(g, n, x, s, zp);
}

static enum cp_status quantize_run(struct cp_kexec *k)
{
    struct qparams p;
    qdq_params(k, &p);
    const void *x = k->in_data[0], *s = k->in_data[1], *zp = opt_data(k, 2);
    enum cp_dtype xt = k->in[0]->dtype, st = k->in[1]->dtype, yt = k->out[0]->dtype;
    void *y = k->out_data[0];
    double lo, hi;
    qrange(yt, &lo, &hi);
    int64_t n = cp_ref_numel(&k->out[0]->shape);
    for (int64_t i = 0; i < n; i++) {
        int64_t j = qparam_index(&p, i);
        float q = (float)cp_elem_load_f64(x, xt, i) / (float)cp_elem_load_f64(s, st, j);
        double z = zp ? (double)cp_elem_load_i64(zp, yt, j) : 0.0;
        cp_elem_store_i64(y, yt, i, (int64_t)saturate_round((double)nearbyintf(q) + z, lo, hi));
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_quantize_linear, CP_OP_QUANTIZE_LINEAR, quantize_supports, NULL, quantize_run);

static bool dequantize_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || !all_plain(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *s = cp_ref_in(g, n, 1), *zp = opt_in(g, n, 2),
                           *y = cp_ref_out(g, n, 0);
    if (!x || !s || !is_scale(s->dtype) || y->dtype != s->dtype)
        return false;
    if (!is_qint(x->dtype) && x->dtype != CP_DTYPE_I32)
        return false;
    if (zp && zp->dtype != x->dtype)
        return false;
    return cp_shape_equal(&x->shape, &y->shape) && qdq_params_ok(g, n, x, s, zp);
}

static enum cp_status dequantize_run(struct cp_kexec *k)
{
    struct qparams p;
    qdq_params(k, &p);
    const void *x = k->in_data[0], *s = k->in_data[1], *zp = opt_data(k, 2);
    enum cp_dtype xt = k->in[0]->dtype, st = k->in[1]->dtype, yt = k->out[0]->dtype;
    void *y = k->out_data[0];
    int64_t n = cp_ref_numel(&k->out[0]->shape);
    for (int64_t i = 0; i < n; i++) {
        int64_t j = qparam_index(&p, i);
        int64_t d = cp_elem_load_i64(x, xt, i) - (zp ? cp_elem_load_i64(zp, xt, j) : 0);
        cp_elem_store_f64(y, yt, i, (double)((float)d * (float)cp_elem_load_f64(s, st, j)));
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_dequantize_linear, CP_OP_DEQUANTIZE_LINEAR, dequantize_supports, NULL,
              dequantize_run);

/* ---- DynamicQuantizeLinear ------------------------------------------------------------- */

static bool dynq_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || !all_plain(g, n) || n->n_outputs != 3)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0),
                           *s = cp_ref_out(g, n, 1), *zp = cp_ref_out(g, n, 2);
    return x && s && zp && x->dtype == CP_DTYPE_F32 && y->dtype == CP_DTYPE_U8 &&
           s->dtype == CP_DTYPE_F32 && zp->dtype == CP_DTYPE_U8 && cp_ref_numel(&s->shape) == 1 &&
           cp_ref_numel(&zp->shape) == 1 && cp_shape_equal(&x->shape, &y->shape);
}

static enum cp_status dynq_run(struct cp_kexec *k)
{
    const float *x = k->in_data[0];
    uint8_t *y = k->out_data[0], *zp_out = k->out_data[2];
    float *scale_out = k->out_data[1];
    int64_t n = cp_ref_numel(&k->in[0]->shape);
    float lo = 0.0f, hi = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (x[i] < lo)
            lo = x[i];
        if (x[i] > hi)
            hi = x[i];
    }
    float scale = (hi - lo) / 255.0f;
    /* All zeros: any scale represents them; 0 with zero point 0 keeps
     * DequantizeLinear of the result exact. */
    double zp = scale > 0 ? saturate_round((double)(0.0f - lo / scale), 0, 255) : 0;
    for (int64_t i = 0; i < n; i++)
        y[i] =
            scale > 0 ? (uint8_t)saturate_round((double)nearbyintf(x[i] / scale) + zp, 0, 255) : 0;
    *scale_out = scale;
    *zp_out = (uint8_t)zp;
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_dynamic_quantize_linear, CP_OP_DYNAMIC_QUANTIZE_LINEAR, dynq_supports, NULL,
              dynq_run);

/* ---- integer operands ------------------------------------------------------------------- */

/* The positions of an integer conv's or matmul's inputs in its node. */
struct qlayout {
    int x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias; /* -1: none */
};

static const struct qlayout qlinear_layout = {0, 1, 2, 3, 4, 5, 6, 7, 8};
static const struct qlayout integer_layout = {0, -1, 2, 1, -1, 3, -1, -1, -1};

static const struct cp_tensor *lin(const struct cp_graph *g, const struct cp_node *n, int i)
{
    return i >= 0 ? opt_in(g, n, (size_t)i) : NULL;
}

/* An optional per-tensor or 1-D parameter of `len` entries (or one), of
 * dtype `dt` (UNDEFINED: a scale dtype). */
static bool param_ok(const struct cp_tensor *t, enum cp_dtype dt, int64_t len)
{
    if (!t)
        return true;
    if (dt == CP_DTYPE_UNDEFINED ? !is_scale(t->dtype) : t->dtype != dt)
        return false;
    int64_t ne = cp_ref_numel(&t->shape);
    return t->shape.rank <= 1 && (ne == 1 || ne == len);
}

/* Element i of a parameter (or its only element); `dflt` when absent. */
static int64_t param_i(const struct cp_kexec *k, int in, int64_t i, int64_t dflt)
{
    if (in < 0 || !cp_ref_has_input(k->g, k->node, (size_t)in))
        return dflt;
    const struct cp_tensor *t = k->in[in];
    return cp_elem_load_i64(k->in_data[in], t->dtype, cp_ref_numel(&t->shape) == 1 ? 0 : i);
}

static float param_f(const struct cp_kexec *k, int in, int64_t i)
{
    const struct cp_tensor *t = k->in[in];
    return (float)cp_elem_load_f64(k->in_data[in], t->dtype, cp_ref_numel(&t->shape) == 1 ? 0 : i);
}

/* The operand checks shared by the conv and matmul forms. `wlen` is the
 * length a per-channel weight parameter has, `xlen` the left operand's. */
static bool operands_ok(const struct cp_graph *g, const struct cp_node *n, const struct qlayout *L,
                        int64_t xlen, int64_t wlen)
{
    const struct cp_tensor *x = lin(g, n, L->x), *w = lin(g, n, L->w), *y = cp_ref_out(g, n, 0);
    if (!x || !w || !is_8bit(x->dtype) || !is_8bit(w->dtype))
        return false;
    if (!param_ok(lin(g, n, L->x_zp), x->dtype, xlen) ||
        !param_ok(lin(g, n, L->w_zp), w->dtype, wlen))
        return false;
    if (L->y_scale < 0)
        return y->dtype == CP_DTYPE_I32;
    const struct cp_tensor *xs = lin(g, n, L->x_scale), *ws = lin(g, n, L->w_scale),
                           *ys = lin(g, n, L->y_scale), *yzp = lin(g, n, L->y_zp);
    if (!xs || !ws || !ys || !is_8bit(y->dtype) || (yzp && yzp->dtype != y->dtype))
        return false;
    return param_ok(xs, CP_DTYPE_UNDEFINED, xlen) && param_ok(ws, CP_DTYPE_UNDEFINED, wlen) &&
           param_ok(ys, CP_DTYPE_UNDEFINED, xlen) && param_ok(yzp, y->dtype, xlen);
}

static int32_t ld8(const void *p, bool is_signed, int64_t i)
{
    return is_signed ? ((const int8_t *)p)[i] : ((const uint8_t *)p)[i];
}

/* Requantize an int32 accumulator of row r, column / channel c. */
static void requant_store(const struct cp_kexec *k, const struct qlayout *L, int64_t idx,
                          int32_t acc, int64_t r, int64_t c, double lo, double hi)
{
    float mult = param_f(k, L->x_scale, r) * param_f(k, L->w_scale, c) / param_f(k, L->y_scale, r);
    /* Rounded, then the zero point added, as QuantizeLinear does (and ONNX
     * Runtime's requantisation): an odd zero point never moves a tie. */
    double v = nearbyint((double)acc * (double)mult) + (double)param_i(k, L->y_zp, r, 0);
    cp_elem_store_i64(k->out_data[0], k->out[0]->dtype, idx, (int64_t)saturate_round(v, lo, hi));
}

/* ---- ConvInteger / QLinearConv ---------------------------------------------------------- */

static bool qconv_supports_with(const struct cp_graph *g, const struct cp_node *n,
                                const struct qlayout *L)
{
    if (!cp_ref_node_is_static(g, n) || !all_plain(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = lin(g, n, L->x), *w = lin(g, n, L->w), *y = cp_ref_out(g, n, 0);
    if (!x || !w)
        return false;
    int r = x->shape.rank;
    if (r < 3 || r > 2 + CP_REF_MAX_SPATIAL || w->shape.rank != r || y->shape.rank != r)
        return false;
    if (!cp_ref_window_attrs_ok(n, r - 2))
        return false;
    const struct cp_attr *ks = cp_node_attr(n, "kernel_shape");
    for (int k = 0; ks && k < r - 2; k++)
        if (ks->ints[k] != w->shape.dims[k + 2].value)
            return false;
    int64_t group = cp_node_attr_int(n, "group", 1);
    int64_t c = x->shape.dims[1].value, m = w->shape.dims[0].value;
    if (group < 1 || c != w->shape.dims[1].value * group || m % group != 0 ||
        y->shape.dims[1].value != m || x->shape.dims[0].value != y->shape.dims[0].value)
        return false;
    /* x's parameters are per tensor; the weight's per tensor or per output
     * channel. */
    if (!operands_ok(g, n, L, 1, m))
        return false;
    const struct cp_tensor *b = lin(g, n, L->bias);
    return !b || (b->dtype == CP_DTYPE_I32 && b->shape.rank == 1 && b->shape.dims[0].value == m);
}

/* acc[n, m, spatial] = bias[m] + sum (x - x_zp)(w - w_zp[m]), wrapping in
 * int32 as the spec's accumulator does (int64 inside, cut at the end). */
static void qconv_acc(const struct cp_kexec *k, const struct qlayout *L, int32_t *acc)
{
    const struct cp_shape *xs = &k->in[L->x]->shape, *ws = &k->in[L->w]->shape;
    const struct cp_shape *ys = &k->out[0]->shape;
    struct cp_ref_window win;
    cp_ref_window_forward(k->node, xs, ws, ys, &win);
    int64_t group = cp_node_attr_int(k->node, "group", 1);
    int64_t batch = xs->dims[0].value, c_in = xs->dims[1].value, m_out = ws->dims[0].value;
    int64_t cg = c_in / group, mg = m_out / group;
    int64_t in_plane = win.in[0] * win.in[1] * win.in[2];
    int64_t out_plane = win.out[0] * win.out[1] * win.out[2];
    int64_t taps = win.kernel[0] * win.kernel[1] * win.kernel[2];
    const void *x = k->in_data[L->x], *w = k->in_data[L->w];
    bool xsig = k->in[L->x]->dtype == CP_DTYPE_I8, wsig = k->in[L->w]->dtype == CP_DTYPE_I8;
    int32_t xzp = (int32_t)param_i(k, L->x_zp, 0, 0);
    const int32_t *bias = L->bias >= 0 ? opt_data(k, (size_t)L->bias) : NULL;
    for (int64_t n = 0; n < batch; n++)
        for (int64_t m = 0; m < m_out; m++) {
            int64_t g = m / mg;
            int32_t wzp = (int32_t)param_i(k, L->w_zp, m, 0);
            int32_t *yo = acc + (n * m_out + m) * out_plane;
            for (int64_t i = 0; i < out_plane; i++)
                yo[i] = bias ? bias[m] : 0;
            for (int64_t c = 0; c < cg; c++) {
                int64_t xc = (n * c_in + g * cg + c) * in_plane;
                int64_t wc = (m * cg + c) * taps;
                for (int64_t t = 0; t < taps; t++) {
                    int64_t kd = t / (win.kernel[1] * win.kernel[2]);
                    int64_t kh = t / win.kernel[2] % win.kernel[1], kw = t % win.kernel[2];
                    int32_t wv = ld8(w, wsig, wc + t) - wzp;
                    int64_t off0 = kd * win.dilation[0] - win.pad_begin[0];
                    int64_t off1 = kh * win.dilation[1] - win.pad_begin[1];
                    int64_t off2 = kw * win.dilation[2] - win.pad_begin[2];
                    int64_t d_lo, d_hi, h_lo, h_hi, w_lo, w_hi;
                    cp_ref_valid_range(win.out[0], win.stride[0], off0, win.in[0], &d_lo, &d_hi);
                    cp_ref_valid_range(win.out[1], win.stride[1], off1, win.in[1], &h_lo, &h_hi);
                    cp_ref_valid_range(win.out[2], win.stride[2], off2, win.in[2], &w_lo, &w_hi);
                    /* Padding is x_zp, so a tap outside the input adds 0. */
                    for (int64_t od = d_lo; od < d_hi; od++) {
                        int64_t id = od * win.stride[0] + off0;
                        for (int64_t oh = h_lo; oh < h_hi; oh++) {
                            int64_t ih = oh * win.stride[1] + off1;
                            int64_t xrow = xc + (id * win.in[1] + ih) * win.in[2];
                            int32_t *yrow = yo + (od * win.out[1] + oh) * win.out[2];
                            for (int64_t ow = w_lo; ow < w_hi; ow++) {
                                int32_t xv = ld8(x, xsig, xrow + ow * win.stride[2] + off2) - xzp;
                                yrow[ow] = (int32_t)((uint32_t)yrow[ow] + (uint32_t)(xv * wv));
                            }
                        }
                    }
                }
            }
        }
}

static bool conv_integer_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return qconv_supports_with(g, n, &integer_layout);
}

static enum cp_status conv_integer_run(struct cp_kexec *k)
{
    qconv_acc(k, &integer_layout, k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_conv_integer, CP_OP_CONV_INTEGER, conv_integer_supports, NULL,
              conv_integer_run);

static bool qlinear_conv_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return qconv_supports_with(g, n, &qlinear_layout);
}

static enum cp_status qlinear_conv_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = (size_t)cp_ref_numel(&k->out[0]->shape) * sizeof(int32_t);
    return CP_OK;
}

static enum cp_status qlinear_conv_run(struct cp_kexec *k)
{
    int32_t *acc = k->scratch;
    qconv_acc(k, &qlinear_layout, acc);
    const struct cp_shape *ys = &k->out[0]->shape;
    int64_t m_out = ys->dims[1].value, plane = cp_ref_span(ys, 2, ys->rank);
    int64_t n = cp_ref_numel(ys);
    double lo, hi;
    qrange(k->out[0]->dtype, &lo, &hi);
    for (int64_t i = 0; i < n; i++)
        requant_store(k, &qlinear_layout, i, acc[i], 0, i / plane % m_out, lo, hi);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_qlinear_conv, CP_OP_QLINEAR_CONV, qlinear_conv_supports, qlinear_conv_prepare,
              qlinear_conv_run);

/* ---- MatMulInteger / QLinearMatMul --------------------------------------------------------- */

/* numpy matmul geometry: 1-D operands promoted, batch dims broadcast. */
struct mm_geom {
    int64_t m, k, n, batch;
    int rb; /* batch rank of the output */
    int64_t ob[CP_MAX_RANK];
    int64_t a_stride[CP_MAX_RANK], b_stride[CP_MAX_RANK]; /* per output batch dim, 0 = bcast */
};

static bool mm_geom(const struct cp_shape *a, const struct cp_shape *b, const struct cp_shape *y,
                    struct mm_geom *gm)
{
    if (a->rank < 1 || b->rank < 1)
        return false;
    gm->m = a->rank >= 2 ? a->dims[a->rank - 2].value : 1;
    gm->k = a->dims[a->rank - 1].value;
    int64_t kb = b->rank >= 2 ? b->dims[b->rank - 2].value : b->dims[0].value;
    gm->n = b->rank >= 2 ? b->dims[b->rank - 1].value : 1;
    if (kb != gm->k)
        return false;
    int ab = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
    gm->rb = ab > bb ? ab : bb;
    int tail = (a->rank >= 2) + (b->rank >= 2);
    if (y->rank != gm->rb + tail)
        return false;
    int64_t as = gm->m * gm->k, bs = gm->k * gm->n;
    gm->batch = 1;
    for (int i = gm->rb - 1; i >= 0; i--) {
        int ia = i - (gm->rb - ab), ib = i - (gm->rb - bb);
        int64_t da = ia >= 0 ? a->dims[ia].value : 1, db = ib >= 0 ? b->dims[ib].value : 1;
        int64_t d = y->dims[i].value;
        if ((da != d && da != 1) || (db != d && db != 1))
            return false;
        gm->ob[i] = d;
        gm->a_stride[i] = da == 1 ? 0 : as;
        gm->b_stride[i] = db == 1 ? 0 : bs;
        as *= da;
        bs *= db;
        gm->batch *= d;
    }
    return cp_ref_numel(y) == gm->batch * gm->m * gm->n;
}

static bool qmm_supports_with(const struct cp_graph *g, const struct cp_node *n,
                              const struct qlayout *L)
{
    if (!cp_ref_node_is_static(g, n) || !all_plain(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *a = lin(g, n, L->x), *b = lin(g, n, L->w), *y = cp_ref_out(g, n, 0);
    struct mm_geom gm;
    if (!a || !b || !mm_geom(&a->shape, &b->shape, &y->shape, &gm))
        return false;
    /* a's parameters per tensor or per row, b's per tensor or per column. */
    return operands_ok(g, n, L, gm.m, gm.n);
}

/* Output block (batch ob) of the int32 accumulators. */
static void qmm_acc(const struct cp_kexec *k, const struct qlayout *L, const struct mm_geom *gm,
                    int32_t *acc)
{
    const void *a = k->in_data[L->x], *b = k->in_data[L->w];
    bool asig = k->in[L->x]->dtype == CP_DTYPE_I8, bsig = k->in[L->w]->dtype == CP_DTYPE_I8;
    for (int64_t ob = 0; ob < gm->batch; ob++) {
        int64_t ao = 0, bo = 0, rest = ob;
        for (int i = gm->rb - 1; i >= 0; i--) {
            int64_t c = rest % gm->ob[i];
            rest /= gm->ob[i];
            ao += c * gm->a_stride[i];
            bo += c * gm->b_stride[i];
        }
        int32_t *yo = acc + ob * gm->m * gm->n;
        for (int64_t i = 0; i < gm->m; i++) {
            int32_t azp = (int32_t)param_i(k, L->x_zp, i, 0);
            for (int64_t j = 0; j < gm->n; j++) {
                int32_t bzp = (int32_t)param_i(k, L->w_zp, j, 0);
                uint32_t s = 0;
                for (int64_t t = 0; t < gm->k; t++) {
                    int32_t av = ld8(a, asig, ao + i * gm->k + t) - azp;
                    int32_t bv = ld8(b, bsig, bo + t * gm->n + j) - bzp;
                    s += (uint32_t)(av * bv);
                }
                yo[i * gm->n + j] = (int32_t)s;
            }
        }
    }
}

static void qmm_geom_of(const struct cp_kexec *k, const struct qlayout *L, struct mm_geom *gm)
{
    mm_geom(&k->in[L->x]->shape, &k->in[L->w]->shape, &k->out[0]->shape, gm);
}

static bool matmul_integer_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return qmm_supports_with(g, n, &integer_layout);
}

static enum cp_status matmul_integer_run(struct cp_kexec *k)
{
    struct mm_geom gm;
    qmm_geom_of(k, &integer_layout, &gm);
    qmm_acc(k, &integer_layout, &gm, k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_matmul_integer, CP_OP_MATMUL_INTEGER, matmul_integer_supports, NULL,
              matmul_integer_run);

static bool qlinear_matmul_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return qmm_supports_with(g, n, &qlinear_layout);
}

static enum cp_status qlinear_matmul_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = (size_t)cp_ref_numel(&k->out[0]->shape) * sizeof(int32_t);
    return CP_OK;
}

static enum cp_status qlinear_matmul_run(struct cp_kexec *k)
{
    struct mm_geom gm;
    qmm_geom_of(k, &qlinear_layout, &gm);
    int32_t *acc = k->scratch;
    qmm_acc(k, &qlinear_layout, &gm, acc);
    double lo, hi;
    qrange(k->out[0]->dtype, &lo, &hi);
    int64_t n = gm.batch * gm.m * gm.n;
    for (int64_t i = 0; i < n; i++)
        requant_store(k, &qlinear_layout, i, acc[i], i / gm.n % gm.m, i % gm.n, lo, hi);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_qlinear_matmul, CP_OP_QLINEAR_MATMUL, qlinear_matmul_supports,
              qlinear_matmul_prepare, qlinear_matmul_run);
