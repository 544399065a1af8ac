/* Int8QuantizationPass: post-training quantization of the nodes
 * --int8_nodes lists, with the activation ranges of --quant_ranges (or of
 * the calibration `cannprof convert` ran).
 *
 * A quantized Conv, MatMul or Gemm keeps its op and its f32 tensors; it is
 * marked, as the precision pass marks bf16 nodes, so the fusion passes
 * still fold its bias, activation and residual into it and the layout pass
 * still lays its activations out:
 *
 *   compute_precision "int8"
 *   int8_x_scale (float)   the input's scale: x_q = round(x / scale)
 *   int8_x_signed (int)    0: x_q is u8 (the range holds no negative
 *                          value: [0, 255] * scale); 1: s8, symmetric
 *                          ([-127, 127] * scale)
 *   int8_w_scales (floats) one scale per output channel (Conv: M; MatMul
 *                          and Gemm: the N output columns): w_q =
 *                          round(w / scale), s8 symmetric
 *
 * Zero points are 0 on both sides, so a convolution's zero padding is
 * exact. Weight scales map max|w| of a channel onto 127, or onto 63 without
 * avx512_vnni (ONNX Runtime's reduce_range: AVX2's u8 x s8 multiply-add
 * saturates in s16). The kernels (runner/cpu/dnnl_conv.c, dnnl_matmul.c)
 * quantize the input at run time and the weights once, accumulate in s32
 * and scale back to f32 before the bias and post-ops, so tensors stay f32
 * at the node's boundary. The .om records the scales as these attributes,
 * and the ranges and calibration method in its config.
 *
 * A node is quantized when it is listed (by name or OpType::X), its weight
 * is a constant f32 initializer of the supported form and its input has a
 * range. Listed nodes that cannot be are left in float and counted in a
 * warning that names the first of them and why. */
#include "atc_bridge/passes/pass.h"
#include "atc_bridge/passes/rewrite.h"
#include "om/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The input's parameters for the range [lo, hi]: u8 when lo >= 0, else
 * s8 symmetric. False when the range holds only 0. */
static bool act_params(double lo, double hi, float *scale, bool *is_signed)
{
    *is_signed = lo < 0;
    double s = *is_signed ? fmax(-lo, fmax(hi, 0.0)) / 127.0 : fmax(hi, 0.0) / 255.0;
    if (!(s > 0) || !isfinite(s))
        return false;
    *scale = (float)s;
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
    case CP_OP_FUSED_MATMUL: /* a MatMul the transpose pass gave transB */
        if (cp_node_attr_int(n, "transA", 0) != 0 || wt->shape.rank != 2 || n->n_inputs > 2)
            return "this FusedMatMul has no int8 form";
        ws->axis = cp_node_attr_int(n, "transB", 0) ? 0 : 1;
        return NULL;
    default:
        return "only Conv, MatMul and Gemm have int8 kernels";
    }
}

/* Per-output-channel scales of the weight (axis: the channel axis of the
 * stored tensor; -1 one scale for all), into out[channels]. */
static int64_t weight_scales(const struct cp_graph *g, const struct wsel *ws, double qmax,
                             float **out)
{
    const struct cp_tensor *wt = cp_graph_tensor(g, ws->w);
    const float *wv = cp_rw_const_data(g, ws->w);
    int64_t numel = cp_shape_numel(&wt->shape);
    int64_t ch = ws->axis < 0 ? 1 : wt->shape.dims[ws->axis].value;
    int64_t inner = ws->axis == 0 ? numel / (ch ? ch : 1) : 1;
    float *sc = calloc((size_t)(ch > 0 ? ch : 1), sizeof *sc);
    *out = sc;
    if (!sc)
        return -1;
    for (int64_t i = 0; i < numel; i++) {
        int64_t c = ws->axis < 0 ? 0 : ws->axis == 0 ? i / inner : i % ch;
        float a = fabsf(wv[i]);
        if (a > sc[c])
            sc[c] = a;
    }
    for (int64_t c = 0; c < ch; c++)
        sc[c] = sc[c] > 0 ? (float)(sc[c] / qmax) : 1.0f;
    return ch;
}

