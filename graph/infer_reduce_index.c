/* Shape and dtype inference of the reduce_index family: ArgMax/ArgMin,
 * TopK, CumSum, Trilu, the gathers and scatters, Compress, NonZero, OneHot,
 * Tile, Size, EyeLike and the two loss functions. The reductions and
 * LogSoftmax/Hardmax share cp_infer_reduce and cp_infer_softmax.
 *
 * Compress and NonZero have output shapes that depend on data: unless the
 * data is known here, the data-dependent dimension stays dynamic (a shape
 * the model declared fills it in, and the kernel then checks at run time
 * that the data agrees with it). */
#include "graph/infer_internal.h"
#include "graph/op_eval.h"

#include <stdlib.h>
#include <string.h>

static enum cp_status nomem(struct cp_infer *c)
{
    return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
}

static bool is_index_dtype(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32;
}

static enum cp_status check_index(struct cp_infer *c, const struct cp_tensor *t, const char *what)
{
    if (t && t->dtype != CP_DTYPE_UNDEFINED && !is_index_dtype(t->dtype))
        return cp_infer_fail(c, "%s '%s' must be int32 or int64, not %s", what, t->name,
                             cp_dtype_name(t->dtype));
    return CP_OK;
}

/* Output 0 has input 0's dtype and shape (CumSum, Trilu). */
enum cp_status cp_infer_same_shape(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    if (c->node->op == CP_OP_CUM_SUM) {
        const struct cp_tensor *a = cp_infer_in(c, 1);
        enum cp_status st = check_index(c, a, "axis");
        if (st != CP_OK)
            return st;
        if (a->shape.rank > 1 || (a->shape.rank == 1 && a->shape.dims[0].value > 1))
            return cp_infer_fail(c, "axis '%s' must be a scalar", a->name);
        int64_t v, n;
        int ax;
        if (x->shape.rank >= 0 && cp_infer_ints(c, cp_infer_in_index(c, 1), &v, 1, &n) && n == 1 &&
            (st = cp_infer_axis(c, v, x->shape.rank, false, "axis", &ax)) != CP_OK)
            return st;
    } else if (x->shape.rank >= 0 && x->shape.rank < 2) {
        return cp_infer_fail(c, "input '%s' must have rank >= 2, got %d", x->name, x->shape.rank);
    }
    return cp_infer_set_out(c, 0, x->dtype, &x->shape);
}

/* ArgMax, ArgMin: int64 indices, the axis removed or kept as 1. */
enum cp_status cp_infer_argmax(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    struct cp_shape s;
    int r = x->shape.rank, ax;
    if (r < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
    }
    if (r == 0)
        return cp_infer_fail(c, "input '%s' is a scalar", x->name);
    enum cp_status st =
        cp_infer_axis(c, cp_node_attr_int(c->node, "axis", 0), r, false, "axis", &ax);
    if (st != CP_OK)
        return st;
    bool keep = cp_node_attr_int(c->node, "keepdims", 1) != 0;
    s.rank = 0;
    for (int k = 0; k < r; k++) {
        if (k != ax)
            s.dims[s.rank++] = x->shape.dims[k];
        else if (keep)
            cp_infer_dim_set(&s.dims[s.rank++], 1);
    }
    return cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
}

