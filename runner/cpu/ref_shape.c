/* Reference kernels for data movement: Concat, Split, Slice, Gather,
 * Transpose, Expand, the reshaping ops (Reshape, Flatten, Squeeze,
 * Unsqueeze, Identity, Dropout) and Shape.
 *
 * None of them does arithmetic on elements, so all are dtype-agnostic:
 * they move elements of cp_dtype_size bytes. Concat, Slice, Gather,
 * Transpose and Expand are graph/op_eval.h's definitions (which the
 * constant folder uses too), as are the parameters Slice and Transpose read
 * from their nodes; the reshaping ops are one copy (or none, when the plan
 * aliases the output to the input). */
#include "runner/cpu/layout.h"
#include "runner/cpu/ref_util.h"

#include <string.h>

/* Every input and output present has the dtype of input 0. */
static bool same_dtypes(const struct cp_graph *g, const struct cp_node *n, size_t n_data_inputs)
{
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    if (!x || cp_dtype_size(x->dtype) == 0)
        return false;
    for (size_t i = 0; i < n_data_inputs && i < n->n_inputs; i++) {
        const struct cp_tensor *t = cp_ref_in(g, n, i);
        if (!t || t->dtype != x->dtype)
            return false;
    }
    for (size_t i = 0; i < n->n_outputs; i++) {
        const struct cp_tensor *t = cp_ref_out(g, n, i);
        if (t && t->dtype != x->dtype)
            return false;
    }
    return true;
}

static bool is_index_dtype(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32;
}

/* ---- Concat ------------------------------------------------------------------------ */

static bool concat_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1 || n->n_inputs < 1 ||
        !same_dtypes(g, n, n->n_inputs))
        return false;
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(n, "axis", 0), y->shape.rank, &axis))
        return false;
    int64_t sum = 0;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const struct cp_shape *s = &cp_ref_in(g, n, i)->shape;
        if (s->rank != y->shape.rank)
            return false;
        sum += s->dims[axis].value;
    }
    return sum == y->shape.dims[axis].value;
}

static enum cp_status concat_run(struct cp_kexec *k)
{
    const struct cp_shape *ys = &k->out[0]->shape;
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(k->node, "axis", 0), ys->rank, &axis))
        return CP_ERR_INTERNAL;
    cp_eval_concat(k->node->n_inputs, k->in, (const void *const *)k->in_data, axis, k->out[0],
                   k->out_data[0]);
    return CP_OK;
}

/* A channel Concat in a layout region runs on plain copies (layout.h). */
static enum cp_status concat_run_any_layout(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, concat_run);
}

CP_REF_KERNEL(cp_ref_concat, CP_OP_CONCAT, concat_supports, cp_ref_layout_prepare,
              concat_run_any_layout);

/* ---- Split ------------------------------------------------------------------------- */

/* The sizes come from the (inferred) output shapes, whatever form the
 * split was given in. */
static bool split_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || !same_dtypes(g, n, 1))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0);
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(n, "axis", 0), x->shape.rank, &axis))
        return false;
    int64_t sum = 0;
    for (size_t i = 0; i < n->n_outputs; i++) {
        const struct cp_tensor *y = cp_ref_out(g, n, i);
        if (!y || y->shape.rank != x->shape.rank)
            return false;
        sum += y->shape.dims[axis].value;
    }
    return sum == x->shape.dims[axis].value;
}

static enum cp_status split_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(k->node, "axis", 0), xs->rank, &axis))
        return CP_ERR_INTERNAL;
    size_t es = cp_dtype_size(k->in[0]->dtype);
    int64_t outer = cp_ref_span(xs, 0, axis), inner = cp_ref_span(xs, axis + 1, xs->rank);
    const unsigned char *x = k->in_data[0];
    size_t pos = 0;
    for (int64_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < k->node->n_outputs; i++) {
            size_t blk = (size_t)(k->out[i]->shape.dims[axis].value * inner) * es;
            cp_ref_copy((unsigned char *)k->out_data[i] + (size_t)o * blk, x + pos, blk);
            pos += blk;
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_split, CP_OP_SPLIT, split_supports, NULL, split_run);