/* The number of output channels the kernels scale by: Conv M; MatMul and
 * Gemm N. A per-tensor weight scale is repeated over them. */
static int64_t out_channels(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *y = cp_graph_tensor(g, n->outputs[0]);
    if (y->shape.rank < 2)
        return -1;
    return n->op == CP_OP_CONV ? y->shape.dims[1].value : y->shape.dims[y->shape.rank - 1].value;
}

static enum cp_status ptq_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    const struct cp_convert_config *c = ctx->config;
    *changed = false;
    if (!c || !c->int8_nodes[0])
        return CP_OK;
    size_t done = 0, skipped = 0;
    char first_skip[600] = "";
    enum cp_status st = CP_OK;
    double qmax = ctx->has_vnni ? 127.0 : 63.0;
    for (size_t i = 0; i < cp_graph_n_nodes(g) && st == CP_OK; i++) {
        const struct cp_node *nd = cp_graph_node(g, (int32_t)i);
        if (nd->dead ||
            (nd->op != CP_OP_CONV && nd->op != CP_OP_MATMUL && nd->op != CP_OP_GEMM &&
             nd->op != CP_OP_FUSED_MATMUL) ||
            !cp_keep_dtype_covers(c->int8_nodes, nd))
            continue;
        struct wsel ws = {-1, -1};
        const char *why = supported(g, nd, &ws);
        double lo = 0, hi = 0;
        float xs = 0;
        bool x_signed = false;
        int64_t m = why ? -1 : out_channels(g, nd);
        if (!why && m <= 0)
            why = "its output shape is not known";
        if (!why) {
            if (!cp_quant_ranges_find(c->quant_ranges, cp_graph_tensor(g, nd->inputs[0])->name, &lo,
                                      &hi))
                why = "its input has no calibrated range";
            else if (!act_params(lo, hi, &xs, &x_signed))
                why = "its input's calibrated range is [0, 0]";
        }
        if (why) {
            if (!skipped++)
                snprintf(first_skip, sizeof first_skip, "'%s' (%s)", nd->name, why);
            continue;
        }
        float *sc = NULL;
        int64_t ch = weight_scales(g, &ws, qmax, &sc);
        float *per = ch > 0 ? malloc((size_t)m * sizeof *per) : NULL;
        if (!per) {
            free(sc);
            return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory");
        }
        if (ch != 1 && ch != m) {
            free(sc);
            free(per);
            if (!skipped++)
                snprintf(first_skip, sizeof first_skip, "'%s' (%s)", nd->name,
                         "its weight's channels do not match its output");
            continue;
        }
        for (int64_t k = 0; k < m; k++)
            per[k] = sc[ch == 1 ? 0 : k];
        free(sc);
        int32_t self = (int32_t)i;
        if ((st = cp_node_set_string(g, self, "compute_precision", "int8")) == CP_OK &&
            (st = cp_node_set_float(g, self, "int8_x_scale", xs)) == CP_OK &&
            (st = cp_node_set_int(g, self, "int8_x_signed", x_signed)) == CP_OK)
            st = cp_node_set_floats(g, self, "int8_w_scales", per, (size_t)m);
        free(per);
        if (st != CP_OK)
            return cp_diag_set(ctx->d, st, "out of memory marking node '%s'", nd->name);
        done++;
        *changed = true;
    }
    if (skipped)
        cp_log_msg(ctx->log, CP_LOG_WARNING,
                   "--int8_nodes: %zu listed node%s stay%s in float, first %s; %zu quantized",
                   skipped, skipped == 1 ? "" : "s", skipped == 1 ? "s" : "", first_skip, done);
    return CP_OK;
}

const struct cp_pass cp_quant_passes[] = {
    {"Int8QuantizationPass", "GraphFusion",
     "--int8_nodes with calibrated ranges: marks Conv/MatMul/Gemm for int8 compute (input "
     "scale, per-channel weight scales); fusion and layout still apply",
     ptq_run},
    {NULL, NULL, NULL, NULL},
};
