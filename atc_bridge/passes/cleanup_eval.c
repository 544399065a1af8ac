/* The constant evaluator behind ConstantFoldingPass: the ops constant
 * subgraphs are made of (data movement, casts, elementwise arithmetic on
 * f32 / i64 / i32 / bool, reductions).
 *
 * What each op computes is graph/op_eval.h's, the same functions the
 * runtime's reference kernels call, so a folded constant holds exactly
 * what the runtime would have computed (tests/atc_bridge/
 * test_fold_matches_kernels.c pins it). Here: which nodes the folder
 * evaluates (the dtypes above, one output, static shapes, the checks each
 * op needs so that nothing is read out of bounds) and the parameters it
 * reads from them. Anything it does not handle returns false and the node
 * stays in the graph, which is always correct. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"
#include "graph/op_eval.h"

#include <stdlib.h>
#include <string.h>

static bool dtype_ok(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_BOOL ||
           dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8;
}

static int64_t numel(const struct cp_tensor *t)
{
    return cp_shape_numel(&t->shape);
}

/* ---- the ops ----------------------------------------------------------------------- */

struct ev {
    const struct cp_graph *g;
    const struct cp_node *n;
    const struct cp_tensor *in[8];
    const void *in_data[8];
    const struct cp_tensor *out;
    void *out_data;
    size_t es; /* output element size */
};

static bool ev_copy(struct ev *e)
{
    if (e->in[0]->dtype != e->out->dtype || numel(e->in[0]) != numel(e->out))
        return false;
    memcpy(e->out_data, e->in_data[0], (size_t)numel(e->out) * e->es);
    return true;
}

static bool ev_transpose(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    int r = x->shape.rank;
    int64_t perm[CP_MAX_RANK];
    if (e->out->shape.rank != r || x->dtype != e->out->dtype ||
        !cp_eval_transpose_perm(e->n, r, perm))
        return false;
    for (int a = 0; a < r; a++)
        if (e->out->shape.dims[a].value != x->shape.dims[perm[a]].value)
            return false;
    cp_eval_transpose(x, e->in_data[0], perm, e->out, e->out_data);
    return true;
}

static bool ev_concat(struct ev *e)
{
    int r = e->out->shape.rank, axis;
    if (!cp_eval_axis(cp_node_attr_int(e->n, "axis", 0), r, &axis))
        return false;
    int64_t sum = 0;
    for (size_t k = 0; k < e->n->n_inputs; k++) {
        const struct cp_tensor *x = e->in[k];
        if (!x || x->dtype != e->out->dtype || x->shape.rank != r)
            return false;
        sum += x->shape.dims[axis].value;
    }
    if (sum != e->out->shape.dims[axis].value)
        return false;
    cp_eval_concat(e->n->n_inputs, e->in, e->in_data, axis, e->out, e->out_data);
    return true;
}

static bool ev_gather(struct ev *e)
{
    const struct cp_tensor *x = e->in[0], *idx = e->in[1];
    if (!idx || (idx->dtype != CP_DTYPE_I64 && idx->dtype != CP_DTYPE_I32) ||
        x->dtype != e->out->dtype)
        return false;
    int r = x->shape.rank, axis;
    if (!cp_eval_axis(cp_node_attr_int(e->n, "axis", 0), r, &axis))
        return false;
    int64_t outer = 1, inner = 1;
    for (int a = 0; a < axis; a++)
        outer *= x->shape.dims[a].value;
    for (int a = axis + 1; a < r; a++)
        inner *= x->shape.dims[a].value;
    if (outer * numel(idx) * inner != numel(e->out))
        return false;
    return cp_eval_gather(x, e->in_data[0], idx, e->in_data[1], axis, e->out, e->out_data);
}

static bool ev_slice(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    int64_t first[CP_MAX_RANK], step[CP_MAX_RANK];
    if (x->dtype != e->out->dtype ||
        !cp_eval_slice_plan(e->g, e->n, e->in_data, &x->shape, &e->out->shape, first, step))
        return false;
    cp_eval_slice(x, e->in_data[0], first, step, e->out, e->out_data);
    return true;
}

