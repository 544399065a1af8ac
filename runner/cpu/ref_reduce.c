/* Reference kernels for reductions (ReduceMean, ReduceSum, ReduceMax) and
 * Softmax: which axes a node reduces (attribute or input, by opset) and
 * Softmax's geometry (by opset); the arithmetic is graph/op_eval.h's
 * (cp_eval_reduce, cp_eval_softmax). A reduction's accumulators are
 * scratch memory, one 8-byte slot per output element. */
#include "runner/cpu/ref_reduce_index.h" /* the generic reduction, for other dtypes */

/* ---- axes ----------------------------------------------------------------------- */

static bool reduce_supports_fast(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!x || y->dtype != x->dtype)
        return false;
    if (cp_eval_reduce_axes_from_input(g, n)) {
        const struct cp_tensor *a = cp_ref_in(g, n, 1);
        if (a->dtype != CP_DTYPE_I64 && a->dtype != CP_DTYPE_I32)
            return false;
    } else {
        bool mask[CP_MAX_RANK], noop;
        if (!cp_eval_reduce_mask(g, n, NULL, x->shape.rank, mask, &noop))
            return false;
    }
    if (n->op == CP_OP_REDUCE_MEAN)
        return x->dtype == CP_DTYPE_F32;
    return x->dtype == CP_DTYPE_F32 || x->dtype == CP_DTYPE_I32 || x->dtype == CP_DTYPE_I64;
}

/* Other dtypes (f16, bf16, f64, the other integers, bool for ReduceMax)
 * take the reduce_index family's generic reduction. */
static bool reduce_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return reduce_supports_fast(g, n) || cp_ri_reduce_supports(g, n);
}

static enum cp_status reduce_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = (size_t)cp_ref_numel(&k->out[0]->shape) * 8 + 8;
    return CP_OK;
}

static enum cp_status reduce_run(struct cp_kexec *k)
{
    if (!reduce_supports_fast(k->g, k->node))
        return cp_ri_reduce_run(k);
    const struct cp_tensor *x = k->in[0], *y = k->out[0];
    enum cp_op op = k->node->op;
    int rank = x->shape.rank;
    bool mask[CP_MAX_RANK], noop;
    const void *axes_data = k->node->n_inputs > 1 ? k->in_data[1] : NULL;
    if (!cp_eval_reduce_mask(k->g, k->node, axes_data, rank, mask, &noop))
        return CP_ERR_INTERNAL;
    if (noop) {
        cp_ref_copy(k->out_data[0], k->in_data[0],
                    (size_t)cp_ref_numel(&x->shape) * cp_dtype_size(x->dtype));
        return CP_OK;
    }
    return cp_eval_reduce(op, x, k->in_data[0], mask, y, k->out_data[0], k->scratch)
               ? CP_OK
               : CP_ERR_INTERNAL;
}

CP_REF_KERNEL(cp_ref_reduce_mean, CP_OP_REDUCE_MEAN, reduce_supports, reduce_prepare, reduce_run);
CP_REF_KERNEL(cp_ref_reduce_sum, CP_OP_REDUCE_SUM, reduce_supports, reduce_prepare, reduce_run);
CP_REF_KERNEL(cp_ref_reduce_max, CP_OP_REDUCE_MAX, reduce_supports, reduce_prepare, reduce_run);

/* ---- Softmax --------------------------------------------------------------------------- */

bool cp_ref_softmax_geometry(const struct cp_graph *g, const struct cp_node *n,
                             const struct cp_shape *s, int64_t *outer, int64_t *len, int64_t *inner)
{
    bool old = cp_ref_opset(g) < 13;
    int axis;
    if (s->rank == 0) {
        *outer = *len = *inner = 1;
        return true;
    }
    if (!cp_eval_axis(cp_node_attr_int(n, "axis", old ? 1 : -1), s->rank, &axis))
        return false;
    *outer = cp_ref_span(s, 0, axis);
    *len = old ? cp_ref_span(s, axis, s->rank) : s->dims[axis].value;
    *inner = old ? 1 : cp_ref_span(s, axis + 1, s->rank);
    return true;
}

static bool softmax_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int64_t o, l, i;
    return x && x->dtype == CP_DTYPE_F32 && y->dtype == CP_DTYPE_F32 &&
           cp_ref_softmax_geometry(g, n, &x->shape, &o, &l, &i);
}

static enum cp_status softmax_run(struct cp_kexec *k)
{
    int64_t outer, len, inner;
    if (!cp_ref_softmax_geometry(k->g, k->node, &k->in[0]->shape, &outer, &len, &inner))
        return CP_ERR_INTERNAL;
    cp_eval_softmax(outer, len, inner, k->in_data[0], k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_softmax, CP_OP_SOFTMAX, softmax_supports, NULL, softmax_run);
