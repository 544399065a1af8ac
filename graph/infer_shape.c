/* Inference for shape and data-movement ops. These are where exported models
 * do their shape arithmetic, so most of them also carry values through. */
#include "graph/infer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static enum cp_status nomem(struct cp_infer *c)
{
    return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
}

/* Output i gets input 0's values in the same flat order (Reshape, Squeeze,
 * Unsqueeze, Flatten). */
static enum cp_status pass_values(struct cp_infer *c, size_t i)
{
    int64_t numel, n;
    if (!cp_infer_out_small(c, i, &numel))
        return CP_OK;
    const struct cp_sval *e = cp_infer_vals(c, cp_infer_in_index(c, 0), &n);
    return e && n == numel ? cp_infer_copy_vals(c, i, e, NULL, n) : CP_OK;
}

/* Values of input 0 when its shape is static and they are all there. */
static const struct cp_sval *input_values(struct cp_infer *c, size_t i)
{
    int64_t n;
    const struct cp_tensor *t = cp_infer_in(c, i);
    const struct cp_sval *e = t ? cp_infer_vals(c, cp_infer_in_index(c, i), &n) : NULL;
    return e && cp_shape_numel(&t->shape) == n ? e : NULL;
}

/* Length of a 1-D (or scalar) shape-like input, -1 if unknown. */
static int64_t vector_len(const struct cp_tensor *t)
{
    if (t->shape.rank == 1)
        return t->shape.dims[0].value;
    return t->shape.rank == 0 ? 1 : -1;
}

static struct cp_dim sval_dim(struct cp_sval e)
{
    struct cp_dim d = {-1, NULL};
    if (e.known)
        d.value = e.v;
    else
        d.sym = e.sym;
    return d;
}

/* ---- Shape, Constant, ConstantOfShape, Range ------------------------------------- */

enum cp_status cp_infer_shape_op(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int r = x->shape.rank;
    struct cp_shape s;
    s.rank = 1;
    if (r < 0) {
        cp_infer_dim_dyn(&s.dims[0]);
        return cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
    }
    /* Opset 15 start/end: negative counts from the back, both clamp. */
    int64_t start = cp_node_attr_int(c->node, "start", 0);
    int64_t end = cp_node_attr_int(c->node, "end", r);
    start = start < 0 ? start + r : start;
    end = end < 0 ? end + r : end;
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    cp_infer_dim_set(&s.dims[0], len);
    enum cp_status st = cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
    if (st != CP_OK)
        return st;
    struct cp_sval *e = cp_calloc((size_t)len, sizeof *e);
    if (!e)
        return nomem(c);
    for (int64_t k = 0; k < len; k++) {
        const struct cp_dim *dm = &x->shape.dims[start + k];
        e[k] = dm->value >= 0 ? (struct cp_sval){dm->value, NULL, true}
                              : (struct cp_sval){0, dm->sym, false};
    }
    return cp_infer_set_vals(c, 0, e, len);
}

enum cp_status cp_infer_constant(struct cp_infer *c)
{
    const struct cp_node *n = c->node;
    const struct cp_attr *a;
    struct cp_shape s;
    enum cp_status st;
    if ((a = cp_node_attr(n, "value")) && a->type == CP_ATTR_TENSOR) {
        const struct cp_tensor *t = cp_graph_tensor(c->g, a->tensor);
        if (!t)
            return cp_infer_fail(c, "attribute 'value' refers to no tensor");
        if ((st = cp_infer_set_out(c, 0, t->dtype, &t->shape)) != CP_OK)
            return st;
        int64_t numel, len;
        const struct cp_sval *e = cp_infer_vals(c, a->tensor, &len);
        if (e && cp_infer_out_small(c, 0, &numel) && numel == len)
            return cp_infer_copy_vals(c, 0, e, NULL, len);
        return CP_OK;
    }
    if ((a = cp_node_attr(n, "value_int")) || (a = cp_node_attr(n, "value_ints"))) {
        bool scalar = a->type == CP_ATTR_INT;
        int64_t len = scalar ? 1 : (int64_t)a->n;
        s.rank = scalar ? 0 : 1;
        if (!scalar)
            cp_infer_dim_set(&s.dims[0], len);
        if ((st = cp_infer_set_out(c, 0, CP_DTYPE_I64, &s)) != CP_OK)
            return st;
        int64_t numel;
        if (!cp_infer_out_small(c, 0, &numel) || numel != len)
            return CP_OK;
        struct cp_sval *e = cp_calloc((size_t)len, sizeof *e);
        if (!e)
            return nomem(c);
        for (int64_t k = 0; k < len; k++)
            e[k] = (struct cp_sval){scalar ? a->i : a->ints[k], NULL, true};
        return cp_infer_set_vals(c, 0, e, len);
    }
    if ((a = cp_node_attr(n, "value_float")) || (a = cp_node_attr(n, "value_floats"))) {
        s.rank = a->type == CP_ATTR_FLOAT ? 0 : 1;
        if (s.rank)
            cp_infer_dim_set(&s.dims[0], (int64_t)a->n);
        return cp_infer_set_out(c, 0, CP_DTYPE_F32, &s);
    }
    if (cp_node_attr(n, "value_string") || cp_node_attr(n, "value_strings") ||
        cp_node_attr(n, "sparse_value"))
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                "string and sparse constants are not supported");
    return cp_infer_fail(c, "missing required attribute: one of 'value', 'value_int', "
                            "'value_ints', 'value_float', 'value_floats'");
}