/* TopK: k is an attribute before opset 10 and a 1-element input from 10. */
enum cp_status cp_infer_topk(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    int r = x->shape.rank, ax;
    struct cp_shape s;
    int64_t k = -1, n;
    bool known = false;
    if (c->opset < 10 || c->node->n_inputs < 2) {
        const struct cp_attr *a = cp_node_attr(c->node, "k");
        if (!a || a->type != CP_ATTR_INT)
            return cp_infer_fail(c, "needs the 'k' attribute (opset %lld) or a K input",
                                 (long long)c->opset);
        k = a->i;
        known = true;
    } else {
        const struct cp_tensor *kt = cp_infer_in(c, 1);
        if (!kt || kt->dtype != CP_DTYPE_I64)
            return cp_infer_fail(c, "K must be a 1-element int64 tensor");
        int64_t v;
        if (cp_infer_ints(c, cp_infer_in_index(c, 1), &v, 1, &n) && n == 1) {
            k = v;
            known = true;
        } else if (kt->shape.rank >= 0 && cp_shape_numel(&kt->shape) > 1)
            return cp_infer_fail(c, "K '%s' must hold one element", kt->name);
    }
    if (r < 0) {
        cp_shape_set_unknown(&s);
    } else {
        if (r == 0)
            return cp_infer_fail(c, "input '%s' is a scalar", x->name);
        enum cp_status st =
            cp_infer_axis(c, cp_node_attr_int(c->node, "axis", -1), r, false, "axis", &ax);
        if (st != CP_OK)
            return st;
        s = x->shape;
        if (known && k < 0)
            return cp_infer_fail(c, "k must be >= 0, got %lld", (long long)k);
        int64_t len = x->shape.dims[ax].value;
        if (k >= 0 && len >= 0 && k > len)
            return cp_infer_fail(c, "k = %lld exceeds the axis length %lld", (long long)k,
                                 (long long)len);
        if (known)
            cp_infer_dim_set(&s.dims[ax], k);
        else
            cp_infer_dim_dyn(&s.dims[ax]);
    }
    enum cp_status st = cp_infer_set_out(c, 0, x->dtype, &s);
    return st == CP_OK ? cp_infer_set_out(c, 1, CP_DTYPE_I64, &s) : st;
}

/* GatherElements: the output has the indices' shape. */
enum cp_status cp_infer_gather_elements(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *ix = cp_infer_in(c, 1);
    enum cp_status st = check_index(c, ix, "indices");
    if (st != CP_OK)
        return st;
    if (x->shape.rank >= 0 && ix->shape.rank >= 0) {
        int ax;
        if (x->shape.rank != ix->shape.rank)
            return cp_infer_fail(c, "data '%s' (rank %d) and indices '%s' (rank %d) differ in rank",
                                 x->name, x->shape.rank, ix->name, ix->shape.rank);
        if (x->shape.rank == 0)
            return cp_infer_fail(c, "data '%s' is a scalar", x->name);
        if ((st = cp_infer_axis(c, cp_node_attr_int(c->node, "axis", 0), x->shape.rank, false,
                                "axis", &ax)) != CP_OK)
            return st;
    }
    return cp_infer_set_out(c, 0, x->dtype, &ix->shape);
}

/* GatherND: indices[..., m] address the first m dims after batch_dims;
 * the output is indices' shape without the last dim, then data's
 * remaining dims. */
