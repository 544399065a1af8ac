/* QDQFoldPass: the QDQ form of a quantized model, as ONNX Runtime's
 * quantizer and Ascend's AMCT write it, folded into integer kernels.
 *
 *   DequantizeLinear(x_q) ─┐
 *   DequantizeLinear(w_q) ─┼─ Conv / MatMul / Gemm ─ QuantizeLinear ─ y_q
 *   [DequantizeLinear(b_i32) or an f32 bias] ┘
 *
 * becomes QLinearConv / QLinearMatMul (one int8 kernel: s32 accumulation,
 * bias, requantisation, on oneDNN where it applies). Without the trailing
 * QuantizeLinear (a float output) it becomes ConvInteger / MatMulInteger,
 * then Cast to f32, Mul by x_scale * w_scale (per channel) and Add of the
 * bias: the integer product is exact, so only the f32 rounding of the
 * scaling differs from the QDQ graph's f32 convolution.
 *
 * Conditions: x per tensor; w per tensor or per output channel (Conv axis
 * 0, MatMul the last axis, Gemm transB=1 axis 0); 8-bit operands; the
 * scales constant where the fold needs their values (bias, the float
 * output's multiplier); the product feeds only the QuantizeLinear, whose
 * scale and zero point are per tensor. A Conv bias: DequantizeLinear of an
 * int32 tensor with zero point 0 and scale x_scale * w_scale (ONNX
 * Runtime's form) is used as is; an f32 constant bias is quantized with
 * round-half-even to that scale. QLinearMatMul has no bias, so a Gemm with
 * C is folded only into the float-output form. */
#include "atc_bridge/passes/fusion_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A DequantizeLinear feeding the product. */
struct dq {
    int32_t node;
    int32_t x, scale, zp; /* zp -1 when absent */
    int64_t nscale;       /* scale elements */
    int axis;             /* normalised; meaningful when nscale > 1 */
};

static bool match_dq(const struct cp_graph *g, int32_t t, struct dq *q)
{
    const struct cp_tensor *tt = cp_graph_tensor(g, t);
    if (tt->producer < 0)
        return false;
    const struct cp_node *n = cp_graph_node(g, tt->producer);
    if (n->dead || n->op != CP_OP_DEQUANTIZE_LINEAR || cp_node_attr_int(n, "block_size", 0) != 0)
        return false;
    q->node = tt->producer;
    q->x = n->inputs[0];
    q->scale = n->inputs[1];
    q->zp = n->n_inputs > 2 ? n->inputs[2] : -1;
    const struct cp_tensor *x = cp_graph_tensor(g, q->x), *s = cp_graph_tensor(g, q->scale);
    if ((x->dtype != CP_DTYPE_U8 && x->dtype != CP_DTYPE_I8 && x->dtype != CP_DTYPE_I32) ||
        s->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&s->shape))
        return false;
    q->nscale = cp_shape_numel(&s->shape);
    int r = x->shape.rank;
    int64_t axis = cp_node_attr_int(n, "axis", 1);
    q->axis = (int)(axis < 0 ? axis + r : axis);
    return true;
}

static float fat(const struct cp_graph *g, int32_t t, int64_t i)
{
    const struct cp_tensor *tt = cp_graph_tensor(g, t);
    return (float)cp_elem_load_f64(tt->data, tt->dtype, cp_shape_numel(&tt->shape) == 1 ? 0 : i);
}

static bool is_const(const struct cp_graph *g, int32_t t)
{
    return t >= 0 && cp_rw_const_data(g, t) != NULL;
}

static int32_t new_tensor(struct cp_pass_ctx *ctx, const char *base, enum cp_dtype dt)
{
    char name[400];
    cp_rw_unique_tensor_name(ctx->g, base, name, sizeof name);
    int32_t idx = -1;
    if (cp_graph_add_tensor(ctx->g, name, dt, NULL, CP_TENSOR_INTERMEDIATE, &idx, ctx->d) != CP_OK)
        return -1;
    return idx;
}