/* Output dims from a shape-like input's values; unknown entries stay
 * dynamic (keeping their symbol). OUT: *s (rank -1 if even the length is
 * unknown). */
static enum cp_status shape_from_input(struct cp_infer *c, size_t input, bool allow_neg,
                                       struct cp_shape *s)
{
    const struct cp_tensor *t = cp_infer_in(c, input);
    int64_t n;
    const struct cp_sval *e = cp_infer_vals(c, cp_infer_in_index(c, input), &n);
    if (t->shape.rank > 1)
        return cp_infer_fail(c, "shape input '%s' must be 1-D, got rank %d", t->name,
                             t->shape.rank);
    int64_t len = e ? n : vector_len(t);
    if (len > CP_MAX_RANK)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED,
                                "shape input '%s' has %lld entries; at most %d are supported",
                                t->name, (long long)len, CP_MAX_RANK);
    cp_infer_shape_dyn(s, (int)len);
    for (int64_t k = 0; e && k < n; k++) {
        if (e[k].known && e[k].v < 0 && !allow_neg)
            return cp_infer_fail(c, "shape input '%s' has negative entry %lld at %lld", t->name,
                                 (long long)e[k].v, (long long)k);
        s->dims[k] = sval_dim(e[k]);
    }
    return CP_OK;
}

enum cp_status cp_infer_constant_of_shape(struct cp_infer *c)
{
    struct cp_shape s;
    enum cp_status st = shape_from_input(c, 0, false, &s);
    if (st != CP_OK)
        return st;
    /* `value` is a one-element tensor; absent means f32 zero. */
    enum cp_dtype dt = CP_DTYPE_F32;
    const struct cp_sval *fill = NULL;
    int64_t n_fill = 0;
    const struct cp_attr *a = cp_node_attr(c->node, "value");
    if (a && a->type == CP_ATTR_TENSOR) {
        const struct cp_tensor *v = cp_graph_tensor(c->g, a->tensor);
        if (!v)
            return cp_infer_fail(c, "attribute 'value' refers to no tensor");
        dt = v->dtype;
        fill = cp_infer_vals(c, a->tensor, &n_fill);
    }
    if ((st = cp_infer_set_out(c, 0, dt, &s)) != CP_OK)
        return st;
    int64_t numel;
    if (!cp_infer_out_small(c, 0, &numel) || (a && (!fill || n_fill != 1)))
        return CP_OK;
    struct cp_sval *e = cp_calloc((size_t)numel, sizeof *e);
    if (!e)
        return nomem(c);
    for (int64_t k = 0; k < numel; k++)
        e[k] = fill ? fill[0] : (struct cp_sval){0, NULL, true};
    return cp_infer_set_vals(c, 0, e, numel);
}

/* Number of elements of Range(start, limit, delta), delta != 0. In
 * unsigned arithmetic: limit - start may not fit in int64 even when the
 * count does. The count may still exceed INT64_MAX; the caller checks. */
