/* FLOP and byte estimates from inferred shapes.
 *
 * The numbers rank nodes against each other and feed roofline estimates;
 * they are not exact instruction counts. Conventions:
 *   - a multiply-add is 2 FLOPs (MatMul, Gemm, convolutions);
 *   - elementwise ops count 1 per output element, transcendental ones (Exp,
 *     Erf, Tanh, Sigmoid, Pow, Sqrt) included: their real cost depends on
 *     the kernel's approximation and is not modelled;
 *   - Softmax 5 per element (max, subtract, exp, sum, divide);
 *   - LayerNormalization and InstanceNormalization 8 per element (mean,
 *     variance, normalize, scale, shift); BatchNormalization 2, since at
 *     inference it is a per-channel scale and shift;
 *   - reductions and GlobalAveragePool 1 per input element; pools the
 *     kernel size per output element; Resize 0 for nearest, 4 per output
 *     element for linear and 16 for cubic;
 *   - data movement (Reshape, Transpose, Concat, Gather, Cast, ...) is 0.
 * Bytes count every input and output once (weights included); a Shape node
 * only writes its output. Dynamic dims count as 1; a tensor of unknown rank
 * counts as 0 bytes.
 */
#include "graph/graph.h"
#include "graph/op_eval.h" /* Einsum's equation */

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Element count with dynamic dims as 1; 0 when the rank is unknown. */
static double numel_est(const struct cp_shape *s)
{
    if (s->rank < 0)
        return 0.0;
    double n = 1.0;
    for (int k = 0; k < s->rank; k++)
        n *= s->dims[k].value >= 0 ? (double)s->dims[k].value : 1.0;
    return n;
}

static double dim_est(const struct cp_shape *s, int k)
{
    if (k < 0 || k >= s->rank)
        return 1.0;
    return s->dims[k].value >= 0 ? (double)s->dims[k].value : 1.0;
}

static const struct cp_tensor *input(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    return i < n->n_inputs && n->inputs[i] >= 0 ? cp_graph_tensor(g, n->inputs[i]) : NULL;
}

static const struct cp_tensor *output(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    return i < n->n_outputs && n->outputs[i] >= 0 ? cp_graph_tensor(g, n->outputs[i]) : NULL;
}

static double tensor_bytes(const struct cp_tensor *t)
{
    return t ? numel_est(&t->shape) * (double)cp_dtype_size(t->dtype) : 0.0;
}

/* Product of a weight's kernel dims (from dim 2 on). */
static double kernel_size(const struct cp_shape *w)
{
    double k = 1.0;
    for (int i = 2; i < w->rank; i++)
        k *= dim_est(w, i);
    return k;
}

static double pool_kernel(const struct cp_node *n)
{
    const struct cp_attr *a = cp_node_attr(n, "kernel_shape");
    double k = 1.0;
    if (a && a->type == CP_ATTR_INTS)
        for (size_t i = 0; i < a->n; i++)
            k *= a->ints[i] > 0 ? (double)a->ints[i] : 1.0;
    return k;
}

/* ---- [control] ---- */
/* If: the dearer branch; Loop and Scan: the body times the trip count
 * (the scan outputs' leading or scan dimension, 1 when unknown). */
static double sub_flops(const struct cp_graph *sub)
{
    double f = 0.0;
    for (size_t i = 0; i < cp_graph_n_nodes(sub); i++) {
        const struct cp_node *n = cp_graph_node(sub, (int32_t)i);
        if (!n->dead)
            f += cp_node_cost(sub, n).flops;
    }
    return f;
}