enum cp_status cp_infer_gather_nd(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *ix = cp_infer_in(c, 1);
    enum cp_status st = check_index(c, ix, "indices");
    if (st != CP_OK)
        return st;
    if (ix->dtype == CP_DTYPE_I32)
        return cp_infer_fail(c, "indices '%s' must be int64", ix->name);
    struct cp_shape s;
    int rd = x->shape.rank, ri = ix->shape.rank;
    int64_t b = cp_node_attr_int(c->node, "batch_dims", 0);
    if ((rd >= 0 && rd < 1) || (ri >= 0 && ri < 1))
        return cp_infer_fail(c, "data and indices must have rank >= 1");
    if (rd < 0 || ri < 0 || ix->shape.dims[ri - 1].value < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int64_t m = ix->shape.dims[ri - 1].value;
    if (b < 0 || b >= rd || b >= ri || m < 1 || b + m > rd)
        return cp_infer_fail(c,
                             "indices '%s' last dim %lld with batch_dims %lld does not fit data "
                             "'%s' of rank %d",
                             ix->name, (long long)m, (long long)b, x->name, rd);
    s.rank = 0;
    if (ri - 1 + rd - (int)(b + m) > CP_MAX_RANK)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "output rank exceeds %d", CP_MAX_RANK);
    for (int k = 0; k < ri - 1; k++)
        s.dims[s.rank++] = ix->shape.dims[k];
    for (int k = (int)(b + m); k < rd; k++)
        s.dims[s.rank++] = x->shape.dims[k];
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* Scatter, ScatterElements, ScatterND: the output is the data. */
enum cp_status cp_infer_scatter(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *ix = cp_infer_in(c, 1), *u = cp_infer_in(c, 2);
    enum cp_status st = check_index(c, ix, "indices");
    if (st != CP_OK)
        return st;
    if (u->dtype != CP_DTYPE_UNDEFINED && x->dtype != CP_DTYPE_UNDEFINED && u->dtype != x->dtype)
        return cp_infer_fail(c, "updates '%s' (%s) and data '%s' (%s) differ in dtype", u->name,
                             cp_dtype_name(u->dtype), x->name, cp_dtype_name(x->dtype));
    const char *red = cp_node_attr_string(c->node, "reduction", "none");
    if (strcmp(red, "none") && strcmp(red, "add") && strcmp(red, "mul") && strcmp(red, "max") &&
        strcmp(red, "min"))
        return cp_infer_fail(c, "unknown reduction '%s'", red);
    if (c->node->op != CP_OP_SCATTER_ND && ix->shape.rank >= 0 && u->shape.rank >= 0 &&
        !cp_shape_equal(&ix->shape, &u->shape) && cp_shape_is_static(&ix->shape) &&
        cp_shape_is_static(&u->shape))
        return cp_infer_fail(c, "indices '%s' and updates '%s' differ in shape", ix->name, u->name);
    return cp_infer_set_out(c, 0, x->dtype, &x->shape);
}

/* Compress: the selected count along `axis` (or of the flattened input)
 * is known only when the condition is. */
enum cp_status cp_infer_compress(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *cond = cp_infer_in(c, 1);
    if (cond->dtype != CP_DTYPE_UNDEFINED && cond->dtype != CP_DTYPE_BOOL)
        return cp_infer_fail(c, "condition '%s' must be bool", cond->name);
    if (cond->shape.rank > 1)
        return cp_infer_fail(c, "condition '%s' must be 1-D", cond->name);
    const struct cp_attr *axis = cp_node_attr(c->node, "axis");
    struct cp_shape s;
    int64_t cv[CP_VALUE_MAX_ELEMS], n, count = -1;
    if (cp_infer_ints(c, cp_infer_in_index(c, 1), cv, CP_VALUE_MAX_ELEMS, &n)) {
        count = 0;
        for (int64_t k = 0; k < n; k++)
            count += cv[k] != 0;
    } else if (!cp_shape_is_static(&cond->shape) ||
               !cp_infer_count_nonzero(c, cp_infer_in_index(c, 1), &count)) {
        count = -1;
    }
    if (x->shape.rank < 0 && axis) {
        cp_shape_set_unknown(&s);
    } else if (!axis) {
        s.rank = 1;
        cp_infer_dim_dyn(&s.dims[0]);
    } else {
        int ax;
        enum cp_status st = cp_infer_axis(c, axis->i, x->shape.rank, false, "axis", &ax);
        if (st != CP_OK)
            return st;
        s = x->shape;
        cp_infer_dim_dyn(&s.dims[ax]);
        if (count >= 0)
            cp_infer_dim_set(&s.dims[ax], count);
    }
    if (!axis && count >= 0)
        cp_infer_dim_set(&s.dims[0], count);
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

/* NonZero: [rank, count] int64; the count and the indices are known when
 * the input's values are (shape arithmetic on constants). */
enum cp_status cp_infer_nonzero(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    struct cp_shape s;
    int r = x->shape.rank;
    double v[CP_VALUE_MAX_ELEMS];
    int64_t n;
    s.rank = 2;
    cp_infer_dim_dyn(&s.dims[1]);
    if (r < 0) {
        cp_infer_dim_dyn(&s.dims[0]);
        return cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
    }
    cp_infer_dim_set(&s.dims[0], r == 0 ? 1 : r);
    bool known = cp_shape_is_static(&x->shape) &&
                 cp_infer_doubles(c, cp_infer_in_index(c, 0), v, CP_VALUE_MAX_ELEMS, &n) &&
                 n == cp_shape_numel(&x->shape);
    int64_t count = 0;
    if (cp_shape_is_static(&x->shape) && cp_infer_count_nonzero(c, cp_infer_in_index(c, 0), &count))
        cp_infer_dim_set(&s.dims[1], count);
    enum cp_status st = cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
    int64_t numel;
    if (st != CP_OK || !known || !cp_infer_out_small(c, 0, &numel))
        return st;
    int rr = r == 0 ? 1 : r;
    if (numel != rr * count)
        return CP_OK;
    struct cp_sval *e = cp_calloc((size_t)(numel ? numel : 1), sizeof *e);
    if (!e)
        return nomem(c);
    int64_t j = 0, coords[CP_MAX_RANK];
    for (int64_t k = 0; k < n; k++) {
        if (v[k] == 0.0)
            continue;
        if (r == 0) {
            coords[0] = 0;
        } else {
            cp_infer_unravel(&x->shape, k, coords);
        }
        for (int d = 0; d < rr; d++)
            e[d * count + j] = (struct cp_sval){coords[d], NULL, true};
        j++;
    }
    return cp_infer_set_vals(c, 0, e, numel);
}

/* OneHot: indices' shape with `depth` inserted at `axis`; the dtype is the
 * values'. */
enum cp_status cp_infer_onehot(struct cp_infer *c)
{
    const struct cp_tensor *ix = cp_infer_in(c, 0), *vals = cp_infer_in(c, 2);
    struct cp_shape s;
    int r = ix->shape.rank, ax;
    if (vals->shape.rank >= 0 && cp_shape_numel(&vals->shape) != 2 &&
        cp_shape_is_static(&vals->shape))
        return cp_infer_fail(c, "values '%s' must hold two elements (off, on)", vals->name);
    if (r < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, vals->dtype, &s);
    }
    if (r + 1 > CP_MAX_RANK)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "output rank exceeds %d", CP_MAX_RANK);
    enum cp_status st =
        cp_infer_axis(c, cp_node_attr_int(c->node, "axis", -1), r + 1, false, "axis", &ax);
    if (st != CP_OK)
        return st;
    double dv;
    int64_t n;
    s.rank = r + 1;
    for (int k = 0, j = 0; k <= r; k++)
        if (k != ax)
            s.dims[k] = ix->shape.dims[j++];
    cp_infer_dim_dyn(&s.dims[ax]);
    if (cp_infer_doubles(c, cp_infer_in_index(c, 1), &dv, 1, &n) && n == 1) {
        if (dv < 1)
            return cp_infer_fail(c, "depth must be >= 1, got %g", dv);
        cp_infer_dim_set(&s.dims[ax], (int64_t)dv);
    }
    return cp_infer_set_out(c, 0, vals->dtype, &s);
}