/* ---- Slice -------------------------------------------------------------------------- */

static bool slice_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1 || !same_dtypes(g, n, 1))
        return false;
    int64_t first[CP_MAX_RANK], step[CP_MAX_RANK];
    return cp_eval_slice_plan(g, n, NULL, &cp_ref_in(g, n, 0)->shape, &cp_ref_out(g, n, 0)->shape,
                              first, step);
}

static enum cp_status slice_run(struct cp_kexec *k)
{
    int64_t first[CP_MAX_RANK], step[CP_MAX_RANK];
    if (!cp_eval_slice_plan(k->g, k->node, (const void *const *)k->in_data, &k->in[0]->shape,
                            &k->out[0]->shape, first, step))
        return CP_ERR_INTERNAL;
    cp_eval_slice(k->in[0], k->in_data[0], first, step, k->out[0], k->out_data[0]);
    return CP_OK;
}

/* A channel Slice in an NHWC region runs on plain copies (layout.h). */
static enum cp_status slice_run_any_layout(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, slice_run);
}

CP_REF_KERNEL(cp_ref_slice, CP_OP_SLICE, slice_supports, cp_ref_layout_prepare,
              slice_run_any_layout);

/* ---- Gather ----------------------------------------------------------------------- */

static bool gather_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 2 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *ix = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    int axis;
    if (!x || !ix || !is_index_dtype(ix->dtype) || y->dtype != x->dtype ||
        !cp_eval_axis(cp_node_attr_int(n, "axis", 0), x->shape.rank, &axis))
        return false;
    int64_t outer = cp_ref_span(&x->shape, 0, axis);
    int64_t inner = cp_ref_span(&x->shape, axis + 1, x->shape.rank);
    return cp_ref_numel(&y->shape) == outer * cp_ref_numel(&ix->shape) * inner;
}

/* An index out of range is refused (CP_ERR_INTERNAL) rather than read
 * past the data. */
static enum cp_status gather_run(struct cp_kexec *k)
{
    int axis;
    if (!cp_eval_axis(cp_node_attr_int(k->node, "axis", 0), k->in[0]->shape.rank, &axis))
        return CP_ERR_INTERNAL;
    return cp_eval_gather(k->in[0], k->in_data[0], k->in[1], k->in_data[1], axis, k->out[0],
                          k->out_data[0])
               ? CP_OK
               : CP_ERR_INTERNAL;
}

/* A channel Gather in an NHWC region runs on plain copies (layout.h). */
static enum cp_status gather_run_any_layout(struct cp_kexec *k)
{
    return cp_ref_layout_run(k, 0, gather_run);
}

CP_REF_KERNEL(cp_ref_gather, CP_OP_GATHER, gather_supports, cp_ref_layout_prepare,
              gather_run_any_layout);

/* ---- Transpose ---------------------------------------------------------------------- */

static bool transpose_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1 || !same_dtypes(g, n, 1))
        return false;
    const struct cp_shape *xs = &cp_ref_in(g, n, 0)->shape, *ys = &cp_ref_out(g, n, 0)->shape;
    int64_t perm[CP_MAX_RANK];
    if (xs->rank != ys->rank || !cp_eval_transpose_perm(n, xs->rank, perm))
        return false;
    for (int k = 0; k < xs->rank; k++)
        if (ys->dims[k].value != xs->dims[perm[k]].value)
            return false;
    return true;
}

