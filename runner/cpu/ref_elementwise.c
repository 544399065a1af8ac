/* Reference kernels for elementwise ops: the binary arithmetic ops and Equal
 * with numpy broadcasting, the unary activations, Clip, Where and Cast.
 *
 * What they compute is graph/op_eval.h's (floats in f32; integers in int64
 * wrapping into the output dtype; integer Div truncating, a zero divisor
 * giving 0), which the constant folder computes too. Here: which nodes
 * each kernel takes, and the parameters it reads from them. */
#include "runner/cpu/ref_util.h"

#include <float.h>
#include <math.h>

/* ---- binary ops ------------------------------------------------------------------ */

static bool is_arith_dtype(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || cp_ref_dtype_is_int(dt);
}

/* Add, Sub, Mul, Div, Equal and Pow's base take every numeric dtype
 * cannprof has (cp_eval_binary computes the other floats in double). */
static bool is_numeric_dtype(enum cp_dtype dt)
{
    return dt != CP_DTYPE_UNDEFINED && dt != CP_DTYPE_BOOL && dt < CP_DTYPE_COUNT;
}

static bool binary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 2 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *a = cp_ref_in(g, n, 0), *b = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    if (!a || !b)
        return false;
    switch (n->op) {
    case CP_OP_POW:
        /* The exponent may have its own type (opset 12). */
        return (cp_dtype_is_float(a->dtype) || a->dtype == CP_DTYPE_I32 ||
                a->dtype == CP_DTYPE_I64) &&
               is_numeric_dtype(b->dtype) && y->dtype == a->dtype;
    case CP_OP_EQUAL:
        return a->dtype == b->dtype && (is_numeric_dtype(a->dtype) || a->dtype == CP_DTYPE_BOOL) &&
               y->dtype == CP_DTYPE_BOOL;
    default:
        return a->dtype == b->dtype && is_numeric_dtype(a->dtype) && y->dtype == a->dtype;
    }
}

static enum cp_status binary_run(struct cp_kexec *k)
{
    cp_eval_binary(k->node->op, k->in[0], k->in_data[0], k->in[1], k->in_data[1], k->out[0],
                   k->out_data[0]);
    return CP_OK;
}

#define BINARY_KERNEL(var, opv) CP_REF_KERNEL(var, opv, binary_supports, NULL, binary_run)

BINARY_KERNEL(cp_ref_add, CP_OP_ADD);
BINARY_KERNEL(cp_ref_sub, CP_OP_SUB);
BINARY_KERNEL(cp_ref_mul, CP_OP_MUL);
BINARY_KERNEL(cp_ref_div, CP_OP_DIV);
BINARY_KERNEL(cp_ref_pow, CP_OP_POW);
BINARY_KERNEL(cp_ref_equal, CP_OP_EQUAL);

/* ---- unary ops ----------------------------------------------------------------------- */

static bool same_shape_and_dtype(const struct cp_tensor *x, const struct cp_tensor *y)
{
    return x && y && x->dtype == y->dtype && cp_ref_numel(&x->shape) == cp_ref_numel(&y->shape);
}

static bool unary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!same_shape_and_dtype(x, y))
        return false;
    if (n->op == CP_OP_RELU)
        return x->dtype == CP_DTYPE_F32 || x->dtype == CP_DTYPE_I8 || x->dtype == CP_DTYPE_I32 ||
               x->dtype == CP_DTYPE_I64;
    return x->dtype == CP_DTYPE_F32;
}

static enum cp_status unary_run(struct cp_kexec *k)
{
    float alpha = cp_node_attr_float(k->node, "alpha", 0.01f);
    return cp_eval_unary(k->node->op, alpha, k->in[0]->dtype, cp_ref_numel(&k->in[0]->shape),
                         k->in_data[0], k->out_data[0])
               ? CP_OK
               : CP_ERR_INTERNAL;
}

#define UNARY_KERNEL(var, opv) CP_REF_KERNEL(var, opv, unary_supports, NULL, unary_run)

