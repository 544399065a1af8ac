/* Inference for elementwise ops (with value propagation for integer
 * arithmetic), Cast, Where, reductions and normalizations. */
#include "graph/infer_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- elementwise --------------------------------------------------------- */

static struct cp_sval sval_known(int64_t v)
{
    return (struct cp_sval){v, NULL, true};
}

static struct cp_sval sval_unknown(void)
{
    return (struct cp_sval){0, NULL, false};
}

static bool is_known(struct cp_sval x, int64_t v)
{
    return x.known && x.v == v;
}

/* One element of integer arithmetic. Unknown operands still give a result
 * where an identity (x + 0, x * 1, x / 1) or a shared symbol (Equal of two
 * copies of `batch`) decides it. */
static struct cp_sval binary_elem(enum cp_op op, struct cp_sval x, struct cp_sval y)
{
    int64_t r;
    if (x.known && y.known) {
        switch (op) {
        case CP_OP_ADD:
            return __builtin_add_overflow(x.v, y.v, &r) ? sval_unknown() : sval_known(r);
        case CP_OP_SUB:
            return __builtin_sub_overflow(x.v, y.v, &r) ? sval_unknown() : sval_known(r);
        case CP_OP_MUL:
            return __builtin_mul_overflow(x.v, y.v, &r) ? sval_unknown() : sval_known(r);
        case CP_OP_DIV:
            /* ONNX integer Div truncates toward zero, as C does. */
            if (y.v == 0 || (x.v == INT64_MIN && y.v == -1))
                return sval_unknown();
            return sval_known(x.v / y.v);
        case CP_OP_EQUAL:
            return sval_known(x.v == y.v);
        default:
            return sval_unknown();
        }
    }
    switch (op) {
    case CP_OP_ADD:
        return is_known(x, 0) ? y : is_known(y, 0) ? x : sval_unknown();
    case CP_OP_SUB:
        return is_known(y, 0) ? x : sval_unknown();
    case CP_OP_MUL:
        return is_known(x, 1) ? y : is_known(y, 1) ? x : sval_unknown();
    case CP_OP_DIV:
        return is_known(y, 1) ? x : sval_unknown();
    case CP_OP_EQUAL:
        if (!x.known && !y.known && x.sym && y.sym && strcmp(x.sym, y.sym) == 0)
            return sval_known(1);
        return sval_unknown();
    default:
        return sval_unknown();
    }
}

/* Values of an n-ary elementwise op on small static tensors. */
static enum cp_status elementwise_values(struct cp_infer *c, size_t n_in)
{
    int64_t numel;
    if (!cp_infer_out_small(c, 0, &numel))
        return CP_OK;
    const struct cp_sval *e[3];
    const struct cp_shape *s[3];
    for (size_t i = 0; i < n_in; i++) {
        int64_t n;
        e[i] = cp_infer_vals(c, cp_infer_in_index(c, i), &n);
        s[i] = &cp_infer_in(c, i)->shape;
        if (!e[i] || cp_shape_numel(s[i]) != n)
            return CP_OK;
    }
    const struct cp_shape *os = &cp_infer_out(c, 0)->shape;
    struct cp_sval *r = cp_calloc((size_t)numel, sizeof *r);
    if (!r)
        return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
    for (int64_t k = 0; k < numel; k++) {
        struct cp_sval v[3];
        for (size_t i = 0; i < n_in; i++)
            v[i] = e[i][cp_infer_bcast_index(os, s[i], k)];
        if (n_in == 2) {
            r[k] = binary_elem(c->node->op, v[0], v[1]);
        } else if (v[0].known) {
            r[k] = v[0].v ? v[1] : v[2];
        } else if (v[1].known && v[2].known && v[1].v == v[2].v) {
            r[k] = v[1];
        } else {
            r[k] = sval_unknown();
        }
    }
    return cp_infer_set_vals(c, 0, r, numel);
}

static enum cp_status check_same_dtype(struct cp_infer *c, const struct cp_tensor *a,
                                       const struct cp_tensor *b)
{
    if (a->dtype && b->dtype && a->dtype != b->dtype)
        return cp_infer_fail(c, "inputs '%s' and '%s' have different types: %s vs %s", a->name,
                             b->name, cp_dtype_name(a->dtype), cp_dtype_name(b->dtype));
    return CP_OK;
}