static uint64_t range_count_int(int64_t start, int64_t limit, int64_t delta)
{
    if ((delta > 0 && limit <= start) || (delta < 0 && limit >= start))
        return 0;
    uint64_t span =
        delta > 0 ? (uint64_t)limit - (uint64_t)start : (uint64_t)start - (uint64_t)limit;
    uint64_t step = delta > 0 ? (uint64_t)delta : (uint64_t)0 - (uint64_t)delta;
    return (span - 1) / step + 1;
}

enum cp_status cp_infer_range(struct cp_infer *c)
{
    const struct cp_tensor *t[3];
    for (size_t i = 0; i < 3; i++) {
        t[i] = cp_infer_in(c, i);
        if (t[i]->shape.rank > 0 && cp_shape_numel(&t[i]->shape) != 1)
            return cp_infer_fail(c, "input '%s' must be a scalar", t[i]->name);
    }
    enum cp_dtype dt = t[0]->dtype;
    int64_t count = -1;
    int64_t iv[3], n;
    double dv[3];
    bool ints = true;
    for (size_t i = 0; i < 3 && ints; i++)
        ints = cp_infer_ints(c, cp_infer_in_index(c, i), &iv[i], 1, &n) && n == 1;
    if (ints && !cp_dtype_is_float(dt)) {
        if (iv[2] == 0)
            return cp_infer_fail(c, "delta '%s' is zero", t[2]->name);
        uint64_t u = range_count_int(iv[0], iv[1], iv[2]);
        if (u > (uint64_t)INT64_MAX)
            return cp_infer_fail(c,
                                 "Range from %lld to %lld by %lld has %llu elements, more than "
                                 "a tensor can hold",
                                 (long long)iv[0], (long long)iv[1], (long long)iv[2],
                                 (unsigned long long)u);
        count = (int64_t)u;
    } else {
        bool known = true;
        for (size_t i = 0; i < 3 && known; i++)
            known = cp_infer_doubles(c, cp_infer_in_index(c, i), &dv[i], 1, &n) && n == 1;
        if (known) {
            if (dv[2] == 0.0)
                return cp_infer_fail(c, "delta '%s' is zero", t[2]->name);
            double q = ceil((dv[1] - dv[0]) / dv[2]);
            /* 2^63 is the first double past INT64_MAX. */
            if (q >= 9223372036854775808.0)
                return cp_infer_fail(c,
                                     "Range from %g to %g by %g has %g elements, more than a "
                                     "tensor can hold",
                                     dv[0], dv[1], dv[2], q);
            count = q > 0 ? (int64_t)q : 0;
        }
    }
    struct cp_shape s;
    s.rank = 1;
    cp_infer_dim_set(&s.dims[0], count);
    enum cp_status st = cp_infer_set_out(c, 0, dt, &s);
    int64_t numel;
    if (st != CP_OK || !ints || !cp_infer_out_small(c, 0, &numel))
        return st;
    struct cp_sval *e = cp_calloc((size_t)numel, sizeof *e);
    if (!e)
        return nomem(c);
    for (int64_t k = 0; k < numel; k++)
        /* The true value lies between start and limit; only k * delta may
         * not fit, so add in unsigned arithmetic. */
        e[k] = (struct cp_sval){(int64_t)((uint64_t)iv[0] + (uint64_t)k * (uint64_t)iv[2]), NULL,
                                true};
    return cp_infer_set_vals(c, 0, e, numel);
}

/* ---- Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand ------------------------- */

/* Product of the static dims of s, skipping `skip`; false on overflow. */
static bool static_product(const struct cp_shape *s, int skip, int64_t *out)
{
    int64_t p = 1;
    for (int k = 0; k < s->rank; k++)
        if (k != skip && s->dims[k].value >= 0 && __builtin_mul_overflow(p, s->dims[k].value, &p))
            return false;
    *out = p;
    return true;
}

/* Resolve Reshape's -1 at `at`. With a static input it is the element count
 * divided by the other dims. With dynamic dims it still resolves when every
 * dynamic input dim reappears in the output, copied by a 0 (same position) or
 * under the same symbol: the unknowns cancel and the static parts divide. */
