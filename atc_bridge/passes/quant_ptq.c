/* Int8QuantizationPass: post-training quantization of the nodes
 * --int8_nodes lists, with the activation ranges of --quant_ranges (or of
 * the calibration `cannprof convert` ran). It writes the QDQ form ONNX
 * Runtime's quantizer and AMCT write, which QDQFoldPass (the next family)
 * folds into int8 kernels:
 *
 *   x ─ QuantizeLinear(s_x, zp_x) ─ DequantizeLinear ─┐
 *   W (int8 per output channel) ─ DequantizeLinear ───┼─ Conv/MatMul/Gemm ─ y
 *   bias (f32, quantized by the fold)                 ┘
 *   y ─ QuantizeLinear(s_y, zp_y) ─ DequantizeLinear ─ the consumers of y
 *
 * Activations are u8, per tensor, asymmetric: the range [lo, hi] (widened
 * to hold 0, so zero padding is exact) maps onto 0..255. Weights are s8,
 * symmetric, one scale per output channel: max|w| maps onto 127, or onto 63
 * without avx512_vnni (oneDNN's int8 kernels on AVX2 multiply pairs of u8 x
 * s8 into s16, which saturates with full-range weights: ONNX Runtime's
 * reduce_range). The output Q/DQ pair is written when y has a range and is
 * not a graph output, so the fold makes a QLinearConv (requantized output)
 * and the next int8 node reads its u8 result through the DQ; without it the
 * fold makes the float-output form (ConvInteger, then the scaling).
 *
 * A node is quantized when it is listed (by name or OpType::X), its weight
 * is a constant f32 initializer of the supported form, and its input has a
 * range. Listed nodes that cannot be are left in float and counted in a
 * warning that names the first of them and why. */
#include "atc_bridge/passes/pass.h"
#include "atc_bridge/passes/rewrite.h"
#include "om/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* u8 activation parameters for the range [lo, hi]; false when the range
 * holds only 0 (nothing to represent). */
static bool act_params(double lo, double hi, float *scale, uint8_t *zp)
{
    lo = fmin(lo, 0.0);
    hi = fmax(hi, 0.0);
    double s = (hi - lo) / 255.0;
    if (!(s > 0) || !isfinite(s))
        return false;
    double z = nearbyint(-lo / s);
    *scale = (float)s;
    *zp = (uint8_t)(z < 0 ? 0 : z > 255 ? 255 : z);
    return true;
}

/* The weight of a node the pass can quantize, and the axis of its output
 * channels (-1: one scale for the tensor). */
struct wsel {
    int32_t w;
    int axis;
};

static bool const_f32(const struct cp_graph *g, int32_t t)
{
    return t >= 0 && cp_rw_const_data(g, t) != NULL &&
           cp_graph_tensor(g, t)->dtype == CP_DTYPE_F32 &&
           cp_shape_is_static(&cp_graph_tensor(g, t)->shape);
}

static const char *supported(const struct cp_graph *g, const struct cp_node *n, struct wsel *ws)
{
    if (n->n_inputs < 2 || n->n_outputs < 1)
        return "it has no weight input";
    int32_t x = n->inputs[0], w = n->inputs[1];
    if (cp_graph_tensor(g, x)->dtype != CP_DTYPE_F32)
        return "its input is not f32";
    if (!const_f32(g, w))
        return "its weight is not a constant f32 initializer";
    const struct cp_tensor *wt = cp_graph_tensor(g, w);
    ws->w = w;
    switch (n->op) {
    case CP_OP_CONV:
        if (wt->shape.rank != 4 || cp_graph_tensor(g, x)->shape.rank != 4)
            return "only 2-D convolutions have int8 kernels";
        if (n->n_inputs > 2 && n->inputs[2] >= 0 && !const_f32(g, n->inputs[2]))
            return "its bias is not a constant f32 initializer";
        ws->axis = 0;
        return NULL;
    case CP_OP_MATMUL:
        if (wt->shape.rank != 2)
            return "its right operand is not a 2-D constant";
        ws->axis = 1;
        return NULL;
    case CP_OP_GEMM:
        if (cp_node_attr_int(n, "transA", 0) != 0 || cp_node_attr_float(n, "alpha", 1.0f) != 1.0f ||
            cp_node_attr_float(n, "beta", 1.0f) != 1.0f || wt->shape.rank != 2)
            return "Gemm with transA, alpha or beta has no int8 form";
        if (n->n_inputs > 2 && n->inputs[2] >= 0 && !const_f32(g, n->inputs[2]))
            return "its bias is not a constant f32 initializer";
        ws->axis = cp_node_attr_int(n, "transB", 0) ? 0 : -1;
        return NULL;
    default:
        return "only Conv, MatMul and Gemm have int8 kernels";
    }
}