enum cp_status cp_infer_binary(struct cp_infer *c)
{
    struct cp_tensor *a = cp_infer_in(c, 0), *b = cp_infer_in(c, 1);
    enum cp_op op = c->node->op;
    enum cp_status st;
    if (op != CP_OP_POW && (st = check_same_dtype(c, a, b)) != CP_OK)
        return st;
    if (c->opset < 7 && (st = cp_infer_legacy_broadcast(c, a, b)) != CP_OK)
        return st;
    struct cp_shape s;
    st = cp_infer_broadcast(c, &a->shape, a->name, &b->shape, b->name, &s);
    if (st != CP_OK)
        return st;
    enum cp_dtype dt = op == CP_OP_EQUAL ? CP_DTYPE_BOOL : a->dtype;
    st = cp_infer_set_out(c, 0, dt, &s);
    if (st != CP_OK || op == CP_OP_POW)
        return st;
    return elementwise_values(c, 2);
}

enum cp_status cp_infer_unary(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    return cp_infer_set_out(c, 0, x->dtype, &x->shape);
}

enum cp_status cp_infer_identity(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    enum cp_status st = cp_infer_set_out(c, 0, x->dtype, &x->shape);
    int64_t numel, n;
    if (st != CP_OK || !cp_infer_out_small(c, 0, &numel))
        return st;
    const struct cp_sval *e = cp_infer_vals(c, cp_infer_in_index(c, 0), &n);
    return e && n == numel ? cp_infer_copy_vals(c, 0, e, NULL, n) : CP_OK;
}

/* Before opset 13 Softmax coerces its input to 2D at `axis` (default 1); from
 * 13 it works along `axis` (default -1). The output shape is the input's
 * either way; only the axis range is checked. */
enum cp_status cp_infer_softmax(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t axis = cp_node_attr_int(c->node, "axis", c->opset >= 13 ? -1 : 1);
    int r = x->shape.rank, ax;
    if (r >= 0) {
        enum cp_status st = cp_infer_axis(c, axis, r, false, "axis", &ax);
        if (st != CP_OK)
            return st;
    }
    return cp_infer_set_out(c, 0, x->dtype, &x->shape);
}

/* Dropout at inference is the identity; the optional mask is bool. */
enum cp_status cp_infer_dropout(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    enum cp_status st = cp_infer_set_out(c, 0, x->dtype, &x->shape);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 1, CP_DTYPE_BOOL, &x->shape);
    return st;
}

enum cp_status cp_infer_cast(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    const struct cp_attr *to = cp_node_attr(c->node, "to");
    if (!to || to->type != CP_ATTR_INT)
        return cp_infer_fail(c, "missing required attribute 'to'");
    enum cp_dtype dt = cp_dtype_from_onnx((int)to->i);
    if (dt == CP_DTYPE_UNDEFINED)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                "cast of '%s' to ONNX data type %lld is not supported", x->name,
                                (long long)to->i);
    enum cp_status st = cp_infer_set_out(c, 0, dt, &x->shape);
    int64_t numel, n;
    if (st != CP_OK || !cp_infer_out_small(c, 0, &numel))
        return st;
    int32_t xi = cp_infer_in_index(c, 0);
    if (cp_dtype_is_float(x->dtype)) {
        double dv[CP_VALUE_MAX_ELEMS];
        if (!cp_infer_doubles(c, xi, dv, CP_VALUE_MAX_ELEMS, &n) || n != numel)
            return CP_OK;
        struct cp_sval *e = cp_calloc((size_t)n, sizeof *e);
        if (!e)
            return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
        for (int64_t k = 0; k < n; k++) {
            /* Float to int truncates toward zero; out-of-range is unknown. */
            if (dt == CP_DTYPE_BOOL)
                e[k] = sval_known(dv[k] != 0.0);
            else if (dv[k] > -9.2e18 && dv[k] < 9.2e18)
                e[k] = sval_known((int64_t)dv[k]);
        }
        return cp_infer_set_vals(c, 0, e, n);
    }
    const struct cp_sval *src = cp_infer_vals(c, xi, &n);
    return src && n == numel ? cp_infer_copy_vals(c, 0, src, NULL, n) : CP_OK;
}

enum cp_status cp_infer_where(struct cp_infer *c)
{
    struct cp_tensor *cond = cp_infer_in(c, 0), *x = cp_infer_in(c, 1), *y = cp_infer_in(c, 2);
    enum cp_status st = check_same_dtype(c, x, y);
    if (st != CP_OK)
        return st;
    struct cp_shape s1, s;
    st = cp_infer_broadcast(c, &cond->shape, cond->name, &x->shape, x->name, &s1);
    if (st == CP_OK)
        st = cp_infer_broadcast(c, &s1, cond->name, &y->shape, y->name, &s);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 0, x->dtype, &s);
    if (st != CP_OK)
        return st;
    return elementwise_values(c, 3);
}

/* ---- reductions ------------------------------------------------------------ */

/* Where a reduction's axes come from: the attribute until the opset that made
 * them an input (13 for ReduceSum, 18 for ReduceMean and ReduceMax). A model
 * that uses the other form is read that way rather than rejected. */