/* Tile: each dim times its repeat. */
enum cp_status cp_infer_tile(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *rp = cp_infer_in(c, 1);
    enum cp_status st = check_index(c, rp, "repeats");
    if (st != CP_OK)
        return st;
    struct cp_shape s;
    int r = x->shape.rank;
    if (r < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int64_t reps[CP_MAX_RANK], n;
    s = x->shape;
    if (!cp_infer_ints(c, cp_infer_in_index(c, 1), reps, CP_MAX_RANK, &n)) {
        if (rp->shape.rank == 1 && rp->shape.dims[0].value >= 0 && rp->shape.dims[0].value != r)
            return cp_infer_fail(c, "repeats '%s' has %lld entries for rank %d", rp->name,
                                 (long long)rp->shape.dims[0].value, r);
        cp_infer_shape_dyn(&s, r);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    if (n != r)
        return cp_infer_fail(c, "repeats '%s' has %lld entries for rank %d", rp->name, (long long)n,
                             r);
    for (int k = 0; k < r; k++) {
        if (reps[k] < 0)
            return cp_infer_fail(c, "repeat %lld for dim %d is negative", (long long)reps[k], k);
        int64_t d = x->shape.dims[k].value, v;
        if (d < 0)
            cp_infer_dim_dyn(&s.dims[k]);
        else if (__builtin_mul_overflow(d, reps[k], &v))
            return cp_infer_fail(c, "dim %d times its repeat overflows", k);
        else
            cp_infer_dim_set(&s.dims[k], v);
    }
    st = cp_infer_set_out(c, 0, x->dtype, &s);
    int64_t numel, nv;
    if (st != CP_OK || !cp_infer_out_small(c, 0, &numel))
        return st;
    const struct cp_sval *src = cp_infer_vals(c, cp_infer_in_index(c, 0), &nv);
    if (!src || !cp_shape_is_static(&x->shape) || nv != cp_shape_numel(&x->shape))
        return CP_OK;
    int64_t *map = cp_calloc((size_t)(numel ? numel : 1), sizeof *map);
    if (!map)
        return nomem(c);
    int64_t co[CP_MAX_RANK];
    for (int64_t k = 0; k < numel; k++) {
        cp_infer_unravel(&s, k, co);
        for (int d = 0; d < r; d++)
            co[d] %= x->shape.dims[d].value;
        map[k] = cp_infer_ravel(&x->shape, co);
    }
    st = cp_infer_copy_vals(c, 0, src, map, numel);
    free(map);
    return st;
}

/* Size: an int64 scalar, known when the shape is static. */
enum cp_status cp_infer_size(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    struct cp_shape s;
    cp_shape_set(&s, 0, NULL);
    enum cp_status st = cp_infer_set_out(c, 0, CP_DTYPE_I64, &s);
    int64_t numel = cp_shape_numel(&x->shape);
    if (st != CP_OK || numel < 0)
        return st;
    struct cp_sval *e = cp_calloc(1, sizeof *e);
    if (!e)
        return nomem(c);
    e[0] = (struct cp_sval){numel, NULL, true};
    return cp_infer_set_vals(c, 0, e, 1);
}

/* EyeLike: a 2-D tensor of the input's shape, of `dtype` (default: the
 * input's). */
enum cp_status cp_infer_eye_like(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    if (x->shape.rank >= 0 && x->shape.rank != 2)
        return cp_infer_fail(c, "input '%s' must be 2-D, got rank %d", x->name, x->shape.rank);
    enum cp_dtype dt = x->dtype;
    const struct cp_attr *a = cp_node_attr(c->node, "dtype");
    if (a) {
        dt = a->type == CP_ATTR_INT ? cp_dtype_from_onnx((int)a->i) : CP_DTYPE_UNDEFINED;
        if (dt == CP_DTYPE_UNDEFINED)
            return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "dtype %lld is not supported",
                                    (long long)a->i);
    }
    return cp_infer_set_out(c, 0, dt, &x->shape);
}

/* The loss functions: input [N, C, d...], target [N, d...], weight [C].
 * reduction "none" gives the target's shape, "sum" and "mean" a scalar. */
static enum cp_status loss_common(struct cp_infer *c, struct cp_shape *out)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *t = cp_infer_in(c, 1), *w = cp_infer_in(c, 2);
    enum cp_status st = check_index(c, t, "target");
    if (st != CP_OK)
        return st;
    if (!cp_dtype_is_float(x->dtype) && x->dtype != CP_DTYPE_UNDEFINED)
        return cp_infer_fail(c, "input '%s' must be a float tensor", x->name);
    if (w && w->dtype != CP_DTYPE_UNDEFINED && w->dtype != x->dtype)
        return cp_infer_fail(c, "weight '%s' must have the input's dtype", w->name);
    if (x->shape.rank >= 0 && x->shape.rank < 2)
        return cp_infer_fail(c, "input '%s' must have rank >= 2 ([N, C, ...])", x->name);
    if (x->shape.rank >= 0 && t->shape.rank >= 0) {
        if (t->shape.rank != x->shape.rank - 1)
            return cp_infer_fail(c, "target '%s' must have rank %d, got %d", t->name,
                                 x->shape.rank - 1, t->shape.rank);
        for (int k = 0; k < t->shape.rank; k++) {
            int64_t a = t->shape.dims[k].value, b = x->shape.dims[k ? k + 1 : 0].value;
            if (a >= 0 && b >= 0 && a != b)
                return cp_infer_fail(c, "target '%s' dim %d is %lld, input '%s' has %lld", t->name,
                                     k, (long long)a, x->name, (long long)b);
        }
    }
    const char *red = cp_node_attr_string(c->node, "reduction", "mean");
    if (strcmp(red, "none") == 0)
        *out = t->shape;
    else if (strcmp(red, "sum") == 0 || strcmp(red, "mean") == 0)
        cp_shape_set(out, 0, NULL);
    else
        return cp_infer_fail(c, "unknown reduction '%s'", red);
    return CP_OK;
}

