/* The constant evaluator behind ConstantFoldingPass: the ops constant
 * subgraphs are made of (data movement, casts, elementwise arithmetic on
 * f32 / i64 / i32 / bool), computed the way the runtime's reference
 * kernels compute them: floats in f32, integers in int64 wrapping into the
 * output dtype, integer division truncating (a zero divisor gives 0).
 *
 * atc_bridge sits below runner/, so this is its own small code, not the
 * runtime's kernels. Anything it does not handle returns false and the node
 * stays in the graph, which is always correct. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- element access ------------------------------------------------------------- */

static bool dtype_ok(enum cp_dtype dt)
{
    return dt == CP_DTYPE_F32 || dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32 || dt == CP_DTYPE_BOOL ||
           dt == CP_DTYPE_I8 || dt == CP_DTYPE_U8;
}

/* Element reads and writes are graph/elem.c's (cp_elem_*), the same ones
 * the reference kernels use. */

/* ---- shapes and broadcasting ---------------------------------------------------------- */

/* Walks the output elements in order while tracking the offset of each
 * input under numpy broadcasting. */
#define MAX_IN 3
struct bcast {
    int rank;
    int64_t dims[CP_MAX_RANK];
    int64_t coord[CP_MAX_RANK];
    int n_in;
    int64_t stride[MAX_IN][CP_MAX_RANK];
    int64_t off[MAX_IN];
};

static bool bcast_init(struct bcast *b, const struct cp_shape *out, const struct cp_shape **in,
                       int n_in)
{
    memset(b, 0, sizeof *b);
    b->rank = out->rank;
    b->n_in = n_in;
    for (int a = 0; a < out->rank; a++)
        b->dims[a] = out->dims[a].value;
    for (int k = 0; k < n_in; k++) {
        const struct cp_shape *s = in[k];
        if (s->rank > out->rank)
            return false;
        int64_t st = 1;
        for (int a = out->rank - 1; a >= 0; a--) {
            int ia = a - (out->rank - s->rank);
            if (ia < 0)
                continue;
            int64_t dim = s->dims[ia].value;
            if (dim != 1 && dim != b->dims[a])
                return false;
            b->stride[k][a] = dim == 1 ? 0 : st;
            st *= dim;
        }
    }
    return true;
}

static void bcast_next(struct bcast *b)
{
    for (int a = b->rank - 1; a >= 0; a--) {
        b->coord[a]++;
        for (int k = 0; k < b->n_in; k++)
            b->off[k] += b->stride[k][a];
        if (b->coord[a] < b->dims[a])
            return;
        for (int k = 0; k < b->n_in; k++)
            b->off[k] -= b->stride[k][a] * b->dims[a];
        b->coord[a] = 0;
    }
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
    size_t np = 0;
    if (!cp_rw_attr_ints(e->n, "perm", perm, CP_MAX_RANK, &np)) {
        if (cp_node_attr(e->n, "perm"))
            return false;
        np = (size_t)r;
        for (int a = 0; a < r; a++)
            perm[a] = r - 1 - a;
    }
    if ((int)np != r || e->out->shape.rank != r || x->dtype != e->out->dtype)
        return false;
    /* in_stride[a]: stride of input axis a; the output walks perm[]. */
    int64_t in_stride[CP_MAX_RANK], st = 1;
    for (int a = r - 1; a >= 0; a--) {
        in_stride[a] = st;
        st *= x->shape.dims[a].value;
    }
    struct cp_shape one;
    cp_shape_set(&one, 0, NULL);
    const struct cp_shape *ins[1] = {&one};
    struct bcast b;
    bcast_init(&b, &e->out->shape, ins, 1);
    for (int a = 0; a < r; a++) {
        if (perm[a] < 0 || perm[a] >= r)
            return false;
        b.stride[0][a] = in_stride[perm[a]];
    }
    int64_t n = numel(e->out);
    const unsigned char *src = e->in_data[0];
    unsigned char *dst = e->out_data;
    for (int64_t i = 0; i < n; i++, bcast_next(&b))
        memcpy(dst + (size_t)i * e->es, src + (size_t)b.off[0] * e->es, e->es);
    return true;
}