static int32_t add_tensor(struct cp_pass_ctx *ctx, const char *base, enum cp_dtype dt)
{
    char name[400];
    cp_rw_unique_tensor_name(ctx->g, base, name, sizeof name);
    int32_t idx = -1;
    if (cp_graph_add_tensor(ctx->g, name, dt, NULL, CP_TENSOR_INTERMEDIATE, &idx, ctx->d) != CP_OK)
        return -1;
    return idx;
}

/* A scalar (or [n]) initializer. */
static int32_t add_const(struct cp_pass_ctx *ctx, const char *base, enum cp_dtype dt, int64_t n,
                         bool vector, const void *v, size_t elem)
{
    void *data = malloc((size_t)n * elem);
    if (!data) {
        cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
        return -1;
    }
    memcpy(data, v, (size_t)n * elem);
    struct cp_shape s;
    int64_t dims[1] = {n};
    cp_shape_set(&s, vector ? 1 : 0, dims);
    int32_t t = -1;
    if (cp_rw_add_initializer(ctx->g, base, dt, &s, data, (size_t)n * elem, &t, ctx->d) != CP_OK)
        return -1;
    return t;
}

/* QuantizeLinear(src) -> DequantizeLinear into `out` (created when -1).
 * OUT: *dq_out, the dequantized tensor. */
static enum cp_status qdq_pair(struct cp_pass_ctx *ctx, int32_t src, float scale, uint8_t zp,
                               int32_t from, int32_t out, int32_t *dq_out)
{
    struct cp_graph *g = ctx->g;
    char base[400], name[400];
    const char *tn = cp_graph_tensor(g, src)->name;
    snprintf(base, sizeof base, "%s_scale", tn);
    int32_t s = add_const(ctx, base, CP_DTYPE_F32, 1, false, &scale, sizeof scale);
    snprintf(base, sizeof base, "%s_zero_point", tn);
    int32_t z = s < 0 ? -1 : add_const(ctx, base, CP_DTYPE_U8, 1, false, &zp, 1);
    snprintf(base, sizeof base, "%s_quantized", tn);
    int32_t q = z < 0 ? -1 : add_tensor(ctx, base, CP_DTYPE_U8);
    snprintf(base, sizeof base, "%s_dequantized", tn);
    int32_t dq = out >= 0 ? out : q < 0 ? -1 : add_tensor(ctx, base, CP_DTYPE_F32);
    if (dq < 0 || q < 0)
        return ctx->d->status ? ctx->d->status : CP_ERR_NOMEM;
    enum cp_status st;
    int32_t qi[3] = {src, s, z}, di[3] = {q, s, z};
    snprintf(base, sizeof base, "%s_QuantizeLinear", tn);
    cp_rw_unique_node_name(g, base, name, sizeof name);
    if ((st = cp_rw_add_node(g, name, "QuantizeLinear", "", qi, 3, &q, 1, &from, 1, NULL,
                             ctx->d)) != CP_OK)
        return st;
    snprintf(base, sizeof base, "%s_DequantizeLinear", tn);
    cp_rw_unique_node_name(g, base, name, sizeof name);
    if ((st = cp_rw_add_node(g, name, "DequantizeLinear", "", di, 3, &dq, 1, &from, 1, NULL,
                             ctx->d)) != CP_OK)
        return st;
    *dq_out = dq;
    return CP_OK;
}

/* The weight as s8 per output channel (axis; -1 one scale) behind a
 * DequantizeLinear. OUT: *dq_out. */