static bool ev_expand(struct ev *e)
{
    if (e->in[0]->dtype != e->out->dtype || !cp_eval_broadcasts(&e->in[0]->shape, &e->out->shape))
        return false;
    cp_eval_expand(e->in[0], e->in_data[0], e->out, e->out_data);
    return true;
}

static bool ev_cast(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    if (numel(x) != numel(e->out))
        return false;
    cp_eval_cast(x->dtype, e->in_data[0], e->out->dtype, e->out_data, numel(x));
    return true;
}

static bool ev_unary(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    int64_t n = numel(x);
    if (x->dtype != e->out->dtype || n != numel(e->out))
        return false;
    if (x->dtype != CP_DTYPE_F32 && (e->n->op != CP_OP_RELU || x->dtype == CP_DTYPE_BOOL))
        return false;
    return cp_eval_unary(e->n->op, 0.0f, x->dtype, n, e->in_data[0], e->out_data);
}

/* ReduceMin/Max/Sum (f32, i32, i64) and ReduceMean (f32): detectors
 * reduce their constant image size to pick the resize scale. */
static bool ev_reduce(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    enum cp_op op = e->n->op;
    if (x->dtype != e->out->dtype || e->n->n_outputs != 1)
        return false;
    if (x->dtype != CP_DTYPE_F32 &&
        (op == CP_OP_REDUCE_MEAN || (x->dtype != CP_DTYPE_I32 && x->dtype != CP_DTYPE_I64)))
        return false;
    bool mask[CP_MAX_RANK], noop;
    const void *axes = NULL;
    if (cp_eval_reduce_axes_from_input(e->g, e->n)) {
        if (!e->in[1] || (e->in[1]->dtype != CP_DTYPE_I64 && e->in[1]->dtype != CP_DTYPE_I32))
            return false;
        axes = e->in_data[1];
    }
    if (!cp_eval_reduce_mask(e->g, e->n, axes, x->shape.rank, mask, &noop))
        return false;
    if (noop)
        return ev_copy(e);
    int64_t ny = numel(e->out);
    double *acc = malloc((size_t)(ny > 0 ? ny : 1) * 8);
    if (!acc)
        return false;
    bool ok = cp_eval_reduce(op, x, e->in_data[0], mask, e->out, e->out_data, acc);
    free(acc);
    return ok;
}

static bool ev_binary(struct ev *e)
{
    enum cp_op op = e->n->op;
    const struct cp_tensor *a = e->in[0], *b = e->in[1];
    if (!b)
        return false;
    bool pow_mixed = op == CP_OP_POW && a->dtype == CP_DTYPE_F32 && b->dtype != CP_DTYPE_F32;
    if (a->dtype != b->dtype && !pow_mixed)
        return false;
    if (op == CP_OP_POW && a->dtype != CP_DTYPE_F32)
        return false;
    if (a->dtype == CP_DTYPE_BOOL && op != CP_OP_EQUAL)
        return false;
    if ((op == CP_OP_EQUAL) != (e->out->dtype == CP_DTYPE_BOOL))
        return false;
    if (op != CP_OP_EQUAL && e->out->dtype != a->dtype)
        return false;
    if (!cp_eval_broadcasts(&a->shape, &e->out->shape) ||
        !cp_eval_broadcasts(&b->shape, &e->out->shape))
        return false;
    cp_eval_binary(op, a, e->in_data[0], b, e->in_data[1], e->out, e->out_data);
    return true;
}

static bool ev_where(struct ev *e)
{
    const struct cp_tensor *c = e->in[0], *x = e->in[1], *y = e->in[2];
    if (!x || !y || c->dtype != CP_DTYPE_BOOL || x->dtype != e->out->dtype ||
        y->dtype != e->out->dtype)
        return false;
    for (int k = 0; k < 3; k++)
        if (!cp_eval_broadcasts(&e->in[k]->shape, &e->out->shape))
            return false;
    cp_eval_where(c, e->in_data[0], x, e->in_data[1], y, e->in_data[2], e->out, e->out_data);
    return true;
}