static bool ev_concat(struct ev *e)
{
    int r = e->out->shape.rank;
    int64_t axis = cp_node_attr_int(e->n, "axis", 0);
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis >= r)
        return false;
    int64_t outer = 1, inner = 1;
    for (int a = 0; a < axis; a++)
        outer *= e->out->shape.dims[a].value;
    for (int a = (int)axis + 1; a < r; a++)
        inner *= e->out->shape.dims[a].value;
    int64_t out_row = e->out->shape.dims[axis].value * inner;
    int64_t col = 0;
    for (size_t k = 0; k < e->n->n_inputs; k++) {
        const struct cp_tensor *x = e->in[k];
        if (!x || x->dtype != e->out->dtype || x->shape.rank != r)
            return false;
        int64_t row = x->shape.dims[axis].value * inner;
        for (int64_t o = 0; o < outer; o++)
            memcpy((unsigned char *)e->out_data + (size_t)(o * out_row + col) * e->es,
                   (const unsigned char *)e->in_data[k] + (size_t)(o * row) * e->es,
                   (size_t)row * e->es);
        col += row;
    }
    return col == out_row;
}

static bool ev_gather(struct ev *e)
{
    const struct cp_tensor *x = e->in[0], *idx = e->in[1];
    if (!idx || (idx->dtype != CP_DTYPE_I64 && idx->dtype != CP_DTYPE_I32) ||
        x->dtype != e->out->dtype)
        return false;
    int r = x->shape.rank;
    int64_t axis = cp_node_attr_int(e->n, "axis", 0);
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis >= r)
        return false;
    int64_t outer = 1, inner = 1, dim = x->shape.dims[axis].value;
    for (int a = 0; a < axis; a++)
        outer *= x->shape.dims[a].value;
    for (int a = (int)axis + 1; a < r; a++)
        inner *= x->shape.dims[a].value;
    int64_t ni = numel(idx);
    if (outer * ni * inner != numel(e->out))
        return false;
    unsigned char *dst = e->out_data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < ni; j++) {
            int64_t k = cp_elem_load_i64(e->in_data[1], idx->dtype, j);
            if (k < 0)
                k += dim;
            if (k < 0 || k >= dim)
                return false;
            memcpy(dst + (size_t)((o * ni + j) * inner) * e->es,
                   (const unsigned char *)e->in_data[0] + (size_t)((o * dim + k) * inner) * e->es,
                   (size_t)inner * e->es);
        }
    return true;
}

/* The ints of constant input i (starts, ends, axes, steps of Slice). */
static bool input_ints(struct ev *e, size_t i, int64_t *out, size_t cap, size_t *len)
{
    if (i >= e->n->n_inputs || !e->in[i])
        return false;
    const struct cp_tensor *t = e->in[i];
    if (t->dtype != CP_DTYPE_I64 && t->dtype != CP_DTYPE_I32)
        return false;
    int64_t n = numel(t);
    if (n < 0 || (size_t)n > cap)
        return false;
    for (int64_t k = 0; k < n; k++)
        out[k] = cp_elem_load_i64(e->in_data[i], t->dtype, k);
    *len = (size_t)n;
    return true;
}

static bool ev_slice(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    int r = x->shape.rank;
    int64_t starts[CP_MAX_RANK], ends[CP_MAX_RANK], axes[CP_MAX_RANK], steps[CP_MAX_RANK];
    size_t ns = 0, ne = 0, na = 0, nst = 0;
    if (e->n->n_inputs >= 3) {
        if (!input_ints(e, 1, starts, CP_MAX_RANK, &ns) ||
            !input_ints(e, 2, ends, CP_MAX_RANK, &ne))
            return false;
        if (e->n->n_inputs >= 4 && e->n->inputs[3] >= 0 &&
            !input_ints(e, 3, axes, CP_MAX_RANK, &na))
            return false;
        if (e->n->n_inputs >= 5 && e->n->inputs[4] >= 0 &&
            !input_ints(e, 4, steps, CP_MAX_RANK, &nst))
            return false;
    } else if (!cp_rw_attr_ints(e->n, "starts", starts, CP_MAX_RANK, &ns) ||
               !cp_rw_attr_ints(e->n, "ends", ends, CP_MAX_RANK, &ne) ||
               (cp_node_attr(e->n, "axes") &&
                !cp_rw_attr_ints(e->n, "axes", axes, CP_MAX_RANK, &na))) {
        return false;
    }
    if (ns != ne || (na && na != ns) || (nst && nst != ns) || x->dtype != e->out->dtype ||
        e->out->shape.rank != r)
        return false;
    int64_t start[CP_MAX_RANK], step[CP_MAX_RANK];
    for (int a = 0; a < r; a++) {
        start[a] = 0;
        step[a] = 1;
    }
    for (size_t i = 0; i < ns; i++) {
        int64_t a = na ? axes[i] : (int64_t)i;
        if (a < 0)
            a += r;
        if (a < 0 || a >= r)
            return false;
        int64_t dim = x->shape.dims[a].value, st = nst ? steps[i] : 1;
        if (st == 0)
            return false;
        int64_t s = starts[i], en = ends[i];
        if (s < 0)
            s += dim;
        if (en < 0)
            en += dim;
        int64_t cnt;
        if (st > 0) {
            s = s < 0 ? 0 : s > dim ? dim : s;
            en = en < 0 ? 0 : en > dim ? dim : en;
            cnt = en > s ? (en - s + st - 1) / st : 0;
        } else {
            s = s < 0 ? -1 : s > dim - 1 ? dim - 1 : s;
            en = en < -1 ? -1 : en > dim - 1 ? dim - 1 : en;
            cnt = s > en ? (s - en + (-st) - 1) / (-st) : 0;
        }
        /* The inferred shape must agree, or something is off: leave it. */
        if (cnt != e->out->shape.dims[a].value)
            return false;
        start[a] = s;
        step[a] = st;
    }
    int64_t in_stride[CP_MAX_RANK], stv = 1;
    for (int a = r - 1; a >= 0; a--) {
        in_stride[a] = stv;
        stv *= x->shape.dims[a].value;
    }
    int64_t n = numel(e->out);
    int64_t coord[CP_MAX_RANK] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int a = 0; a < r; a++)
            off += (start[a] + coord[a] * step[a]) * in_stride[a];
        memcpy((unsigned char *)e->out_data + (size_t)i * e->es,
               (const unsigned char *)e->in_data[0] + (size_t)off * e->es, e->es);
        for (int a = r - 1; a >= 0; a--) {
            if (++coord[a] < e->out->shape.dims[a].value)
                break;
            coord[a] = 0;
        }
    }
    return true;
}