/* A constant f32 tensor of shape `dims` (rank r) from v (taken over). */
static int32_t const_f32(struct cp_pass_ctx *ctx, const char *base, int r, const int64_t *dims,
                         float *v)
{
    struct cp_shape s;
    cp_shape_set(&s, r, dims);
    int32_t t = -1;
    size_t nb = (size_t)cp_shape_numel(&s) * sizeof(float);
    if (cp_rw_add_initializer(ctx->g, base, CP_DTYPE_F32, &s, v, nb, &t, ctx->d) != CP_OK)
        return -1;
    return t;
}

/* What one match folds. */
struct fold {
    int32_t prod;     /* the Conv / MatMul / Gemm */
    struct dq x, w;   /* operands */
    int32_t w_data;   /* w_q, possibly transposed (Gemm transB) */
    int32_t bias_i32; /* QLinearConv's bias, -1 if none */
    int32_t bias_f32; /* the float-output form's bias, -1 if none */
    int32_t q;        /* the QuantizeLinear, -1 for the float form */
    int64_t channels; /* output channels / columns */
    bool conv;
};

/* The int32 bias of a Conv: from DequantizeLinear(b_i32) when its scale is
 * x_scale * w_scale, else by quantizing a constant f32 bias. */
static enum cp_status conv_bias(struct cp_pass_ctx *ctx, struct fold *f, int32_t b, bool *ok)
{
    struct cp_graph *g = ctx->g;
    *ok = true;
    f->bias_i32 = f->bias_f32 = -1;
    if (b < 0)
        return CP_OK;
    *ok = false;
    struct dq bq;
    bool scales_const = is_const(g, f->x.scale) && is_const(g, f->w.scale);
    if (match_dq(g, b, &bq) && cp_graph_tensor(g, bq.x)->dtype == CP_DTYPE_I32 &&
        (bq.zp < 0 || (is_const(g, bq.zp) && cp_graph_tensor(g, bq.zp)->dtype == CP_DTYPE_I32)) &&
        is_const(g, bq.scale) && scales_const) {
        if (bq.zp >= 0) {
            const struct cp_tensor *z = cp_graph_tensor(g, bq.zp);
            for (int64_t i = 0; i < cp_shape_numel(&z->shape); i++)
                if (cp_elem_load_i64(z->data, z->dtype, i) != 0)
                    return CP_OK;
        }
        for (int64_t c = 0; c < f->channels; c++) {
            double want = (double)fat(g, f->x.scale, 0) * (double)fat(g, f->w.scale, c);
            if (fabs((double)fat(g, bq.scale, c) - want) > 1e-6 * fabs(want))
                return CP_OK;
        }
        f->bias_i32 = bq.x;
        f->bias_f32 = b;
        *ok = true;
        return CP_OK;
    }
    const struct cp_tensor *bt = cp_graph_tensor(g, b);
    if (!is_const(g, b) || bt->dtype != CP_DTYPE_F32 || !scales_const ||
        cp_shape_numel(&bt->shape) != f->channels)
        return CP_OK;
    int32_t *q = malloc((size_t)f->channels * sizeof *q);
    if (!q)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
    const float *bv = bt->data;
    for (int64_t c = 0; c < f->channels; c++) {
        double s = (double)fat(g, f->x.scale, 0) * (double)fat(g, f->w.scale, c);
        double v = s > 0 ? nearbyint((double)bv[c] / s) : 0;
        q[c] = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
    }
    struct cp_shape s;
    cp_shape_set(&s, 1, &f->channels);
    enum cp_status st =
        cp_rw_add_initializer(g, "qdq_bias_i32", CP_DTYPE_I32, &s, q,
                              (size_t)f->channels * sizeof *q, &f->bias_i32, ctx->d);
    f->bias_f32 = b;
    *ok = st == CP_OK;
    return st;
}