enum axes_state { AXES_NONE, AXES_KNOWN, AXES_UNKNOWN };

static enum cp_status read_axes(struct cp_infer *c, int64_t input_from_opset, size_t input,
                                int64_t *axes, size_t *n_axes, int64_t *n_unknown,
                                enum axes_state *state)
{
    bool attr_present;
    size_t na;
    enum cp_status st = cp_infer_attr_ints(c, "axes", axes, CP_VALUE_MAX_ELEMS, &na, &attr_present);
    if (st != CP_OK)
        return st;
    int32_t ti = cp_infer_in_index(c, input);
    bool use_input = ti >= 0 && (c->opset >= input_from_opset || !attr_present);
    *n_unknown = -1;
    if (use_input) {
        int64_t n;
        if (cp_infer_ints(c, ti, axes, CP_VALUE_MAX_ELEMS, &n)) {
            *n_axes = (size_t)n;
            *state = AXES_KNOWN;
        } else {
            const struct cp_shape *s = &cp_graph_tensor(c->g, ti)->shape;
            if (s->rank == 1 && s->dims[0].value >= 0)
                *n_unknown = s->dims[0].value;
            else if (s->rank == 0)
                *n_unknown = 1;
            *n_axes = 0;
            *state = AXES_UNKNOWN;
        }
    } else {
        *n_axes = na;
        *state = attr_present ? AXES_KNOWN : AXES_NONE;
    }
    return CP_OK;
}

/* Normalize axes against `rank` into a mask; fails on range or repeats. */
static enum cp_status axes_mask(struct cp_infer *c, const int64_t *axes, size_t n, int rank,
                                bool mask[CP_MAX_RANK])
{
    memset(mask, 0, CP_MAX_RANK * sizeof *mask);
    for (size_t k = 0; k < n; k++) {
        int a;
        enum cp_status st = cp_infer_axis(c, axes[k], rank, false, "axis", &a);
        if (st != CP_OK)
            return st;
        if (mask[a])
            return cp_infer_fail(c, "axis %lld is listed twice", (long long)axes[k]);
        mask[a] = true;
    }
    return CP_OK;
}