enum cp_status cp_infer_nll_loss(struct cp_infer *c)
{
    struct cp_shape s;
    enum cp_status st = loss_common(c, &s);
    return st == CP_OK ? cp_infer_set_out(c, 0, cp_infer_in(c, 0)->dtype, &s) : st;
}

enum cp_status cp_infer_sce_loss(struct cp_infer *c)
{
    struct cp_shape s;
    const struct cp_tensor *x = cp_infer_in(c, 0);
    enum cp_status st = loss_common(c, &s);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 0, x->dtype, &s);
    return st == CP_OK ? cp_infer_set_out(c, 1, x->dtype, &x->shape) : st;
}

/* ReverseSequence: the output is the input. */
enum cp_status cp_infer_reverse_sequence(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0), *sl = cp_infer_in(c, 1);
    if (sl->dtype != CP_DTYPE_UNDEFINED && sl->dtype != CP_DTYPE_I64)
        return cp_infer_fail(c, "sequence_lens '%s' must be int64", sl->name);
    int64_t ba = cp_node_attr_int(c->node, "batch_axis", 1);
    int64_t ta = cp_node_attr_int(c->node, "time_axis", 0);
    if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta)
        return cp_infer_fail(c, "batch_axis %lld and time_axis %lld must be 0 and 1 in some order",
                             (long long)ba, (long long)ta);
    if (x->shape.rank >= 0 && x->shape.rank < 2)
        return cp_infer_fail(c, "input '%s' must have rank >= 2", x->name);
    return cp_infer_set_out(c, 0, x->dtype, &x->shape);
}