UNARY_KERNEL(cp_ref_sqrt, CP_OP_SQRT);
UNARY_KERNEL(cp_ref_exp, CP_OP_EXP);
UNARY_KERNEL(cp_ref_erf, CP_OP_ERF);
UNARY_KERNEL(cp_ref_tanh, CP_OP_TANH);
UNARY_KERNEL(cp_ref_sigmoid, CP_OP_SIGMOID);
UNARY_KERNEL(cp_ref_relu, CP_OP_RELU);
UNARY_KERNEL(cp_ref_leaky_relu, CP_OP_LEAKY_RELU);

/* ---- Clip ------------------------------------------------------------------------------ */

/* Bounds: attributes `min`/`max` before opset 11, optional scalar inputs 1
 * and 2 from 11. */
static bool clip_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!same_shape_and_dtype(x, y) || !is_arith_dtype(x->dtype))
        return false;
    for (size_t i = 1; i < n->n_inputs; i++) {
        const struct cp_tensor *b = cp_ref_in(g, n, i);
        if (b && (b->dtype != x->dtype || cp_ref_numel(&b->shape) > 1))
            return false;
    }
    return true;
}

static bool clip_bound(const struct cp_kexec *k, size_t i, double *v)
{
    if (i >= k->node->n_inputs || !k->in[i] || cp_ref_numel(&k->in[i]->shape) < 1)
        return false;
    *v = cp_elem_load_f64(k->in_data[i], k->in[i]->dtype, 0);
    return true;
}

static enum cp_status clip_run(struct cp_kexec *k)
{
    enum cp_dtype dt = k->in[0]->dtype;
    int64_t n = cp_ref_numel(&k->in[0]->shape);
    bool old = cp_ref_opset(k->g) < 11;
    double lo = old ? cp_node_attr_float(k->node, "min", -FLT_MAX) : -INFINITY;
    double hi = old ? cp_node_attr_float(k->node, "max", FLT_MAX) : INFINITY;
    bool has_lo = clip_bound(k, 1, &lo), has_hi = clip_bound(k, 2, &hi);
    if (dt == CP_DTYPE_F32) {
        cp_eval_clip_f32(n, k->in_data[0], (float)lo, (float)hi, k->out_data[0]);
        return CP_OK;
    }
    int64_t ilo = has_lo ? cp_elem_load_i64(k->in_data[1], dt, 0) : INT64_MIN;
    int64_t ihi = has_hi ? cp_elem_load_i64(k->in_data[2], dt, 0) : INT64_MAX;
    cp_eval_clip_int(dt, n, k->in_data[0], ilo, ihi, k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_clip, CP_OP_CLIP, clip_supports, NULL, clip_run);

/* ---- Where ------------------------------------------------------------------------------ */

static bool where_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 3 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *c = cp_ref_in(g, n, 0), *x = cp_ref_in(g, n, 1),
                           *y = cp_ref_in(g, n, 2), *o = cp_ref_out(g, n, 0);
    return c && x && y && c->dtype == CP_DTYPE_BOOL && x->dtype == y->dtype && o->dtype == x->dtype;
}

static enum cp_status where_run(struct cp_kexec *k)
{
    cp_eval_where(k->in[0], k->in_data[0], k->in[1], k->in_data[1], k->in[2], k->in_data[2],
                  k->out[0], k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_where, CP_OP_WHERE, where_supports, NULL, where_run);

/* ---- Cast --------------------------------------------------------------------------------- */

static bool cast_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 1 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    const struct cp_attr *to = cp_node_attr(n, "to");
    return x && to && to->type == CP_ATTR_INT && cp_dtype_from_onnx((int)to->i) == y->dtype &&
           y->dtype != CP_DTYPE_UNDEFINED && cp_ref_numel(&x->shape) == cp_ref_numel(&y->shape);
}

/* The conversion rules are cp_eval_cast's (graph/op_eval.h). */
static enum cp_status cast_run(struct cp_kexec *k)
{
    cp_eval_cast(k->in[0]->dtype, k->in_data[0], k->out[0]->dtype, k->out_data[0],
                 cp_ref_numel(&k->in[0]->shape));
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_cast, CP_OP_CAST, cast_supports, NULL, cast_run);
