/* Inference for the elementwise family: unary math and activations,
 * comparisons and logic, Mod and the bitwise ops, PRelu, the variadic
 * Max/Min/Sum/Mean, CastLike and the random generators. Small integer
 * values propagate through the ops shape arithmetic uses (Neg, Abs, Not,
 * comparisons, logic, Mod, Max, Min, Sum). */
#include "graph/infer_internal.h"
#include "graph/op_eval_elementwise.h"

#include <stdlib.h>
#include <string.h>

/* ---- dtypes ------------------------------------------------------------------ */

static enum cp_status out_dtype(struct cp_infer *c, const struct cp_tensor *x, enum cp_dtype *out)
{
    *out = CP_DTYPE_UNDEFINED;
    if (!x->dtype)
        return CP_OK;
    *out = cp_ew_out_dtype(c->node->op, x->dtype);
    if (*out == CP_DTYPE_UNDEFINED)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "input '%s' of type %s is not supported",
                                x->name, cp_dtype_name(x->dtype));
    return CP_OK;
}

static enum cp_status same_dtype(struct cp_infer *c, const struct cp_tensor *a,
                                 const struct cp_tensor *b)
{
    if (a->dtype && b->dtype && a->dtype != b->dtype)
        return cp_infer_fail(c, "inputs '%s' and '%s' have different types: %s vs %s", a->name,
                             b->name, cp_dtype_name(a->dtype), cp_dtype_name(b->dtype));
    return CP_OK;
}

/* ---- values --------------------------------------------------------------------- */

/* Values of output 0 from every input's known integer values, element by
 * element with broadcasting, through the op's own arithmetic. */
static enum cp_status propagate(struct cp_infer *c)
{
    int64_t numel;
    size_t n_in = c->node->n_inputs;
    if (!cp_infer_out_small(c, 0, &numel) || n_in > 8)
        return CP_OK;
    const struct cp_sval *e[8];
    const struct cp_tensor *t[8];
    for (size_t i = 0; i < n_in; i++) {
        int64_t n;
        t[i] = cp_infer_in(c, i);
        if (!t[i] || !cp_infer_dtype_has_value(t[i]->dtype))
            return CP_OK;
        e[i] = cp_infer_vals(c, cp_infer_in_index(c, i), &n);
        if (!e[i] || cp_shape_numel(&t[i]->shape) != n)
            return CP_OK;
    }
    const struct cp_tensor *out = cp_infer_out(c, 0);
    struct cp_sval *r = cp_calloc((size_t)(numel ? numel : 1), sizeof *r);
    if (!r)
        return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
    enum cp_op op = c->node->op;
    struct cp_ew_params p;
    cp_ew_params_of(c->node, &p);
    /* One element at a time through the evaluators, on int64 scalars. */
    struct cp_shape scalar;
    cp_shape_set(&scalar, 0, NULL);
    struct cp_tensor ta = {.dtype = CP_DTYPE_I64, .shape = scalar}, tb = ta, ty = ta;
    for (int64_t k = 0; k < numel; k++) {
        bool known = true;
        int64_t v[8];
        for (size_t i = 0; i < n_in; i++) {
            struct cp_sval s = e[i][cp_infer_bcast_index(&out->shape, &t[i]->shape, k)];
            known = known && s.known;
            v[i] = s.v;
        }
        if (!known)
            continue;
        int64_t acc = v[0], res = 0;
        if (cp_ew_is_unary(op)) {
            res = op == CP_OP_NOT              ? !acc
                  : op == CP_OP_SIGN           ? (acc > 0) - (acc < 0)
                  : op == CP_OP_ABS && acc < 0 ? (int64_t)(0 - (uint64_t)acc)
                  : op == CP_OP_NEG            ? (int64_t)(0 - (uint64_t)acc)
                                               : acc;
        } else if (cp_ew_is_binary(op)) {
            ta.dtype = tb.dtype = CP_DTYPE_I64;
            ty.dtype = out->dtype == CP_DTYPE_BOOL ? CP_DTYPE_BOOL : CP_DTYPE_I64;
            uint8_t b8 = 0;
            cp_ew_binary(op, &p, &ta, &v[0], &tb, &v[1], &ty,
                         ty.dtype == CP_DTYPE_BOOL ? (void *)&b8 : (void *)&res);
            if (ty.dtype == CP_DTYPE_BOOL)
                res = b8;
        } else if (op == CP_OP_MAX || op == CP_OP_MIN || op == CP_OP_SUM) {
            res = acc;
            for (size_t i = 1; i < n_in; i++)
                res = op == CP_OP_MAX   ? (res > v[i] ? res : v[i])
                      : op == CP_OP_MIN ? (res < v[i] ? res : v[i])
                                        : (int64_t)((uint64_t)res + (uint64_t)v[i]);
        } else {
            continue;
        }
        r[k] = (struct cp_sval){cp_infer_wrap(out->dtype, res), NULL, true};
    }
    return cp_infer_set_vals(c, 0, r, numel);
}