static double cp_control_flops(const struct cp_graph *g, const struct cp_node *n)
{
    double best = 0.0, trips = 1.0;
    for (size_t j = 0; j < n->n_attrs; j++)
        if (n->attrs[j].type == CP_ATTR_GRAPH) {
            double f = sub_flops(n->attrs[j].graph);
            best = f > best ? f : best;
        }
    if (n->op == CP_OP_LOOP || n->op == CP_OP_SCAN) {
        const struct cp_attr *b = cp_node_attr(n, "body");
        size_t bi = b && b->type == CP_ATTR_GRAPH ? cp_graph_n_inputs(b->graph) : 0;
        size_t states = n->op == CP_OP_LOOP
                            ? (bi >= 2 ? bi - 2 : 0)
                            : bi - (size_t)cp_node_attr_int(n, "num_scan_inputs", (int64_t)bi);
        const struct cp_tensor *y =
            states < n->n_outputs ? cp_graph_tensor(g, n->outputs[states]) : NULL;
        bool v8 = cp_graph_opset(g) < 9 && n->op == CP_OP_SCAN;
        int d = v8 ? 1 : 0;
        if (n->op == CP_OP_SCAN && !v8 && y) {
            const struct cp_attr *ax = cp_node_attr(n, "scan_output_axes");
            int64_t a = ax && ax->type == CP_ATTR_INTS && ax->n ? ax->ints[0] : 0;
            d = (int)(a < 0 ? a + y->shape.rank : a);
        }
        if (y && y->shape.rank > d && y->shape.dims[d].value > 0)
            trips = (double)y->shape.dims[d].value;
    }
    return best * trips;
}