/* The trailing QuantizeLinear, per tensor, 8-bit, the product's only use. */
static int32_t match_q(const struct cp_graph *g, int32_t y)
{
    if (cp_rw_is_graph_output(g, y))
        return -1;
    int32_t qi = cp_rw_sole_consumer(g, y);
    if (qi < 0)
        return -1;
    const struct cp_node *q = cp_graph_node(g, qi);
    if (q->op != CP_OP_QUANTIZE_LINEAR || q->inputs[0] != y ||
        cp_node_attr_int(q, "block_size", 0) != 0)
        return -1;
    const struct cp_tensor *s = cp_graph_tensor(g, q->inputs[1]),
                           *o = cp_graph_tensor(g, q->outputs[0]);
    if (s->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&s->shape) ||
        cp_shape_numel(&s->shape) != 1)
        return -1;
    if (o->dtype != CP_DTYPE_U8 && o->dtype != CP_DTYPE_I8)
        return -1;
    return qi;
}

static bool operand_8bit(const struct cp_graph *g, const struct dq *q)
{
    enum cp_dtype dt = cp_graph_tensor(g, q->x)->dtype;
    if (dt != CP_DTYPE_U8 && dt != CP_DTYPE_I8)
        return false;
    if (q->zp >= 0) {
        const struct cp_tensor *z = cp_graph_tensor(g, q->zp);
        if (!cp_shape_is_static(&z->shape) || cp_shape_numel(&z->shape) != q->nscale)
            return false;
    }
    return true;
}

/* Match the product node `pi`. OUT: *f. */
static enum cp_status match(struct cp_pass_ctx *ctx, int32_t pi, struct fold *f, bool *ok)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *p = cp_graph_node(g, pi);
    *ok = false;
    memset(f, 0, sizeof *f);
    f->prod = pi;
    f->conv = p->op == CP_OP_CONV;
    if (p->n_inputs < 2 || p->inputs[0] < 0 || p->inputs[1] < 0 ||
        cp_node_attr(p, "compute_precision"))
        return CP_OK;
    if (!match_dq(g, p->inputs[0], &f->x) || !match_dq(g, p->inputs[1], &f->w) ||
        !operand_8bit(g, &f->x) || !operand_8bit(g, &f->w) || f->x.nscale != 1)
        return CP_OK;
    const struct cp_tensor *w = cp_graph_tensor(g, f->w.x), *y = cp_graph_tensor(g, p->outputs[0]);
    if (!cp_shape_is_static(&w->shape) || y->dtype != CP_DTYPE_F32)
        return CP_OK;
    f->w_data = f->w.x;
    int32_t bias = p->n_inputs > 2 ? p->inputs[2] : -1;
    bool trans_b = false;
    if (p->op == CP_OP_CONV) {
        if (w->shape.rank < 3)
            return CP_OK;
        f->channels = w->shape.dims[0].value;
        if (f->w.nscale != 1 && (f->w.axis != 0 || f->w.nscale != f->channels))
            return CP_OK;
    } else {
        if (w->shape.rank != 2)
            return CP_OK;
        if (p->op == CP_OP_GEMM) {
            if (cp_node_attr_int(p, "transA", 0) != 0 ||
                cp_node_attr_float(p, "alpha", 1.0f) != 1.0f ||
                cp_node_attr_float(p, "beta", 1.0f) != 1.0f ||
                cp_graph_tensor(g, p->inputs[0])->shape.rank != 2)
                return CP_OK;
            trans_b = cp_node_attr_int(p, "transB", 0) != 0;
        }
        int col_axis = trans_b ? 0 : 1;
        f->channels = w->shape.dims[col_axis].value;
        if (f->w.nscale != 1 && (f->w.axis != col_axis || f->w.nscale != f->channels))
            return CP_OK;
        if (trans_b && !is_const(g, f->w.x))
            return CP_OK;
    }
    f->q = match_q(g, p->outputs[0]);
    bool bias_ok = true;
    f->bias_i32 = -1;
    f->bias_f32 = bias;
    if (f->conv && f->q >= 0) {
        enum cp_status st = conv_bias(ctx, f, bias, &bias_ok);
        if (st != CP_OK)
            return st;
    } else if (bias >= 0 && f->q >= 0) {
        bias_ok = false; /* QLinearMatMul has no bias */
    }
    if (!bias_ok) {
        if (bias >= 0 && !f->conv && f->q >= 0)
            f->q = -1; /* fall back to the float-output form */
        else
            return CP_OK;
    }
    if (f->q < 0) {
        /* The float form needs the scales' values and a plain bias. */
        if (!is_const(g, f->x.scale) || !is_const(g, f->w.scale))
            return CP_OK;
        if (bias >= 0 && f->conv && cp_shape_numel(&cp_graph_tensor(g, bias)->shape) != f->channels)
            return CP_OK;
    }
    if (trans_b) {
        /* w_q [N, K] -> [K, N], once, as a new initializer. */
        int64_t N = w->shape.dims[0].value, K = w->shape.dims[1].value;
        uint8_t *t = malloc((size_t)(N * K > 0 ? N * K : 1));
        if (!t)
            return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
        const uint8_t *src = w->data;
        for (int64_t i = 0; i < N; i++)
            for (int64_t k = 0; k < K; k++)
                t[k * N + i] = src[i * K + k];
        int64_t dims[2] = {K, N};
        struct cp_shape s;
        cp_shape_set(&s, 2, dims);
        enum cp_status st = cp_rw_add_initializer(g, "qdq_weight_t", w->dtype, &s, t,
                                                  (size_t)(N * K), &f->w_data, ctx->d);
        if (st != CP_OK)
            return st;
    }
    *ok = true;
    return CP_OK;
}