/* ---- per-op rules ------------------------------------------------------------------- */

enum cp_status cp_infer_ew_unary(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    enum cp_dtype dt;
    enum cp_status st = out_dtype(c, x, &dt);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 0, dt, &x->shape);
    if (st != CP_OK)
        return st;
    enum cp_op op = c->node->op;
    if (op == CP_OP_NEG || op == CP_OP_ABS || op == CP_OP_NOT || op == CP_OP_SIGN)
        return propagate(c);
    return CP_OK;
}

enum cp_status cp_infer_ew_binary(struct cp_infer *c)
{
    struct cp_tensor *a = cp_infer_in(c, 0), *b = cp_infer_in(c, 1);
    enum cp_op op = c->node->op;
    enum cp_status st = same_dtype(c, a, b);
    if (st != CP_OK)
        return st;
    enum cp_dtype dt;
    if ((st = out_dtype(c, a, &dt)) != CP_OK)
        return st;
    if (op == CP_OP_MOD && cp_dtype_is_float(a->dtype) && cp_node_attr_int(c->node, "fmod", 0) == 0)
        return cp_infer_fail(c, "Mod of floating-point inputs needs fmod=1 (input '%s' is %s)",
                             a->name, cp_dtype_name(a->dtype));
    if (op == CP_OP_BIT_SHIFT) {
        const char *d = cp_node_attr_string(c->node, "direction", "");
        if (strcmp(d, "LEFT") != 0 && strcmp(d, "RIGHT") != 0)
            return cp_infer_fail(c, "direction must be \"LEFT\" or \"RIGHT\", got '%s'", d);
    }
    struct cp_shape s, bs = b->shape;
    if (op == CP_OP_PRELU)
        cp_ew_prelu_slope_shape(c->opset, &a->shape, &b->shape, &bs);
    st = cp_infer_broadcast(c, &a->shape, a->name, &bs, b->name, &s);
    if (st != CP_OK)
        return st;
    /* PRelu's slope broadcasts to X, never X to the slope. */
    bool grew = false;
    for (int k = 0; op == CP_OP_PRELU && k < s.rank && s.rank == a->shape.rank; k++)
        grew = grew || (a->shape.dims[k].value >= 0 && s.dims[k].value != a->shape.dims[k].value);
    if (op == CP_OP_PRELU && a->shape.rank >= 0 && (s.rank != a->shape.rank || grew)) {
        char sb[64], as[64];
        return cp_infer_fail(c, "slope '%s' (%s) does not broadcast to input '%s' (%s)", b->name,
                             cp_infer_fmt(&b->shape, sb), a->name, cp_infer_fmt(&a->shape, as));
    }
    if (op == CP_OP_PRELU)
        s = a->shape.rank >= 0 ? a->shape : s;
    st = cp_infer_set_out(c, 0, dt, &s);
    if (st != CP_OK || op == CP_OP_PRELU || op == CP_OP_BIT_SHIFT)
        return st;
    return propagate(c);
}

enum cp_status cp_infer_ew_variadic(struct cp_infer *c)
{
    const struct cp_node *n = c->node;
    struct cp_tensor *x0 = cp_infer_in(c, 0);
    struct cp_shape s = x0->shape;
    enum cp_status st;
    for (size_t i = 1; i < n->n_inputs; i++) {
        struct cp_tensor *xi = cp_infer_in(c, i);
        if (!xi)
            return cp_infer_fail(c, "input %zu is missing", i);
        if ((st = same_dtype(c, x0, xi)) != CP_OK)
            return st;
        struct cp_shape t;
        if ((st = cp_infer_broadcast(c, &s, NULL, &xi->shape, xi->name, &t)) != CP_OK)
            return st;
        s = t;
    }
    enum cp_dtype dt;
    if ((st = out_dtype(c, x0, &dt)) != CP_OK)
        return st;
    st = cp_infer_set_out(c, 0, dt, &s);
    if (st != CP_OK || n->op == CP_OP_MEAN)
        return st;
    return propagate(c);
}