static double flops(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = input(g, n, 0), *w = input(g, n, 1), *y = output(g, n, 0);
    double out = y ? numel_est(&y->shape) : 0.0;
    double in = x ? numel_est(&x->shape) : 0.0;
    switch (n->op) {
    case CP_OP_ADD:
    case CP_OP_SUB:
    case CP_OP_MUL:
    case CP_OP_DIV:
    case CP_OP_POW:
    case CP_OP_SQRT:
    case CP_OP_EXP:
    case CP_OP_ERF:
    case CP_OP_TANH:
    case CP_OP_SIGMOID:
    case CP_OP_RELU:
    case CP_OP_LEAKY_RELU:
    case CP_OP_CLIP:
    case CP_OP_EQUAL:
    case CP_OP_WHERE:
        return out;
    case CP_OP_SOFTMAX:
        return 5.0 * out;
    case CP_OP_LAYER_NORMALIZATION:
    case CP_OP_INSTANCE_NORMALIZATION:
        return 8.0 * out;
    case CP_OP_BATCH_NORMALIZATION:
        return 2.0 * out;
    case CP_OP_REDUCE_MEAN:
    case CP_OP_REDUCE_SUM:
    case CP_OP_REDUCE_MAX:
    case CP_OP_GLOBAL_AVERAGE_POOL:
        return in;
    case CP_OP_MAX_POOL:
    case CP_OP_AVERAGE_POOL:
        return out * pool_kernel(n);
    case CP_OP_MATMUL: {
        /* Every output element is a K-long dot product. */
        double k = x && x->shape.rank >= 1 ? dim_est(&x->shape, x->shape.rank - 1) : 1.0;
        return 2.0 * out * k;
    }
    case CP_OP_GEMM: {
        bool ta = cp_node_attr_int(n, "transA", 0) != 0;
        double k = x ? dim_est(&x->shape, ta ? 0 : 1) : 1.0;
        return 2.0 * out * k + (input(g, n, 2) ? out : 0.0);
    }
    case CP_OP_FUSED_CONV:
    case CP_OP_CONV: {
        /* 2 * N * Cout * spatial_out * (Cin / group) * kernel (+ bias). */
        if (!w)
            return 0.0;
        double per = dim_est(&w->shape, 1) * kernel_size(&w->shape);
        return 2.0 * out * per + (input(g, n, 2) ? out : 0.0);
    }
    case CP_OP_CONV_TRANSPOSE: {
        /* Every input element scatters into (Cout / group) * kernel outputs. */
        if (!w)
            return 0.0;
        double per = dim_est(&w->shape, 1) * kernel_size(&w->shape);
        return 2.0 * in * per + (input(g, n, 2) ? out : 0.0);
    }
    case CP_OP_FUSED_MATMUL: {
        bool ta = cp_node_attr_int(n, "transA", 0) != 0;
        int r = x ? x->shape.rank : 0;
        double k = r >= 2 ? dim_est(&x->shape, ta ? r - 2 : r - 1) : 1.0;
        return 2.0 * out * k + (input(g, n, 2) ? out : 0.0) + (input(g, n, 3) ? out : 0.0);
    }
    case CP_OP_GROUP_NORMALIZATION:
        return 8.0 * out;
    case CP_OP_GELU:
        return 8.0 * out;
    case CP_OP_FUSED_ATTENTION: {
        /* Q Kᵀ and P V: 2 * B*H*N*M*D each, plus ~5 per score for softmax.
         * M and D come from K (BHND, BHDN or BNHD). */
        const struct cp_tensor *k = input(g, n, 1);
        double heads = (double)cp_node_attr_int(n, "num_heads", 1);
        const char *kf = cp_node_attr_string(n, "k_format", "BHND");
        const char *qf = cp_node_attr_string(n, "q_format", "BHND");
        if (!x || !k || x->shape.rank < 3 || k->shape.rank < 3)
            return 0.0;
        double bh_n_d = numel_est(&x->shape); /* B*H*N*D in every format */
        double d = strcmp(qf, "BNHD") == 0 ? dim_est(&x->shape, 2) / heads : dim_est(&x->shape, 3);
        double m = strcmp(kf, "BNHD") == 0   ? dim_est(&k->shape, 1)
                   : strcmp(kf, "BHDN") == 0 ? dim_est(&k->shape, 3)
                                             : dim_est(&k->shape, 2);
        double scores = d > 0 ? bh_n_d / d * m : 0.0;
        return 4.0 * scores * d + 5.0 * scores;
    }
    case CP_OP_RESIZE: {
        const char *mode = cp_node_attr_string(n, "mode", "nearest");
        if (strcmp(mode, "linear") == 0)
            return 4.0 * out;
        if (strcmp(mode, "cubic") == 0)
            return 16.0 * out;
        return 0.0;
    }
    /* ---- [elementwise] ---- */
    /* Cheap elementwise ops: one operation per output element (per extra
     * input for the variadic ones); transcendental ones a handful; the
     * generators a few per value. */
    case CP_OP_ABS:
    case CP_OP_NEG:
    case CP_OP_RECIPROCAL:
    case CP_OP_FLOOR:
    case CP_OP_CEIL:
    case CP_OP_ROUND:
    case CP_OP_SIGN:
    case CP_OP_IS_NAN:
    case CP_OP_IS_INF:
    case CP_OP_NOT:
    case CP_OP_BITWISE_NOT:
    case CP_OP_THRESHOLDED_RELU:
    case CP_OP_SHRINK:
    case CP_OP_PRELU:
    case CP_OP_GREATER:
    case CP_OP_LESS:
    case CP_OP_GREATER_OR_EQUAL:
    case CP_OP_LESS_OR_EQUAL:
    case CP_OP_AND:
    case CP_OP_OR:
    case CP_OP_XOR:
    case CP_OP_MOD:
    case CP_OP_BIT_SHIFT:
    case CP_OP_BITWISE_AND:
    case CP_OP_BITWISE_OR:
    case CP_OP_BITWISE_XOR:
    case CP_OP_CAST_LIKE:
        return out;
    case CP_OP_HARD_SIGMOID:
    case CP_OP_SOFTSIGN:
        return 3.0 * out;
    case CP_OP_HARD_SWISH:
        return 4.0 * out;
    case CP_OP_LOG:
    case CP_OP_SIN:
    case CP_OP_COS:
    case CP_OP_TAN:
    case CP_OP_ASIN:
    case CP_OP_ACOS:
    case CP_OP_ATAN:
    case CP_OP_SINH:
    case CP_OP_COSH:
    case CP_OP_ASINH:
    case CP_OP_ACOSH:
    case CP_OP_ATANH:
    case CP_OP_ELU:
    case CP_OP_SELU:
    case CP_OP_CELU:
    case CP_OP_SOFTPLUS:
        return 8.0 * out;
    case CP_OP_MISH:
        return 16.0 * out;
    case CP_OP_MAX:
    case CP_OP_MIN:
    case CP_OP_SUM:
    case CP_OP_MEAN:
        return out * (double)(n->n_inputs > 1 ? n->n_inputs - 1 : 1);
    case CP_OP_RANDOM_NORMAL:
    case CP_OP_RANDOM_UNIFORM:
    case CP_OP_RANDOM_NORMAL_LIKE:
    case CP_OP_RANDOM_UNIFORM_LIKE:
    case CP_OP_BERNOULLI:
    case CP_OP_MULTINOMIAL:
        return 10.0 * out;
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    case CP_OP_REDUCE_MIN:
    case CP_OP_REDUCE_PROD:
    case CP_OP_REDUCE_L1:
    case CP_OP_ARG_MAX:
    case CP_OP_ARG_MIN:
    case CP_OP_CUM_SUM:
    case CP_OP_HARDMAX:
        return in;
    case CP_OP_REDUCE_L2:
    case CP_OP_REDUCE_SUM_SQUARE:
    case CP_OP_REDUCE_LOG_SUM:
        return 2.0 * in;
    case CP_OP_REDUCE_LOG_SUM_EXP:
    case CP_OP_LOG_SOFTMAX:
    case CP_OP_SCE_LOSS:
        return 5.0 * in;
    case CP_OP_NLL_LOSS:
        return 2.0 * out;
    case CP_OP_TOP_K: {
        /* a sort of each slice along the axis: len * log2(len) compares */
        int r = x ? x->shape.rank : 0, ax = (int)cp_node_attr_int(n, "axis", -1);
        ax = ax < 0 ? ax + r : ax;
        double len = r > 0 && ax >= 0 && ax < r ? dim_est(&x->shape, ax) : 1.0;
        return len > 1.0 ? in * log2(len) : in;
    }
    case CP_OP_SCATTER_ELEMENTS:
    case CP_OP_SCATTER_ND:
    case CP_OP_SCATTER: {
        const struct cp_tensor *u = input(g, n, 2);
        return u && strcmp(cp_node_attr_string(n, "reduction", "none"), "none") != 0
                   ? numel_est(&u->shape)
                   : 0.0;
    }
    case CP_OP_DET: {
        /* LU: about (2/3) m^3 per matrix */
        int r = x ? x->shape.rank : 0;
        double m = r >= 2 ? dim_est(&x->shape, r - 1) : 1.0;
        return out * (2.0 / 3.0) * m * m * m;
    }
    case CP_OP_EINSUM: {
        /* a multiply-add per output element and contracted index */
        const struct cp_shape *shapes[CP_EINSUM_MAX_IN];
        struct cp_einsum e;
        char why[8];
        if (n->n_inputs < 1 || n->n_inputs > CP_EINSUM_MAX_IN)
            return 0.0;
        for (size_t i = 0; i < n->n_inputs; i++) {
            const struct cp_tensor *t = input(g, n, i);
            if (!t)
                return 0.0;
            shapes[i] = &t->shape;
        }
        if (!cp_eval_einsum_plan(cp_node_attr_string(n, "equation", ""), (int)n->n_inputs, shapes,
                                 &e, why, sizeof why))
            return 0.0;
        double k = 1.0;
        bool is_out[CP_EINSUM_MAX_LABELS] = {false};
        for (int q = 0; q < e.out_rank; q++)
            is_out[e.out_label[q]] = true;
        for (int l = 0; l < CP_EINSUM_MAX_LABELS; l++)
            if (!is_out[l] && e.size[l] > 1)
                k *= (double)e.size[l];
        return 2.0 * out * k;
    }
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    case CP_OP_LRN: /* a size-long sum of squares and a pow per element */
        return out * (2.0 * (double)cp_node_attr_int(n, "size", 1) + 10.0);
    case CP_OP_LP_NORMALIZATION:
        return 3.0 * out;
    case CP_OP_MEAN_VARIANCE_NORMALIZATION:
        return 6.0 * out;
    case CP_OP_GLOBAL_MAX_POOL:
        return in;
    case CP_OP_GLOBAL_LP_POOL:
        return 3.0 * in;
    case CP_OP_LP_POOL:
        return 3.0 * out * pool_kernel(n);
    case CP_OP_MAX_UNPOOL:
    case CP_OP_DEPTH_TO_SPACE:
    case CP_OP_SPACE_TO_DEPTH:
        return 0.0; /* data movement */
    case CP_OP_GRID_SAMPLE: {
        /* per output element: 2^r taps (linear), 16 (cubic), 1 (nearest), 2 flops each */
        const char *m = cp_node_attr_string(n, "mode", "linear");
        double taps = m[0] == 'n' ? 1.0 : strstr(m, "cubic") ? 16.0 : 4.0;
        return 2.0 * taps * out;
    }
    case CP_OP_ROI_ALIGN: {
        /* 4 bilinear taps per sample; sampling_ratio^2 samples per bin (2x2 when adaptive) */
        double r = (double)cp_node_attr_int(n, "sampling_ratio", 0);
        double samples = r > 0 ? r * r : 4.0;
        return 8.0 * samples * out;
    }
    case CP_OP_NON_MAX_SUPPRESSION: {
        /* a sort and pairwise IoU per batch and class: ~ boxes^2 per class, bounded */
        const struct cp_tensor *s = input(g, n, 1);
        double boxes = x ? dim_est(&x->shape, 1) : 0.0;
        double planes = s ? dim_est(&s->shape, 0) * dim_est(&s->shape, 1) : 0.0;
        return planes * (boxes * 20.0 + 10.0 * boxes * (boxes < 64 ? boxes : 64));
    }
    case CP_OP_MAX_ROI_POOL:
        return x ? out * dim_est(&x->shape, 2) * dim_est(&x->shape, 3) /
                       (dim_est(&y->shape, 2) * dim_est(&y->shape, 3) + 1.0)
                 : 0.0; /* each bin maxes about its share of the ROI */
    case CP_OP_CENTER_CROP_PAD:
        return 0.0;
    case CP_OP_COL2IM:
        return in; /* one add per input element */
    case CP_OP_AFFINE_GRID:
        return 2.0 * out * 4.0; /* a 3x4 (or 2x3) matrix-vector product per point */
    case CP_OP_DEFORM_CONV:     /* a conv's MACs plus a 4-tap bilinear sample per MAC */
        return w ? out * dim_est(&w->shape, 1) * kernel_size(&w->shape) * 10.0 : 0.0;
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    case CP_OP_LSTM:
    case CP_OP_GRU:
    case CP_OP_RNN: {
        /* Per step and batch row: x Wᵀ and h Rᵀ over every gate (a
         * multiply-add each), plus ~10 per gate element for the gate math.
         * Y [seq, dirs, batch, H] has seq*batch*dirs*H elements. */
        const struct cp_tensor *r = input(g, n, 2);
        if (!w || !r || w->shape.rank != 3 || r->shape.rank != 3)
            return 0.0;
        double dirs = dim_est(&w->shape, 0), hid = dim_est(&r->shape, 2);
        double gates = hid > 0 ? dim_est(&w->shape, 1) / hid : 1.0;
        double rows = dirs * hid > 0 ? out / (dirs * hid) : 0.0; /* seq * batch */
        return 2.0 * rows * (numel_est(&w->shape) + numel_est(&r->shape)) + 10.0 * gates * out;
    }
    case CP_OP_DFT:
    case CP_OP_STFT: {
        /* An FFT's 5 n log2 n per transform of n complex points; the
         * output's complex elements stand in for n times the transforms. */
        int r = y ? y->shape.rank : 0;
        int ax = n->op == CP_OP_STFT
                     ? 2
                     : (int)cp_node_attr_int(n, "axis", cp_graph_opset(g) >= 20 ? -2 : 1);
        if (ax < 0)
            ax += r;
        double len = ax >= 0 && ax < r ? dim_est(&y->shape, ax) : 2.0;
        return 5.0 * (out / 2.0) * (len > 2.0 ? log2(len) : 1.0) + (n->op == CP_OP_STFT ? in : 0.0);
    }
    case CP_OP_HANN_WINDOW:
    case CP_OP_HAMMING_WINDOW:
    case CP_OP_BLACKMAN_WINDOW:
        return 4.0 * out;
    case CP_OP_MEL_WEIGHT_MATRIX:
        return out;
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    case CP_OP_IF:
    case CP_OP_LOOP:
    case CP_OP_SCAN:
        return cp_control_flops(g, n);
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    case CP_OP_QLINEAR_CONV:
    case CP_OP_CONV_INTEGER: {
        /* As Conv; the weight is input 3 of QLinearConv, 1 of ConvInteger. */
        const struct cp_tensor *wq = input(g, n, n->op == CP_OP_QLINEAR_CONV ? 3 : 1);
        if (!wq)
            return 0.0;
        return 2.0 * out * dim_est(&wq->shape, 1) * kernel_size(&wq->shape) + out;
    }
    case CP_OP_QLINEAR_MATMUL:
    case CP_OP_MATMUL_INTEGER: {
        double k = x && x->shape.rank >= 1 ? dim_est(&x->shape, x->shape.rank - 1) : 1.0;
        return 2.0 * out * k + out;
    }
    case CP_OP_QUANTIZE_LINEAR:
    case CP_OP_DEQUANTIZE_LINEAR:
        return 2.0 * out;
    case CP_OP_DYNAMIC_QUANTIZE_LINEAR:
        return 4.0 * in;
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
    default:
        return 0.0;
    }
}