static bool ev_expand(struct ev *e)
{
    if (e->in[0]->dtype != e->out->dtype)
        return false;
    const struct cp_shape *ins[1] = {&e->in[0]->shape};
    struct bcast b;
    if (!bcast_init(&b, &e->out->shape, ins, 1))
        return false;
    int64_t n = numel(e->out);
    for (int64_t i = 0; i < n; i++, bcast_next(&b))
        memcpy((unsigned char *)e->out_data + (size_t)i * e->es,
               (const unsigned char *)e->in_data[0] + (size_t)b.off[0] * e->es, e->es);
    return true;
}

static bool ev_cast(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    int64_t n = numel(x);
    if (n != numel(e->out))
        return false;
    for (int64_t i = 0; i < n; i++) {
        if (x->dtype == CP_DTYPE_F32)
            cp_elem_store_f64(e->out_data, e->out->dtype, i, ((const float *)e->in_data[0])[i]);
        else
            cp_elem_store_i64(e->out_data, e->out->dtype, i,
                              cp_elem_load_i64(e->in_data[0], x->dtype, i));
    }
    return true;
}

static float sigmoid(float x)
{
    if (x >= 0.0f)
        return 1.0f / (1.0f + expf(-x));
    float ex = expf(x);
    return ex / (1.0f + ex);
}

static bool ev_unary(struct ev *e)
{
    const struct cp_tensor *x = e->in[0];
    int64_t n = numel(x);
    if (x->dtype != e->out->dtype || n != numel(e->out))
        return false;
    if (x->dtype != CP_DTYPE_F32) {
        if (e->n->op != CP_OP_RELU || x->dtype == CP_DTYPE_BOOL)
            return false;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = cp_elem_load_i64(e->in_data[0], x->dtype, i);
            cp_elem_store_i64(e->out_data, x->dtype, i, v > 0 ? v : 0);
        }
        return true;
    }
    const float *a = e->in_data[0];
    float *y = e->out_data;
    for (int64_t i = 0; i < n; i++) {
        switch (e->n->op) {
        case CP_OP_SQRT:
            y[i] = sqrtf(a[i]);
            break;
        case CP_OP_EXP:
            y[i] = expf(a[i]);
            break;
        case CP_OP_ERF:
            y[i] = erff(a[i]);
            break;
        case CP_OP_TANH:
            y[i] = tanhf(a[i]);
            break;
        case CP_OP_SIGMOID:
            y[i] = sigmoid(a[i]);
            break;
        case CP_OP_RELU:
            y[i] = a[i] > 0.0f ? a[i] : 0.0f;
            break;
        default:
            return false;
        }
    }
    return true;
}

static int64_t int_binary(enum cp_op op, int64_t a, int64_t b)
{
    switch (op) {
    case CP_OP_ADD:
        return (int64_t)((uint64_t)a + (uint64_t)b);
    case CP_OP_SUB:
        return (int64_t)((uint64_t)a - (uint64_t)b);
    case CP_OP_MUL:
        return (int64_t)((uint64_t)a * (uint64_t)b);
    case CP_OP_DIV:
        if (b == 0)
            return 0;
        if (a == INT64_MIN && b == -1)
            return INT64_MIN;
        return a / b;
    case CP_OP_EQUAL:
        return a == b;
    default:
        return 0;
    }
}