enum cp_status cp_infer_cast_like(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *like = cp_infer_in(c, 1);
    enum cp_status st = cp_infer_set_out(c, 0, like->dtype, &x->shape);
    int64_t numel, n;
    if (st != CP_OK || !cp_infer_out_small(c, 0, &numel) || cp_dtype_is_float(x->dtype))
        return st;
    const struct cp_sval *src = cp_infer_vals(c, cp_infer_in_index(c, 0), &n);
    return src && n == numel ? cp_infer_copy_vals(c, 0, src, NULL, n) : CP_OK;
}

/* The `dtype` attribute of a generator, or `dflt`; refused unless a float
 * dtype (or, for Bernoulli and Multinomial, any numeric or bool). */
static enum cp_status gen_dtype(struct cp_infer *c, enum cp_dtype dflt, bool any,
                                enum cp_dtype *out)
{
    const struct cp_attr *a = cp_node_attr(c->node, "dtype");
    *out = dflt;
    if (a) {
        if (a->type != CP_ATTR_INT)
            return cp_infer_fail(c, "attribute 'dtype' must be an int");
        *out = cp_dtype_from_onnx(a->i < 0 || a->i > 1000 ? 0 : (int)a->i);
        if (*out == CP_DTYPE_UNDEFINED)
            return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "dtype %lld is not supported",
                                    (long long)a->i);
    }
    if (*out && !cp_dtype_is_float(*out) && !any)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "output type %s is not a float type",
                                cp_dtype_name(*out));
    return CP_OK;
}

enum cp_status cp_infer_random(struct cp_infer *c)
{
    const struct cp_node *n = c->node;
    enum cp_dtype dt;
    enum cp_status st;
    struct cp_shape s;
    switch (n->op) {
    case CP_OP_RANDOM_NORMAL:
    case CP_OP_RANDOM_UNIFORM: {
        int64_t dims[CP_MAX_RANK];
        size_t nd;
        bool present;
        if ((st = gen_dtype(c, CP_DTYPE_F32, false, &dt)) != CP_OK)
            return st;
        st = cp_infer_attr_ints(c, "shape", dims, CP_MAX_RANK, &nd, &present);
        if (st != CP_OK)
            return st;
        if (!present)
            return cp_infer_fail(c, "missing required attribute 'shape'");
        for (size_t k = 0; k < nd; k++)
            if (dims[k] < 0)
                return cp_infer_fail(c, "shape has a negative dimension %lld", (long long)dims[k]);
        cp_shape_set(&s, (int)nd, dims);
        return cp_infer_set_out(c, 0, dt, &s);
    }
    case CP_OP_RANDOM_NORMAL_LIKE:
    case CP_OP_RANDOM_UNIFORM_LIKE:
    case CP_OP_BERNOULLI: {
        const struct cp_tensor *x = cp_infer_in(c, 0);
        if (n->op == CP_OP_BERNOULLI && x->dtype && !cp_dtype_is_float(x->dtype))
            return cp_infer_fail(c, "input '%s' must be a float type, not %s", x->name,
                                 cp_dtype_name(x->dtype));
        if ((st = gen_dtype(c, x->dtype, n->op == CP_OP_BERNOULLI, &dt)) != CP_OK)
            return st;
        return cp_infer_set_out(c, 0, dt, &x->shape);
    }
    default: { /* Multinomial */
        const struct cp_tensor *x = cp_infer_in(c, 0);
        if ((st = gen_dtype(c, CP_DTYPE_I32, true, &dt)) != CP_OK)
            return st;
        if (dt != CP_DTYPE_I32 && dt != CP_DTYPE_I64)
            return cp_infer_fail(c, "dtype must be int32 or int64, not %s", cp_dtype_name(dt));
        if (x->shape.rank >= 0 && x->shape.rank != 2)
            return cp_infer_fail(c, "input '%s' must be 2-D [batch, classes], got rank %d", x->name,
                                 x->shape.rank);
        int64_t ss = cp_node_attr_int(n, "sample_size", 1);
        if (ss < 1)
            return cp_infer_fail(c, "sample_size must be at least 1, got %lld", (long long)ss);
        cp_infer_shape_dyn(&s, 2);
        if (x->shape.rank == 2)
            s.dims[0] = x->shape.dims[0];
        cp_infer_dim_set(&s.dims[1], ss);
        return cp_infer_set_out(c, 0, dt, &s);
    }
    }
}