static bool ev_constant_of_shape(struct ev *e)
{
    const struct cp_attr *a = cp_node_attr(e->n, "value");
    static const unsigned char zero[8] = {0};
    const void *value = zero;
    if (!a) {
        if (e->out->dtype != CP_DTYPE_F32)
            return false;
    } else {
        if (a->type != CP_ATTR_TENSOR)
            return false;
        const struct cp_tensor *v = cp_graph_tensor(e->g, a->tensor);
        if (!v || !v->data || v->dtype != e->out->dtype || v->nbytes != e->es)
            return false;
        value = v->data;
    }
    cp_eval_fill(e->es, value, numel(e->out), e->out_data);
    return true;
}

static bool ev_range(struct ev *e)
{
    enum cp_dtype dt = e->out->dtype;
    for (int k = 0; k < 3; k++)
        if (!e->in[k] || e->in[k]->dtype != dt || numel(e->in[k]) != 1)
            return false;
    cp_eval_range(dt, e->in_data[0], e->in_data[2], numel(e->out), e->out_data);
    return true;
}

/* ---- [rnn] ---- */
static bool ev_window(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    if ((x->dtype != CP_DTYPE_I64 && x->dtype != CP_DTYPE_I32) || numel(x) != 1 ||
        e->out->shape.rank != 1)
        return false;
    int64_t size = cp_elem_load_i64(e->in_data[0], x->dtype, 0);
    if (size != e->out->shape.dims[0].value)
        return false;
    cp_eval_window(e->n->op, cp_node_attr_int(e->n, "periodic", 1) != 0, size, e->out->dtype,
                   e->out_data);
    return true;
}

static bool ev_mel(struct ev *e)
{
    for (int k = 0; k < 5; k++)
        if (!e->in[k] || numel(e->in[k]) != 1 ||
            (k < 3 && e->in[k]->dtype != CP_DTYPE_I64 && e->in[k]->dtype != CP_DTYPE_I32) ||
            (k >= 3 && e->in[k]->dtype != CP_DTYPE_F32))
            return false;
    int64_t mel = cp_elem_load_i64(e->in_data[0], e->in[0]->dtype, 0);
    int64_t dft = cp_elem_load_i64(e->in_data[1], e->in[1]->dtype, 0);
    if (e->out->shape.rank != 2 || e->out->shape.dims[0].value != dft / 2 + 1 ||
        e->out->shape.dims[1].value != mel)
        return false;
    return cp_eval_mel_weight_matrix(mel, dft, cp_elem_load_i64(e->in_data[2], e->in[2]->dtype, 0),
                                     cp_elem_load_f64(e->in_data[3], CP_DTYPE_F32, 0),
                                     cp_elem_load_f64(e->in_data[4], CP_DTYPE_F32, 0),
                                     e->out->dtype, e->out_data);
}
/* ---- end [rnn] ---- */