static enum cp_status quantize_weight(struct cp_pass_ctx *ctx, const struct wsel *ws, int32_t from,
                                      int32_t *dq_out)
{
    struct cp_graph *g = ctx->g;
    const struct cp_tensor *wt = cp_graph_tensor(g, ws->w);
    const float *wv = cp_rw_const_data(g, ws->w);
    int64_t numel = cp_shape_numel(&wt->shape);
    int64_t ch = ws->axis < 0 ? 1 : wt->shape.dims[ws->axis].value;
    /* element i's channel: axis 0 -> i / inner; axis 1 (of 2-D) -> i % cols */
    int64_t inner = ws->axis == 0 ? numel / (ch ? ch : 1) : 1;
    double qmax = ctx->has_vnni ? 127.0 : 63.0;
    float *scales = calloc((size_t)(ch ? ch : 1), sizeof *scales);
    int8_t *q = malloc((size_t)(numel ? numel : 1));
    int8_t *zps = calloc((size_t)(ch ? ch : 1), 1);
    enum cp_status st = CP_OK;
    if (!scales || !q || !zps) {
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
        goto out;
    }
    for (int64_t i = 0; i < numel; i++) {
        int64_t c = ws->axis < 0 ? 0 : ws->axis == 0 ? i / inner : i % ch;
        float a = fabsf(wv[i]);
        if (a > scales[c])
            scales[c] = a;
    }
    for (int64_t c = 0; c < ch; c++)
        scales[c] = scales[c] > 0 ? (float)(scales[c] / qmax) : 1.0f;
    for (int64_t i = 0; i < numel; i++) {
        int64_t c = ws->axis < 0 ? 0 : ws->axis == 0 ? i / inner : i % ch;
        double v = nearbyint(wv[i] / scales[c]);
        q[i] = (int8_t)(v > qmax ? qmax : v < -qmax ? -qmax : v);
    }
    char base[400], name[400];
    snprintf(base, sizeof base, "%s_quantized", wt->name);
    int32_t wq = -1;
    struct cp_shape shape = wt->shape;
    if ((st = cp_rw_add_initializer(g, base, CP_DTYPE_I8, &shape, q, (size_t)numel, &wq, ctx->d)) !=
        CP_OK) {
        q = NULL;
        goto out;
    }
    q = NULL; /* taken over */
    snprintf(base, sizeof base, "%s_scale", wt->name);
    int32_t s = add_const(ctx, base, CP_DTYPE_F32, ch, ws->axis >= 0, scales, sizeof *scales);
    snprintf(base, sizeof base, "%s_zero_point", wt->name);
    int32_t z = s < 0 ? -1 : add_const(ctx, base, CP_DTYPE_I8, ch, ws->axis >= 0, zps, 1);
    snprintf(base, sizeof base, "%s_dequantized", wt->name);
    int32_t dq = z < 0 ? -1 : add_tensor(ctx, base, CP_DTYPE_F32);
    if (dq < 0) {
        st = ctx->d->status ? ctx->d->status : CP_ERR_NOMEM;
        goto out;
    }
    int32_t di[3] = {wq, s, z};
    snprintf(base, sizeof base, "%s_DequantizeLinear", wt->name);
    cp_rw_unique_node_name(g, base, name, sizeof name);
    int32_t nn = -1;
    if ((st = cp_rw_add_node(g, name, "DequantizeLinear", "", di, 3, &dq, 1, &from, 1, &nn,
                             ctx->d)) != CP_OK)
        goto out;
    if (ws->axis >= 0 && (st = cp_node_set_int(g, nn, "axis", ws->axis)) != CP_OK)
        goto out;
    *dq_out = dq;
out:
    free(scales);
    free(q);
    free(zps);
    return st;
}

/* Whether t is already dequantized (the output Q/DQ of a node quantized
 * before, or a QDQ model's own): then the node reads it as it is. */
static bool is_dequantized(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *tt = cp_graph_tensor(g, t);
    return tt->producer >= 0 && cp_graph_node(g, tt->producer)->op == CP_OP_DEQUANTIZE_LINEAR;
}