/* Det: [..., M, M] to [...]. */
enum cp_status cp_infer_det(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    struct cp_shape s;
    int r = x->shape.rank;
    if (r < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    if (r < 2)
        return cp_infer_fail(c, "input '%s' must have rank >= 2", x->name);
    int64_t m = x->shape.dims[r - 2].value, n = x->shape.dims[r - 1].value;
    if (m >= 0 && n >= 0 && m != n)
        return cp_infer_fail(c, "input '%s' is not square (%lld x %lld)", x->name, (long long)m,
                             (long long)n);
    s = x->shape;
    s.rank = r - 2;
    return cp_infer_set_out(c, 0, x->dtype, &s);
}

enum cp_status cp_infer_einsum(struct cp_infer *c)
{
    const struct cp_shape *shapes[CP_EINSUM_MAX_IN];
    int n = (int)c->node->n_inputs;
    struct cp_shape s;
    const struct cp_tensor *x0 = cp_infer_in(c, 0);
    if (n > CP_EINSUM_MAX_IN)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "%d inputs (at most %d supported)", n,
                                CP_EINSUM_MAX_IN);
    for (int i = 0; i < n; i++) {
        const struct cp_tensor *t = cp_infer_in(c, (size_t)i);
        if (!t)
            return cp_infer_fail(c, "input %d is missing", i);
        if (t->dtype != x0->dtype)
            return cp_infer_fail(c, "inputs differ in dtype");
        if (t->shape.rank < 0) {
            cp_shape_set_unknown(&s);
            return cp_infer_set_out(c, 0, x0->dtype, &s);
        }
        shapes[i] = &t->shape;
    }
    const char *eq = cp_node_attr_string(c->node, "equation", NULL);
    if (!eq)
        return cp_infer_fail(c, "missing required attribute 'equation'");
    struct cp_einsum *ep = cp_calloc(1, sizeof *ep);
    if (!ep)
        return nomem(c);
    char why[160];
    if (!cp_eval_einsum_plan(eq, n, shapes, ep, why, sizeof why)) {
        free(ep);
        return cp_infer_fail(c, "equation '%s': %s", eq, why);
    }
    s.rank = ep->out_rank;
    for (int q = 0; q < ep->out_rank; q++) {
        int64_t v = ep->size[ep->out_label[q]];
        if (v >= 0)
            cp_infer_dim_set(&s.dims[q], v);
        else
            cp_infer_dim_dyn(&s.dims[q]);
    }
    free(ep);
    return cp_infer_set_out(c, 0, x0->dtype, &s);
}

/* Unique: Y, indices, inverse_indices, counts; the unique count depends on
 * the data and stays dynamic. */
enum cp_status cp_infer_unique(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    const struct cp_attr *axis = cp_node_attr(c->node, "axis");
    struct cp_shape y, u, inv;
    int ax = -1;
    u.rank = 1;
    cp_infer_dim_dyn(&u.dims[0]);
    inv.rank = 1;
    cp_infer_dim_dyn(&inv.dims[0]);
    if (axis && x->shape.rank >= 0) {
        enum cp_status st = cp_infer_axis(c, axis->i, x->shape.rank, false, "axis", &ax);
        if (st != CP_OK)
            return st;
        y = x->shape;
        cp_infer_dim_dyn(&y.dims[ax]);
        inv.dims[0] = x->shape.dims[ax];
    } else if (axis) {
        cp_shape_set_unknown(&y);
    } else {
        y = u;
        int64_t ne = cp_shape_numel(&x->shape);
        if (ne >= 0)
            cp_infer_dim_set(&inv.dims[0], ne);
    }
    enum cp_status st = cp_infer_set_out(c, 0, x->dtype, &y);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 1, CP_DTYPE_I64, &u);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 2, CP_DTYPE_I64, &inv);
    if (st == CP_OK)
        st = cp_infer_set_out(c, 3, CP_DTYPE_I64, &u);
    return st;
}