static float f32_binary(enum cp_op op, float a, float b)
{
    switch (op) {
    case CP_OP_ADD:
        return a + b;
    case CP_OP_SUB:
        return a - b;
    case CP_OP_MUL:
        return a * b;
    case CP_OP_DIV:
        return a / b;
    case CP_OP_POW:
        return powf(a, b);
    default:
        return 0.0f;
    }
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
    const struct cp_shape *ins[2] = {&a->shape, &b->shape};
    struct bcast bc;
    if (!bcast_init(&bc, &e->out->shape, ins, 2))
        return false;
    int64_t n = numel(e->out);
    for (int64_t i = 0; i < n; i++, bcast_next(&bc)) {
        int64_t ia = bc.off[0], ib = bc.off[1];
        if (pow_mixed) {
            double x = ((const float *)e->in_data[0])[ia];
            double p = (double)cp_elem_load_i64(e->in_data[1], b->dtype, ib);
            ((float *)e->out_data)[i] = (float)pow(x, p);
        } else if (a->dtype == CP_DTYPE_F32 && op == CP_OP_EQUAL) {
            ((uint8_t *)e->out_data)[i] =
                ((const float *)e->in_data[0])[ia] == ((const float *)e->in_data[1])[ib];
        } else if (a->dtype == CP_DTYPE_F32) {
            ((float *)e->out_data)[i] = f32_binary(op, ((const float *)e->in_data[0])[ia],
                                                   ((const float *)e->in_data[1])[ib]);
        } else {
            int64_t x = cp_elem_load_i64(e->in_data[0], a->dtype, ia);
            int64_t y = cp_elem_load_i64(e->in_data[1], b->dtype, ib);
            cp_elem_store_i64(e->out_data, e->out->dtype, i, int_binary(op, x, y));
        }
    }
    return true;
}

static bool ev_where(struct ev *e)
{
    const struct cp_tensor *c = e->in[0], *x = e->in[1], *y = e->in[2];
    if (!x || !y || c->dtype != CP_DTYPE_BOOL || x->dtype != e->out->dtype ||
        y->dtype != e->out->dtype)
        return false;
    const struct cp_shape *ins[3] = {&c->shape, &x->shape, &y->shape};
    struct bcast b;
    if (!bcast_init(&b, &e->out->shape, ins, 3))
        return false;
    int64_t n = numel(e->out);
    for (int64_t i = 0; i < n; i++, bcast_next(&b)) {
        bool take_x = ((const uint8_t *)e->in_data[0])[b.off[0]] != 0;
        const unsigned char *src = take_x ? (const unsigned char *)e->in_data[1] + b.off[1] * e->es
                                          : (const unsigned char *)e->in_data[2] + b.off[2] * e->es;
        memcpy((unsigned char *)e->out_data + (size_t)i * e->es, src, e->es);
    }
    return true;
}

static bool ev_constant_of_shape(struct ev *e)
{
    const struct cp_attr *a = cp_node_attr(e->n, "value");
    int64_t n = numel(e->out);
    if (!a) {
        if (e->out->dtype != CP_DTYPE_F32)
            return false;
        memset(e->out_data, 0, (size_t)n * e->es);
        return true;
    }
    if (a->type != CP_ATTR_TENSOR)
        return false;
    const struct cp_tensor *v = cp_graph_tensor(e->g, a->tensor);
    if (!v || !v->data || v->dtype != e->out->dtype || v->nbytes != e->es)
        return false;
    for (int64_t i = 0; i < n; i++)
        memcpy((unsigned char *)e->out_data + (size_t)i * e->es, v->data, e->es);
    return true;
}

static bool ev_range(struct ev *e)
{
    enum cp_dtype dt = e->out->dtype;
    for (int k = 0; k < 3; k++)
        if (!e->in[k] || e->in[k]->dtype != dt || numel(e->in[k]) != 1)
            return false;
    int64_t n = numel(e->out);
    if (dt == CP_DTYPE_F32) {
        double start = ((const float *)e->in_data[0])[0];
        double delta = ((const float *)e->in_data[2])[0];
        for (int64_t i = 0; i < n; i++)
            ((float *)e->out_data)[i] = (float)(start + (double)i * delta);
        return true;
    }
    uint64_t start = (uint64_t)cp_elem_load_i64(e->in_data[0], dt, 0);
    uint64_t delta = (uint64_t)cp_elem_load_i64(e->in_data[2], dt, 0);
    for (int64_t i = 0; i < n; i++)
        cp_elem_store_i64(e->out_data, dt, i, (int64_t)(start + (uint64_t)i * delta));
    return true;
}

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
