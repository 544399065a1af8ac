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
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    case CP_OP_IF:
    case CP_OP_LOOP:
    case CP_OP_SCAN:
        return cp_control_flops(g, n);
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
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