static enum cp_status resolve_minus_one(struct cp_infer *c, const struct cp_tensor *x,
                                        struct cp_shape *s, int at, const int *copied_from)
{
    const struct cp_shape *in = &x->shape;
    if (in->rank < 0)
        return CP_OK;
    bool used[CP_MAX_RANK] = {false};
    for (int k = 0; k < s->rank; k++) {
        if (k == at || s->dims[k].value >= 0)
            continue;
        int match = -1;
        if (copied_from[k] >= 0 && !used[copied_from[k]]) {
            match = copied_from[k];
        } else if (s->dims[k].sym) {
            for (int j = 0; j < in->rank && match < 0; j++)
                if (!used[j] && in->dims[j].value < 0 && in->dims[j].sym &&
                    strcmp(in->dims[j].sym, s->dims[k].sym) == 0)
                    match = j;
        }
        if (match < 0)
            return CP_OK; /* an output unknown not explained by the input */
        used[match] = true;
    }
    for (int j = 0; j < in->rank; j++)
        if (in->dims[j].value < 0 && !used[j])
            return CP_OK; /* an input unknown that the -1 would absorb */
    int64_t pin, pout;
    if (!static_product(in, -1, &pin) || !static_product(s, at, &pout) || pout == 0)
        return CP_OK;
    if (pin % pout != 0) {
        char bi[64], bo[64];
        return cp_infer_fail(c,
                             "cannot reshape '%s' (%s) to %s: %lld elements are not a "
                             "multiple of %lld",
                             x->name, cp_infer_fmt(in, bi), cp_infer_fmt(s, bo), (long long)pin,
                             (long long)pout);
    }
    cp_infer_dim_set(&s->dims[at], pin / pout);
    return CP_OK;
}

enum cp_status cp_infer_reshape(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *shp = cp_infer_in(c, 1);
    bool allowzero = cp_node_attr_int(c->node, "allowzero", 0) != 0;
    struct cp_shape s;
    enum cp_status st = shape_from_input(c, 1, true, &s);
    if (st != CP_OK)
        return st;
    int64_t n;
    const struct cp_sval *e = cp_infer_vals(c, cp_infer_in_index(c, 1), &n);
    int at = -1;
    int copied_from[CP_MAX_RANK];
    for (int k = 0; k < s.rank; k++) {
        copied_from[k] = -1;
        if (!e || !e[k].known)
            continue;
        int64_t v = e[k].v;
        if (v == 0 && !allowzero) {
            if (x->shape.rank >= 0 && k >= x->shape.rank)
                return cp_infer_fail(c, "shape '%s'[%d] is 0 (copy) but input '%s' has rank %d",
                                     shp->name, k, x->name, x->shape.rank);
            if (x->shape.rank >= 0) {
                s.dims[k] = x->shape.dims[k];
                copied_from[k] = s.dims[k].value < 0 ? k : -1;
            } else {
                cp_infer_dim_dyn(&s.dims[k]);
            }
        } else if (v == -1) {
            if (at >= 0)
                return cp_infer_fail(c, "shape '%s' has more than one -1", shp->name);
            at = k;
            cp_infer_dim_dyn(&s.dims[k]);
        } else if (v < 0) {
            return cp_infer_fail(c, "shape '%s' has invalid entry %lld", shp->name, (long long)v);
        }
    }
    if (at >= 0 && (st = resolve_minus_one(c, x, &s, at, copied_from)) != CP_OK)
        return st;
    int64_t nin = cp_shape_numel(&x->shape), nout = cp_shape_numel(&s);
    if (nin >= 0 && nout >= 0 && nin != nout) {
        char bi[64], bo[64];
        return cp_infer_fail(c, "cannot reshape '%s' (%s, %lld elements) to %s (%lld elements)",
                             x->name, cp_infer_fmt(&x->shape, bi), (long long)nin,
                             cp_infer_fmt(&s, bo), (long long)nout);
    }
    if ((st = cp_infer_set_out(c, 0, x->dtype, &s)) != CP_OK)
        return st;
    return pass_values(c, 0);
}

/* A run of dims folded into one: static product, a lone dynamic dim among 1s
 * keeps its identity, anything else is dynamic. */