struct cp_node_cost cp_node_cost(const struct cp_graph *g, const struct cp_node *n)
{
    struct cp_node_cost c = {0.0, 0.0};
    if (!n)
        return c;
    c.flops = flops(g, n);
    if (n->op != CP_OP_SHAPE)
        for (size_t i = 0; i < n->n_inputs; i++)
            c.bytes += tensor_bytes(input(g, n, i));
    for (size_t i = 0; i < n->n_outputs; i++)
        c.bytes += tensor_bytes(output(g, n, i));
    return c;
}

/* Parameters are the initializers live nodes read (or the graph outputs
 * name): weights orphaned by a pass such as BatchNormalization folding are
 * not counted, and neither are the tensors behind attributes. */
void cp_graph_stats(const struct cp_graph *g, struct cp_graph_stats *out)
{
    memset(out, 0, sizeof *out);
    size_t nt = cp_graph_n_tensors(g), nn = cp_graph_n_nodes(g);
    bool *seen = cp_calloc(nt ? nt : 1, sizeof *seen);
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        out->n_nodes++;
        if ((unsigned)n->op < CP_OP_COUNT)
            out->op_count[n->op]++;
        struct cp_node_cost c = cp_node_cost(g, n);
        out->flops += c.flops;
        out->bytes += c.bytes;
        for (size_t j = 0; seen && j < n->n_inputs; j++) {
            int32_t t = n->inputs[j];
            if (t >= 0 && (size_t)t < nt)
                seen[t] = true;
        }
    }
    for (size_t i = 0; seen && i < cp_graph_n_outputs(g); i++) {
        int32_t t = cp_graph_output(g, i);
        if (t >= 0 && (size_t)t < nt)
            seen[t] = true;
    }
    for (size_t i = 0; i < nt; i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        /* Without memory for the bookkeeping, count every initializer. */
        if (t->kind != CP_TENSOR_INITIALIZER || (seen && !seen[i]))
            continue;
        size_t nb;
        if (!cp_shape_nbytes(&t->shape, t->dtype, &nb))
            continue;
        out->n_params += (size_t)cp_shape_numel(&t->shape);
        out->param_bytes += nb;
    }
    free(seen);
}