static enum cp_status rewrite(struct cp_pass_ctx *ctx, const struct fold *f)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *p = cp_graph_node(g, f->prod);
    char name[400];
    enum cp_status st;
    int32_t nn;
    bool conv = f->conv;
    if (f->q >= 0) {
        const struct cp_node *q = cp_graph_node(g, f->q);
        int32_t ins[9] = {f->x.x,     f->x.scale, f->x.zp,      f->w_data,
                          f->w.scale, f->w.zp,    q->inputs[1], q->n_inputs > 2 ? q->inputs[2] : -1,
                          f->bias_i32};
        int32_t outs[1] = {q->outputs[0]}, from[4] = {f->x.node, f->w.node, f->prod, f->q};
        cp_rw_kill(g, f->prod);
        cp_rw_kill(g, f->q);
        cp_rw_unique_node_name(g, p->name, name, sizeof name);
        st = cp_rw_add_node(g, name, conv ? "QLinearConv" : "QLinearMatMul", "", ins,
                            conv && f->bias_i32 >= 0 ? 9 : 8, outs, 1, from, 4, &nn, ctx->d);
        if (st == CP_OK && conv && cp_rw_copy_attrs(g, nn, cp_graph_node(g, f->prod)) != CP_OK)
            st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
        return st;
    }
    /* Float form: Integer op -> Cast -> Mul(scale) [-> Add(bias)]. */
    int32_t acc = new_tensor(ctx, "qdq_acc", CP_DTYPE_I32);
    int32_t accf = new_tensor(ctx, "qdq_acc_f32", CP_DTYPE_F32);
    if (acc < 0 || accf < 0)
        return CP_ERR_NOMEM;
    int64_t ch = f->channels;
    float *sv = malloc((size_t)ch * sizeof *sv);
    if (!sv)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
    for (int64_t c = 0; c < ch; c++)
        sv[c] = fat(g, f->x.scale, 0) * fat(g, f->w.scale, c);
    int ry = cp_graph_tensor(g, p->outputs[0])->shape.rank;
    int64_t dims[CP_MAX_RANK];
    int r = conv ? ry : 1;
    for (int i = 0; i < r; i++)
        dims[i] = 1;
    dims[conv ? 1 : 0] = ch;
    int32_t scale = const_f32(ctx, "qdq_out_scale", r, dims, sv);
    if (scale < 0)
        return CP_ERR_NOMEM;
    int32_t bias = p->n_inputs > 2 ? p->inputs[2] : -1;
    int32_t biasr = -1;
    if (bias >= 0 && conv) {
        /* The Conv bias [M] reshaped to [1, M, 1, ...] as a constant when it
         * is one, else through its dequantized value (a DQ output). */
        const struct cp_tensor *bt = cp_graph_tensor(g, bias);
        if (is_const(g, bias) && bt->dtype == CP_DTYPE_F32) {
            float *bv = malloc((size_t)ch * sizeof *bv);
            if (!bv)
                return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
            memcpy(bv, bt->data, (size_t)ch * sizeof *bv);
            biasr = const_f32(ctx, "qdq_bias", r, dims, bv);
        } else {
            return cp_diag_set(ctx->d, CP_ERR_INTERNAL, "node '%s': bias not constant", p->name);
        }
    } else if (bias >= 0) {
        biasr = bias; /* Gemm's C broadcasts as Add does */
    }
    int32_t yout = p->outputs[0];
    int32_t mul_out = biasr >= 0 ? new_tensor(ctx, "qdq_scaled", CP_DTYPE_F32) : yout;
    int32_t from[3] = {f->x.node, f->w.node, f->prod};
    int32_t ins[4] = {f->x.x, f->w_data, f->x.zp, f->w.zp};
    cp_rw_kill(g, f->prod);
    cp_rw_unique_node_name(g, p->name, name, sizeof name);
    st = cp_rw_add_node(g, name, conv ? "ConvInteger" : "MatMulInteger", "", ins, 4, &acc, 1, from,
                        3, &nn, ctx->d);
    if (st == CP_OK && conv && cp_rw_copy_attrs(g, nn, cp_graph_node(g, f->prod)) != CP_OK)
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
    if (st != CP_OK)
        return st;
    char base[400];
    snprintf(base, sizeof base, "%s_cast", p->name);
    cp_rw_unique_node_name(g, base, name, sizeof name);
    if ((st = cp_rw_add_node(g, name, "Cast", "", &acc, 1, &accf, 1, &f->prod, 1, &nn, ctx->d)) !=
        CP_OK)
        return st;
    if ((st = cp_node_set_int(g, nn, "to", 1)) != CP_OK)
        return st;
    snprintf(base, sizeof base, "%s_scale", p->name);
    cp_rw_unique_node_name(g, base, name, sizeof name);
    int32_t mi[2] = {accf, scale};
    if ((st = cp_rw_add_node(g, name, "Mul", "", mi, 2, &mul_out, 1, &f->prod, 1, &nn, ctx->d)) !=
        CP_OK)
        return st;
    if (biasr >= 0) {
        snprintf(base, sizeof base, "%s_bias", p->name);
        cp_rw_unique_node_name(g, base, name, sizeof name);
        int32_t ai[2] = {mul_out, biasr};
        st = cp_rw_add_node(g, name, "Add", "", ai, 2, &yout, 1, &f->prod, 1, &nn, ctx->d);
    }
    return st;
}

enum cp_status cp_quant_qdq_fold_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    *changed = false;
    size_t n = cp_graph_n_nodes(g);
    for (size_t i = 0; i < n; i++) {
        const struct cp_node *p = cp_graph_node(g, (int32_t)i);
        if (p->dead || (p->op != CP_OP_CONV && p->op != CP_OP_MATMUL && p->op != CP_OP_GEMM))
            continue;
        struct fold f;
        bool ok;
        enum cp_status st = match(ctx, (int32_t)i, &f, &ok);
        if (st == CP_OK && ok) {
            /* The float form of a Conv with a non-constant bias is not made. */
            const struct cp_node *pp = cp_graph_node(g, (int32_t)i);
            if (f.q < 0 && f.conv && pp->n_inputs > 2 && pp->inputs[2] >= 0 &&
                !(is_const(g, pp->inputs[2]) &&
                  cp_graph_tensor(g, pp->inputs[2])->dtype == CP_DTYPE_F32))
                continue;
            st = rewrite(ctx, &f);
            *changed = true;
        }
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}