/* ReduceProd (and the other reductions) of a known small integer tensor,
 * such as the product of a Shape's dims: the values propagate, so the
 * folder bakes them in. */
enum cp_status cp_infer_reduce_values(struct cp_infer *c)
{
    enum cp_status st = cp_infer_reduce(c);
    const struct cp_tensor *x = cp_infer_in(c, 0), *y = cp_infer_out(c, 0);
    int64_t numel, n;
    if (st != CP_OK || !cp_infer_out_small(c, 0, &numel) || !cp_shape_is_static(&x->shape) ||
        y->shape.rank < 0)
        return st;
    const struct cp_sval *src = cp_infer_vals(c, cp_infer_in_index(c, 0), &n);
    if (!src || n == 0 || n != cp_shape_numel(&x->shape))
        return CP_OK;
    /* Which axes were reduced: read back from the output shape, which
     * cp_infer_reduce derived (a kept dim of 1 where x has 1 is ambiguous,
     * but reducing a dim of 1 changes nothing). */
    int64_t axes[CP_MAX_RANK], na = 0;
    const struct cp_attr *aa = cp_node_attr(c->node, "axes");
    int32_t ai = cp_infer_in_index(c, 1);
    if (ai >= 0 && (c->opset >= 18 || !aa)) {
        if (!cp_infer_ints(c, ai, axes, CP_MAX_RANK, &na))
            return CP_OK;
    } else if (aa && aa->type == CP_ATTR_INTS && aa->n <= CP_MAX_RANK) {
        na = (int64_t)aa->n;
        memcpy(axes, aa->ints, (size_t)na * sizeof *axes);
    }
    int r = x->shape.rank;
    bool mask[CP_MAX_RANK];
    for (int k = 0; k < CP_MAX_RANK; k++)
        mask[k] = na == 0;
    if (na == 0 && cp_node_attr_int(c->node, "noop_with_empty_axes", 0))
        return CP_OK; /* the identity: cp_infer_reduce copied the shape only */
    for (int64_t k = 0; k < na; k++)
        mask[axes[k] < 0 ? axes[k] + r : axes[k]] = true;
    struct cp_shape kept = x->shape;
    for (int k = 0; k < r; k++)
        if (mask[k])
            kept.dims[k].value = 1;
    if (cp_shape_numel(&kept) != numel)
        return CP_OK;
    struct cp_sval *e = cp_calloc((size_t)(numel ? numel : 1), sizeof *e);
    if (!e)
        return nomem(c);
    enum cp_op op = c->node->op;
    for (int64_t k = 0; k < numel; k++)
        e[k] = (struct cp_sval){op == CP_OP_REDUCE_PROD ? 1 : 0, NULL, true};
    bool first_seen[CP_VALUE_MAX_ELEMS] = {false};
    int64_t co[CP_MAX_RANK];
    for (int64_t i = 0; i < n; i++) {
        cp_infer_unravel(&x->shape, i, co);
        for (int k = 0; k < r; k++)
            if (mask[k])
                co[k] = 0;
        int64_t o = cp_infer_ravel(&kept, co);
        struct cp_sval *a = &e[o];
        if (!src[i].known || !a->known) {
            a->known = false;
            continue;
        }
        int64_t v = src[i].v, res;
        bool ovf = false;
        switch (op) {
        case CP_OP_REDUCE_PROD:
            ovf = __builtin_mul_overflow(a->v, v, &res);
            break;
        case CP_OP_REDUCE_SUM:
            ovf = __builtin_add_overflow(a->v, v, &res);
            break;
        case CP_OP_REDUCE_MIN:
            res = !first_seen[o] || v < a->v ? v : a->v;
            break;
        default: /* ReduceMax */
            res = !first_seen[o] || v > a->v ? v : a->v;
            break;
        }
        first_seen[o] = true;
        if (ovf)
            a->known = false;
        else
            a->v = cp_infer_wrap(y->dtype, res);
    }
    return cp_infer_set_vals(c, 0, e, numel);
}