static bool dispatch(struct ev *e)
{
    switch (e->n->op) {
    case CP_OP_DROPOUT:
        /* An identity only outside training mode. */
        if (e->in[2] && numel(e->in[2]) == 1 && cp_elem_load_i64(e->in_data[2], e->in[2]->dtype, 0))
            return false;
        return ev_copy(e);
    case CP_OP_IDENTITY:
    case CP_OP_RESHAPE:
    case CP_OP_FLATTEN:
    case CP_OP_SQUEEZE:
    case CP_OP_UNSQUEEZE:
        return ev_copy(e);
    case CP_OP_TRANSPOSE:
        return ev_transpose(e);
    case CP_OP_CONCAT:
        return ev_concat(e);
    case CP_OP_GATHER:
        return ev_gather(e);
    case CP_OP_SLICE:
        return ev_slice(e);
    case CP_OP_EXPAND:
        return ev_expand(e);
    case CP_OP_CAST:
        return ev_cast(e);
    case CP_OP_SQRT:
    case CP_OP_EXP:
    case CP_OP_ERF:
    case CP_OP_TANH:
    case CP_OP_SIGMOID:
    case CP_OP_RELU:
        return ev_unary(e);
    case CP_OP_ADD:
    case CP_OP_SUB:
    case CP_OP_MUL:
    case CP_OP_DIV:
    case CP_OP_POW:
    case CP_OP_EQUAL:
        return ev_binary(e);
    case CP_OP_WHERE:
        return ev_where(e);
    case CP_OP_CONSTANT_OF_SHAPE:
        return ev_constant_of_shape(e);
    case CP_OP_RANGE:
        return ev_range(e);
    /* ---- [elementwise] ---- */
    case CP_OP_NEG:
    case CP_OP_ABS:
    case CP_OP_SIGN:
    case CP_OP_FLOOR:
    case CP_OP_CEIL:
    case CP_OP_RECIPROCAL:
    case CP_OP_NOT:
    case CP_OP_GREATER:
    case CP_OP_LESS:
    case CP_OP_GREATER_OR_EQUAL:
    case CP_OP_LESS_OR_EQUAL:
    case CP_OP_AND:
    case CP_OP_OR:
    case CP_OP_XOR:
    case CP_OP_MOD:
    case CP_OP_MAX:
    case CP_OP_MIN:
    case CP_OP_SUM:
    case CP_OP_CAST_LIKE:
        return cp_fold_eval_elementwise(e->n, e->in, e->in_data, e->out, e->out_data);
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    case CP_OP_REDUCE_MIN:
    case CP_OP_REDUCE_MAX:
    case CP_OP_REDUCE_SUM:
    case CP_OP_REDUCE_MEAN:
        return ev_reduce(e);
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    case CP_OP_HANN_WINDOW:
    case CP_OP_HAMMING_WINDOW:
    case CP_OP_BLACKMAN_WINDOW:
        return ev_window(e);
    case CP_OP_MEL_WEIGHT_MATRIX:
        return ev_mel(e);
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
    default:
        return false;
    }
}

bool cp_fold_eval(const struct cp_graph *g, const struct cp_node *n, void **data, size_t *nbytes)
{
    /* One output only: Dropout's mask and Split are left alone. */
    if (n->n_outputs < 1 || n->outputs[0] < 0 || n->n_inputs < 1 || n->n_inputs > 8)
        return false;
    for (size_t i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0)
            return false;
    data[0] = NULL;
    nbytes[0] = 0;
    struct ev e = {.g = g, .n = n};
    for (size_t i = 0; i < n->n_inputs; i++) {
        if (n->inputs[i] < 0)
            continue;
        e.in[i] = cp_graph_tensor(g, n->inputs[i]);
        e.in_data[i] = e.in[i]->data;
        if (!dtype_ok(e.in[i]->dtype) || !cp_shape_is_static(&e.in[i]->shape))
            return false;
    }
    if (!e.in[0])
        return false;
    e.out = cp_graph_tensor(g, n->outputs[0]);
    if (!dtype_ok(e.out->dtype) || !cp_shape_is_static(&e.out->shape))
        return false;
    e.es = cp_dtype_size(e.out->dtype);
    int64_t n_out = numel(e.out);
    if (n_out < 0)
        return false;
    size_t bytes = (size_t)n_out * e.es;
    /* Empty tensors have no data pointer; the ops above never read one then. */
    static const uint64_t empty = 0;
    for (size_t i = 0; i < n->n_inputs; i++)
        if (e.in[i] && !e.in_data[i])
            e.in_data[i] = &empty;
    e.out_data = malloc(bytes ? bytes : 1);
    if (!e.out_data)
        return false;
    if (!dispatch(&e)) {
        free(e.out_data);
        return false;
    }
    data[0] = e.out_data;
    nbytes[0] = bytes;
    return true;
}