enum cp_status cp_infer_reduce(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t from = c->node->op == CP_OP_REDUCE_SUM ? 13 : 18;
    int64_t axes[CP_VALUE_MAX_ELEMS], n_unknown;
    size_t na;
    enum axes_state state;
    enum cp_status st = read_axes(c, from, 1, axes, &na, &n_unknown, &state);
    if (st != CP_OK)
        return st;
    bool keep = cp_node_attr_int(c->node, "keepdims", 1) != 0;
    bool noop = cp_node_attr_int(c->node, "noop_with_empty_axes", 0) != 0;
    int r = x->shape.rank;
    struct cp_shape s;
    if (state != AXES_UNKNOWN && na == 0 && noop)
        return cp_infer_set_out(c, 0, x->dtype, &x->shape);
    if (r < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    if (state == AXES_UNKNOWN) {
        int rank = keep ? r : n_unknown >= 0 && n_unknown <= r ? r - (int)n_unknown : -1;
        cp_infer_shape_dyn(&s, rank);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    bool mask[CP_MAX_RANK];
    if (na == 0) {
        for (int k = 0; k < CP_MAX_RANK; k++)
            mask[k] = true;
    } else if ((st = axes_mask(c, axes, na, r, mask)) != CP_OK) {
        return st;
    }
    s.rank = 0;
    for (int k = 0; k < r; k++) {
        if (!mask[k])
            s.dims[s.rank++] = x->shape.dims[k];
        else if (keep)
            cp_infer_dim_set(&s.dims[s.rank++], 1);
    }
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* ---- normalizations ---------------------------------------------------------- */

/* A per-channel parameter must be 1-D of the input's channel count. */
static enum cp_status check_channel_param(struct cp_infer *c, const struct cp_tensor *x,
                                          struct cp_dim ch, size_t input, const char *what)
{
    const struct cp_tensor *p = cp_infer_in(c, input);
    if (!p || p->shape.rank < 0)
        return CP_OK;
    if (p->shape.rank != 1)
        return cp_infer_fail(c, "%s '%s' must be 1-D, got rank %d", what, p->name, p->shape.rank);
    int64_t n = p->shape.dims[0].value;
    if (n >= 0 && ch.value >= 0 && n != ch.value)
        return cp_infer_fail(c, "%s '%s' has %lld elements but input '%s' has %lld channels", what,
                             p->name, (long long)n, x->name, (long long)ch.value);
    return CP_OK;
}

static struct cp_dim channel_dim(const struct cp_tensor *x)
{
    struct cp_dim ch = {-1, NULL};
    if (x->shape.rank >= 2)
        ch = x->shape.dims[1];
    else if (x->shape.rank == 1)
        ch.value = 1; /* BatchNormalization on (N) assumes one channel */
    return ch;
}

enum cp_status cp_infer_batch_norm(struct cp_infer *c)
{
    static const char *const what[] = {"scale", "bias", "mean", "variance"};
    const struct cp_tensor *x = cp_infer_in(c, 0);
    if (x->shape.rank == 0)
        return cp_infer_fail(c, "input '%s' must have rank >= 1", x->name);
    struct cp_dim ch = channel_dim(x);
    for (size_t i = 1; i <= 4; i++) {
        enum cp_status st = check_channel_param(c, x, ch, i, what[i - 1]);
        if (st != CP_OK)
            return st;
    }
    enum cp_status st = cp_infer_set_out(c, 0, x->dtype, &x->shape);
    /* Training-mode outputs: running (and, before opset 14, saved) mean and
     * variance, one value per channel. */
    struct cp_shape s;
    s.rank = 1;
    s.dims[0] = ch;
    const struct cp_tensor *mean = cp_infer_in(c, 3);
    for (size_t i = 1; i < c->node->n_outputs && st == CP_OK; i++)
        st = cp_infer_set_out(c, i, mean->dtype ? mean->dtype : x->dtype, &s);
    return st;
}

enum cp_status cp_infer_instance_norm(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    if (x->shape.rank >= 0 && x->shape.rank < 3)
        return cp_infer_fail(c, "input '%s' must have rank >= 3 (N, C, spatial), got %d", x->name,
                             x->shape.rank);
    struct cp_dim ch = channel_dim(x);
    enum cp_status st = check_channel_param(c, x, ch, 1, "scale");
    if (st == CP_OK)
        st = check_channel_param(c, x, ch, 2, "bias");
    if (st == CP_OK)
        st = cp_infer_set_out(c, 0, x->dtype, &x->shape);
    return st;
}

/* Scale and bias must broadcast (unidirectionally) to x's dims from axis on. */
static enum cp_status check_norm_param(struct cp_infer *c, const struct cp_tensor *x, int axis,
                                       size_t input, const char *what)
{
    const struct cp_tensor *p = cp_infer_in(c, input);
    int r = x->shape.rank;
    if (!p || p->shape.rank < 0 || r < 0)
        return CP_OK;
    char bp[64], bx[64];
    if (p->shape.rank > r - axis)
        return cp_infer_fail(c,
                             "%s '%s' (%s) has more dims than the normalized part of '%s' "
                             "(%s from axis %d)",
                             what, p->name, cp_infer_fmt(&p->shape, bp), x->name,
                             cp_infer_fmt(&x->shape, bx), axis);
    for (int k = 0; k < p->shape.rank; k++) {
        int64_t pd = p->shape.dims[k].value;
        int64_t xd = x->shape.dims[r - p->shape.rank + k].value;
        if (pd >= 0 && xd >= 0 && pd != 1 && pd != xd)
            return cp_infer_fail(c, "%s '%s' (%s) does not match '%s' (%s) from axis %d", what,
                                 p->name, cp_infer_fmt(&p->shape, bp), x->name,
                                 cp_infer_fmt(&x->shape, bx), axis);
    }
    return CP_OK;
}

enum cp_status cp_infer_layer_norm(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int r = x->shape.rank, axis = 0;
    enum cp_status st;
    if (r >= 0) {
        st = cp_infer_axis(c, cp_node_attr_int(c->node, "axis", -1), r, false, "axis", &axis);
        if (st == CP_OK)
            st = check_norm_param(c, x, axis, 1, "scale");
        if (st == CP_OK)
            st = check_norm_param(c, x, axis, 2, "bias");
        if (st != CP_OK)
            return st;
    }
    st = cp_infer_set_out(c, 0, x->dtype, &x->shape);
    if (st != CP_OK || c->node->n_outputs < 2)
        return st;
    /* Mean and InvStdDev keep the leading dims and reduce the rest to 1, in
     * stash_type (f32 by default). */
    enum cp_dtype stash = cp_dtype_from_onnx((int)cp_node_attr_int(c->node, "stash_type", 1));
    if (stash == CP_DTYPE_UNDEFINED)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "stash_type %lld is not supported",
                                (long long)cp_node_attr_int(c->node, "stash_type", 1));
    struct cp_shape s = x->shape;
    for (int k = axis; k < r; k++)
        cp_infer_dim_set(&s.dims[k], 1);
    for (size_t i = 1; i < c->node->n_outputs && st == CP_OK; i++)
        st = cp_infer_set_out(c, i, stash, &s);
    return st;
}