static enum cp_status ptq_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    const struct cp_convert_config *c = ctx->config;
    *changed = false;
    if (!c || !c->int8_nodes[0])
        return CP_OK;
    size_t n = cp_graph_n_nodes(g);
    /* x tensor -> its dequantized twin, for inputs several nodes share */
    int32_t *twin = malloc(cp_graph_n_tensors(g) * sizeof *twin);
    size_t n_twin_cap = cp_graph_n_tensors(g);
    if (!twin)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < n_twin_cap; i++)
        twin[i] = -1;
    size_t done = 0, skipped = 0;
    char first_skip[600] = "";
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead || (nd->op != CP_OP_CONV && nd->op != CP_OP_MATMUL && nd->op != CP_OP_GEMM) ||
            !cp_keep_dtype_covers(c->int8_nodes, nd))
            continue;
        struct wsel ws = {-1, -1};
        const char *why = supported(g, nd, &ws);
        int32_t x = nd->inputs[0], y = nd->outputs[0];
        double lo = 0, hi = 0;
        float xs = 0;
        uint8_t xz = 0;
        bool x_ready = is_dequantized(g, x) || ((size_t)x < n_twin_cap && twin[x] >= 0);
        if (!why && !x_ready) {
            if (!cp_quant_ranges_find(c->quant_ranges, cp_graph_tensor(g, x)->name, &lo, &hi))
                why = "its input has no calibrated range";
            else if (!act_params(lo, hi, &xs, &xz))
                why = "its input's calibrated range is [0, 0]";
        }
        if (why) {
            if (!skipped++)
                snprintf(first_skip, sizeof first_skip, "'%s' (%s)", nd->name, why);
            continue;
        }
        int32_t self = (int32_t)i;
        int32_t xin = x;
        if (!is_dequantized(g, x)) {
            if ((size_t)x < n_twin_cap && twin[x] >= 0) {
                xin = twin[x];
            } else if ((st = qdq_pair(ctx, x, xs, xz, self, -1, &xin)) != CP_OK) {
                break;
            } else if ((size_t)x < n_twin_cap) {
                twin[x] = xin;
            }
        }
        int32_t win = -1;
        if ((st = quantize_weight(ctx, &ws, self, &win)) != CP_OK)
            break;
        struct cp_node *mn = cp_graph_node(g, self);
        mn->inputs[0] = xin;
        mn->inputs[1] = win;
        /* The output pair: y's consumers read DQ(Q(y)). */
        float ys;
        uint8_t yz;
        if (!cp_rw_is_graph_output(g, y) &&
            cp_quant_ranges_find(c->quant_ranges, cp_graph_tensor(g, y)->name, &lo, &hi) &&
            act_params(lo, hi, &ys, &yz) && cp_rw_n_uses(g, y) > 0) {
            char base[400];
            snprintf(base, sizeof base, "%s_dequantized", cp_graph_tensor(g, y)->name);
            int32_t ydq = add_tensor(ctx, base, CP_DTYPE_F32);
            if (ydq < 0) {
                st = ctx->d->status ? ctx->d->status : CP_ERR_NOMEM;
                break;
            }
            cp_rw_replace_uses(g, y, ydq);
            int32_t got;
            if ((st = qdq_pair(ctx, y, ys, yz, self, ydq, &got)) != CP_OK)
                break;
        }
        done++;
        *changed = true;
    }
    free(twin);
    if (st == CP_OK && skipped)
        cp_log_msg(ctx->log, CP_LOG_WARNING,
                   "--int8_nodes: %zu listed node%s stay%s in float, first %s; %zu quantized",
                   skipped, skipped == 1 ? "" : "s", skipped == 1 ? "s" : "", first_skip, done);
    return st;
}

const struct cp_pass cp_quant_passes[] = {
    {"Int8QuantizationPass", "GraphFusion",
     "--int8_nodes with calibrated ranges: Conv/MatMul/Gemm get u8 activations and per-channel "
     "s8 weights as QDQ pairs, which QDQFoldPass folds into int8 kernels",
     ptq_run},
    {NULL, NULL, NULL, NULL},
};