static struct cp_dim fold_dims(const struct cp_shape *s, int from, int to)
{
    struct cp_dim d = {1, NULL};
    int n_dyn = 0;
    for (int k = from; k < to; k++) {
        if (s->dims[k].value < 0) {
            n_dyn++;
            d = s->dims[k];
        }
    }
    if (n_dyn > 1) {
        cp_infer_dim_dyn(&d);
        return d;
    }
    int64_t p = 1;
    for (int k = from; k < to; k++) {
        int64_t v = s->dims[k].value;
        if (v >= 0 && __builtin_mul_overflow(p, v, &p)) {
            cp_infer_dim_dyn(&d);
            return d;
        }
    }
    if (n_dyn == 0)
        cp_infer_dim_set(&d, p);
    else if (p != 1)
        cp_infer_dim_dyn(&d);
    return d;
}

enum cp_status cp_infer_flatten(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    struct cp_shape s;
    s.rank = 2;
    int r = x->shape.rank;
    if (r < 0) {
        cp_infer_shape_dyn(&s, 2);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int axis;
    enum cp_status st =
        cp_infer_axis(c, cp_node_attr_int(c->node, "axis", 1), r, true, "axis", &axis);
    if (st != CP_OK)
        return st;
    s.dims[0] = fold_dims(&x->shape, 0, axis);
    s.dims[1] = fold_dims(&x->shape, axis, r);
    if ((st = cp_infer_set_out(c, 0, x->dtype, &s)) != CP_OK)
        return st;
    return pass_values(c, 0);
}

/* Squeeze and Unsqueeze axes: an attribute before opset 13, an input from
 * 13 (the other form is accepted when the expected one is absent). */
static enum cp_status squeeze_axes(struct cp_infer *c, int64_t *axes, int64_t *n, bool *present,
                                   int64_t *n_unknown)
{
    size_t na;
    bool attr;
    enum cp_status st = cp_infer_attr_ints(c, "axes", axes, CP_MAX_RANK, &na, &attr);
    if (st != CP_OK)
        return st;
    int32_t ti = cp_infer_in_index(c, 1);
    *n_unknown = -1;
    *present = true;
    if (ti >= 0 && (c->opset >= 13 || !attr)) {
        if (!cp_infer_ints(c, ti, axes, CP_MAX_RANK, n)) {
            *n = -1;
            *n_unknown = vector_len(cp_graph_tensor(c->g, ti));
        }
        return CP_OK;
    }
    *n = (int64_t)na;
    *present = attr;
    return CP_OK;
}

enum cp_status cp_infer_squeeze(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t axes[CP_MAX_RANK], na, n_unknown;
    bool present;
    enum cp_status st = squeeze_axes(c, axes, &na, &present, &n_unknown);
    if (st != CP_OK)
        return st;
    int r = x->shape.rank;
    struct cp_shape s;
    if (r < 0 || na < 0) {
        int rank = r >= 0 && n_unknown >= 0 && n_unknown <= r ? r - (int)n_unknown : -1;
        cp_infer_shape_dyn(&s, rank);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    bool drop[CP_MAX_RANK] = {false};
    if (!present || na == 0) {
        /* Every dim of size 1; with dynamic dims, which ones is unknown. */
        for (int k = 0; k < r; k++) {
            if (x->shape.dims[k].value < 0) {
                cp_shape_set_unknown(&s);
                return cp_infer_set_out(c, 0, x->dtype, &s);
            }
            drop[k] = x->shape.dims[k].value == 1;
        }
    }
    for (int64_t k = 0; k < na; k++) {
        int a;
        if ((st = cp_infer_axis(c, axes[k], r, false, "axis", &a)) != CP_OK)
            return st;
        if (drop[a])
            return cp_infer_fail(c, "axis %lld is listed twice", (long long)axes[k]);
        int64_t v = x->shape.dims[a].value;
        if (v >= 0 && v != 1)
            return cp_infer_fail(c, "cannot squeeze axis %d of '%s': its size is %lld, not 1", a,
                                 x->name, (long long)v);
        drop[a] = true;
    }
    s.rank = 0;
    for (int k = 0; k < r; k++)
        if (!drop[k])
            s.dims[s.rank++] = x->shape.dims[k];
    if ((st = cp_infer_set_out(c, 0, x->dtype, &s)) != CP_OK)
        return st;
    return pass_values(c, 0);
}

enum cp_status cp_infer_unsqueeze(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int64_t axes[CP_MAX_RANK], na, n_unknown;
    bool present;
    enum cp_status st = squeeze_axes(c, axes, &na, &present, &n_unknown);
    if (st != CP_OK)
        return st;
    if (!present)
        return cp_infer_fail(c, "missing required axes (%s)",
                             c->opset >= 13 ? "input 1" : "attribute 'axes'");
    int r = x->shape.rank;
    struct cp_shape s;
    if (r < 0 || na < 0) {
        int rank = r >= 0 && n_unknown >= 0 ? r + (int)n_unknown : -1;
        cp_infer_shape_dyn(&s, rank);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int orank = r + (int)na;
    if (orank > CP_MAX_RANK)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "output rank %d exceeds %d", orank,
                                CP_MAX_RANK);
    bool ins[CP_MAX_RANK] = {false};
    for (int64_t k = 0; k < na; k++) {
        int a;
        if ((st = cp_infer_axis(c, axes[k], orank, false, "axis", &a)) != CP_OK)
            return st;
        if (ins[a])
            return cp_infer_fail(c, "axis %lld is listed twice", (long long)axes[k]);
        ins[a] = true;
    }
    s.rank = orank;
    for (int k = 0, j = 0; k < orank; k++) {
        if (ins[k])
            cp_infer_dim_set(&s.dims[k], 1);
        else
            s.dims[k] = x->shape.dims[j++];
    }
    if ((st = cp_infer_set_out(c, 0, x->dtype, &s)) != CP_OK)
        return st;
    return pass_values(c, 0);
}

enum cp_status cp_infer_transpose(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int r = x->shape.rank;
    int64_t perm[CP_MAX_RANK];
    size_t np;
    bool present;
    enum cp_status st = cp_infer_attr_ints(c, "perm", perm, CP_MAX_RANK, &np, &present);
    if (st != CP_OK)
        return st;
    if (r < 0) {
        struct cp_shape s;
        cp_infer_shape_dyn(&s, present ? (int)np : -1);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    if (!present)
        for (int k = 0; k < r; k++)
            perm[k] = r - 1 - k;
    else if ((int)np != r)
        return cp_infer_fail(c, "perm has %zu entries but input '%s' has rank %d", np, x->name, r);
    bool seen[CP_MAX_RANK] = {false};
    struct cp_shape s;
    s.rank = r;
    for (int k = 0; k < r; k++) {
        if (perm[k] < 0 || perm[k] >= r || seen[perm[k]])
            return cp_infer_fail(c, "perm is not a permutation of 0..%d", r - 1);
        seen[perm[k]] = true;
        s.dims[k] = x->shape.dims[perm[k]];
    }
    if ((st = cp_infer_set_out(c, 0, x->dtype, &s)) != CP_OK)
        return st;
    int64_t numel;
    const struct cp_sval *e = input_values(c, 0);
    if (!e || !cp_infer_out_small(c, 0, &numel))
        return CP_OK;
    int64_t map[CP_VALUE_MAX_ELEMS], oc[CP_MAX_RANK], ic[CP_MAX_RANK];
    for (int64_t k = 0; k < numel; k++) {
        cp_infer_unravel(&s, k, oc);
        for (int j = 0; j < r; j++)
            ic[perm[j]] = oc[j];
        map[k] = cp_infer_ravel(&x->shape, ic);
    }
    return cp_infer_copy_vals(c, 0, e, map, numel);
}

enum cp_status cp_infer_expand(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *shp = cp_infer_in(c, 1);
    struct cp_shape target, s;
    enum cp_status st = shape_from_input(c, 1, false, &target);
    if (st != CP_OK)
        return st;
    if ((st = cp_infer_broadcast(c, &x->shape, x->name, &target, shp->name, &s)) != CP_OK)
        return st;
    if ((st = cp_infer_set_out(c, 0, x->dtype, &s)) != CP_OK)
        return st;
    int64_t numel;
    const struct cp_sval *e = input_values(c, 0);
    if (!e || !cp_infer_out_small(c, 0, &numel))
        return CP_OK;
    const struct cp_shape *os = &cp_infer_out(c, 0)->shape;
    int64_t map[CP_VALUE_MAX_ELEMS];
    for (int64_t k = 0; k < numel; k++)
        map[k] = cp_infer_bcast_index(os, &x->shape, k);
    return cp_infer_copy_vals(c, 0, e, map, numel);
}