static enum cp_status transpose_run(struct cp_kexec *k)
{
    int64_t perm[CP_MAX_RANK];
    if (!cp_eval_transpose_perm(k->node, k->in[0]->shape.rank, perm))
        return CP_ERR_INTERNAL;
    cp_eval_transpose(k->in[0], k->in_data[0], perm, k->out[0], k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_transpose, CP_OP_TRANSPOSE, transpose_supports, NULL, transpose_run);

/* ---- Expand ------------------------------------------------------------------------- */

/* x broadcasts to the output (the output already is the bidirectional
 * broadcast of x and the shape input). */
static bool expand_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1 || !same_dtypes(g, n, 1))
        return false;
    return cp_eval_broadcasts(&cp_ref_in(g, n, 0)->shape, &cp_ref_out(g, n, 0)->shape);
}

static enum cp_status expand_run(struct cp_kexec *k)
{
    cp_eval_expand(k->in[0], k->in_data[0], k->out[0], k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_expand, CP_OP_EXPAND, expand_supports, NULL, expand_run);

/* ---- Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout ---------------------------- */

static bool view_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!x || x->dtype != y->dtype || cp_ref_numel(&x->shape) != cp_ref_numel(&y->shape))
        return false;
    if (n->op != CP_OP_DROPOUT)
        return n->n_outputs == 1;
    /* Dropout is the identity at inference (or with ratio 0): refuse a
     * training_mode that is not known to be false otherwise. The optional
     * mask is all true. */
    if (!cp_eval_dropout_is_identity(g, n))
        return false;
    const struct cp_tensor *mask = cp_ref_out(g, n, 1);
    return n->n_outputs <= 2 && (!mask || (mask->dtype == CP_DTYPE_BOOL &&
                                           cp_ref_numel(&mask->shape) == cp_ref_numel(&x->shape)));
}

static enum cp_status view_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0];
    int64_t n = cp_ref_numel(&x->shape);
    cp_ref_copy(k->out_data[0], k->in_data[0], (size_t)n * cp_dtype_size(x->dtype));
    if (k->node->op == CP_OP_DROPOUT && k->node->n_outputs > 1 && k->out[1] && n > 0)
        memset(k->out_data[1], 1, (size_t)n);
    return CP_OK;
}

#define VIEW_KERNEL(var, opv) CP_REF_KERNEL(var, opv, view_supports, NULL, view_run)

VIEW_KERNEL(cp_ref_reshape, CP_OP_RESHAPE);
VIEW_KERNEL(cp_ref_flatten, CP_OP_FLATTEN);
VIEW_KERNEL(cp_ref_squeeze, CP_OP_SQUEEZE);
VIEW_KERNEL(cp_ref_unsqueeze, CP_OP_UNSQUEEZE);
VIEW_KERNEL(cp_ref_identity, CP_OP_IDENTITY);
VIEW_KERNEL(cp_ref_dropout, CP_OP_DROPOUT);

/* ---- Shape ---------------------------------------------------------------------------- */

/* [start, end) of the dims, opset 15: negative counts from the back, both
 * clamp to [0, rank]. */
static void shape_range(const struct cp_node *n, int rank, int64_t *start, int64_t *end)
{
    int64_t s = cp_node_attr_int(n, "start", 0), e = cp_node_attr_int(n, "end", rank);
    s = s < 0 ? s + rank : s;
    e = e < 0 ? e + rank : e;
    *start = s < 0 ? 0 : s > rank ? rank : s;
    *end = e < 0 ? 0 : e > rank ? rank : e;
    if (*end < *start)
        *end = *start;
}

static bool shape_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int64_t s, e;
    if (!x)
        return false;
    shape_range(n, x->shape.rank, &s, &e);
    return y->dtype == CP_DTYPE_I64 && cp_ref_numel(&y->shape) == e - s;
}

static enum cp_status shape_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape;
    int64_t s, e;
    shape_range(k->node, xs->rank, &s, &e);
    int64_t *y = k->out_data[0];
    for (int64_t i = s; i < e; i++)
        y[i - s] = xs->dims[i].value;
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_shape, CP_OP_SHAPE, shape_supports, NULL, shape_run);
