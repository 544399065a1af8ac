/* What the data-movement ops compute, and the parameters they read from
 * their nodes (see op_eval.h): Transpose, Expand, Slice, Concat, Gather,
 * Range and ConstantOfShape. None looks at the elements it moves. */
#include "graph/op_eval_internal.h"

#include <string.h>

/* memmove that allows n == 0 with NULL pointers. */
static void copy_bytes(void *dst, const void *src, size_t n)
{
    if (n && dst != src)
        memmove(dst, src, n);
}

/* ---- parameters ------------------------------------------------------------------------ */

bool cp_eval_axis(int64_t axis, int rank, int *out)
{
    if (axis < -(int64_t)rank || axis >= rank)
        return false;
    *out = (int)(axis < 0 ? axis + rank : axis);
    return true;
}

bool cp_eval_transpose_perm(const struct cp_node *n, int rank, int64_t *perm)
{
    const struct cp_attr *a = cp_node_attr(n, "perm");
    if (a && (a->type != CP_ATTR_INTS || a->n != (size_t)rank))
        return false;
    bool seen[CP_MAX_RANK] = {false};
    for (int k = 0; k < rank; k++) {
        perm[k] = a ? a->ints[k] : rank - 1 - k;
        if (perm[k] < 0 || perm[k] >= rank || seen[perm[k]])
            return false;
        seen[perm[k]] = true;
    }
    return true;
}

bool cp_eval_broadcasts(const struct cp_shape *s, const struct cp_shape *to)
{
    if (s->rank > to->rank)
        return false;
    for (int k = 0; k < s->rank; k++) {
        int64_t d = s->dims[k].value, t = to->dims[to->rank - s->rank + k].value;
        if (d != 1 && d != t)
            return false;
    }
    return true;
}

/* The graph's opset, 17 when unset (as inference assumes). */
static int64_t opset_of(const struct cp_graph *g)
{
    int64_t v = cp_graph_opset(g);
    return v > 0 ? v : 17;
}

/* One of Slice's parameter lists: an attribute before opset 10, input
 * `input` from 10. */
struct slice_param {
    const int64_t *ints; /* attribute form */
    const void *data;    /* input form */
    enum cp_dtype dtype;
    int64_t len; /* -1: absent */
};

static int64_t slice_param_at(const struct slice_param *p, int64_t i)
{
    return p->ints ? p->ints[i] : cp_elem_load_i64(p->data, p->dtype, i);
}

static bool slice_param(const struct cp_graph *g, const struct cp_node *n,
                        const void *const *in_data, const char *attr, size_t input,
                        struct slice_param *p)
{
    memset(p, 0, sizeof *p);
    p->len = -1;
    if (opset_of(g) < 10) {
        const struct cp_attr *a = cp_node_attr(n, attr);
        if (a && a->type != CP_ATTR_INTS)
            return false;
        if (a) {
            p->ints = a->ints;
            p->len = (int64_t)a->n;
        }
        return true;
    }
    if (input >= n->n_inputs || n->inputs[input] < 0)
        return true;
    const struct cp_tensor *t = cp_graph_tensor(g, n->inputs[input]);
    if ((t->dtype != CP_DTYPE_I64 && t->dtype != CP_DTYPE_I32) || t->shape.rank > 1)
        return false;
    p->data = in_data ? in_data[input] : NULL;
    p->dtype = t->dtype;
    p->len = cp_eval_span_(&t->shape, 0, t->shape.rank);
    return true;
}

bool cp_eval_slice_plan(const struct cp_graph *g, const struct cp_node *n,
                        const void *const *in_data, const struct cp_shape *xs,
                        const struct cp_shape *ys, int64_t *first, int64_t *step)
{
    struct slice_param starts, ends, axes, steps;
    if (!slice_param(g, n, in_data, "starts", 1, &starts) ||
        !slice_param(g, n, in_data, "ends", 2, &ends) ||
        !slice_param(g, n, in_data, "axes", 3, &axes) ||
        !slice_param(g, n, in_data, "steps", 4, &steps))
        return false;
    int64_t cnt = starts.len;
    if (cnt < 0 || ends.len != cnt || (axes.len >= 0 && axes.len != cnt) ||
        (steps.len >= 0 && steps.len != cnt) || xs->rank != ys->rank)
        return false;
    if (!in_data && opset_of(g) >= 10)
        return true;
    bool seen[CP_MAX_RANK] = {false};
    for (int a = 0; a < xs->rank; a++) {
        first[a] = 0;
        step[a] = 1;
    }
    for (int64_t j = 0; j < cnt; j++) {
        int a;
        if (!cp_eval_axis(axes.len >= 0 ? slice_param_at(&axes, j) : j, xs->rank, &a) || seen[a])
            return false;
        seen[a] = true;
        int64_t dim = xs->dims[a].value;
        int64_t b = slice_param_at(&starts, j), e = slice_param_at(&ends, j);
        int64_t s = steps.len >= 0 ? slice_param_at(&steps, j) : 1;
        if (s == 0)
            return false;
        if (b < 0)
            b += dim;
        if (e < 0)
            e += dim;
        int64_t len;
        if (dim == 0) {
            len = 0;
        } else if (s > 0) {
            b = b < 0 ? 0 : b > dim ? dim : b;
            e = e < 0 ? 0 : e > dim ? dim : e;
            len = e > b ? (e - b - 1) / s + 1 : 0;
        } else {
            b = b < 0 ? 0 : b > dim - 1 ? dim - 1 : b;
            e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
            len = b > e ? (s == INT64_MIN ? 1 : (b - e - 1) / -s + 1) : 0;
        }
        first[a] = b;
        step[a] = s;
        if (len != ys->dims[a].value)
            return false;
    }
    for (int a = 0; a < xs->rank; a++)
        if (!seen[a] && xs->dims[a].value != ys->dims[a].value)
            return false;
    return true;
}

/* ---- the ops ------------------------------------------------------------------------- */

void cp_eval_transpose(const struct cp_tensor *x, const void *xd, const int64_t *perm,
                       const struct cp_tensor *y, void *yd)
{
    const struct cp_shape *ys = &y->shape;
    int64_t st[CP_MAX_RANK];
    cp_eval_strides_(&x->shape, st);
    struct cp_walk w;
    cp_walk_init(&w, ys, 2);
    cp_walk_bcast(&w, 0, ys);
    for (int a = 0; a < ys->rank; a++)
        w.strides[1][a] = st[perm[a]];
    cp_walk_finish(&w);
    cp_walk_copy(&w, yd, xd, cp_dtype_size(x->dtype));
}

void cp_eval_expand(const struct cp_tensor *x, const void *xd, const struct cp_tensor *y, void *yd)
{
    struct cp_walk w;
    cp_walk_init(&w, &y->shape, 2);
    cp_walk_bcast(&w, 0, &y->shape);
    cp_walk_bcast(&w, 1, &x->shape);
    cp_walk_finish(&w);
    cp_walk_copy(&w, yd, xd, cp_dtype_size(x->dtype));
}

void cp_eval_slice(const struct cp_tensor *x, const void *xd, const int64_t *first,
                   const int64_t *step, const struct cp_tensor *y, void *yd)
{
    const struct cp_shape *xs = &x->shape, *ys = &y->shape;
    if (cp_eval_span_(ys, 0, ys->rank) == 0)
        return;
    int64_t st[CP_MAX_RANK];
    cp_eval_strides_(xs, st);
    struct cp_walk w;
    cp_walk_init(&w, ys, 2);
    cp_walk_bcast(&w, 0, ys);
    for (int a = 0; a < xs->rank; a++) {
        w.strides[1][a] = st[a] * step[a];
        w.base[1] += st[a] * first[a];
    }
    cp_walk_finish(&w);
    cp_walk_copy(&w, yd, xd, cp_dtype_size(x->dtype));
}

void cp_eval_concat(size_t n, const struct cp_tensor *const *x, const void *const *xd, int axis,
                    const struct cp_tensor *y, void *yd)
{
    const struct cp_shape *ys = &y->shape;
    size_t es = cp_dtype_size(y->dtype);
    int64_t outer = cp_eval_span_(ys, 0, axis), inner = cp_eval_span_(ys, axis + 1, ys->rank);
    unsigned char *out = yd;
    size_t pos = 0;
    for (int64_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < n; i++) {
            size_t blk = (size_t)(x[i]->shape.dims[axis].value * inner) * es;
            copy_bytes(out + pos, (const unsigned char *)xd[i] + (size_t)o * blk, blk);
            pos += blk;
        }
    }
}

bool cp_eval_gather(const struct cp_tensor *x, const void *xd, const struct cp_tensor *idx,
                    const void *idxd, int axis, const struct cp_tensor *y, void *yd)
{
    const struct cp_shape *xs = &x->shape;
    (void)y;
    size_t es = cp_dtype_size(x->dtype);
    int64_t outer = cp_eval_span_(xs, 0, axis), dim = xs->dims[axis].value;
    size_t blk = (size_t)cp_eval_span_(xs, axis + 1, xs->rank) * es;
    int64_t ni = cp_eval_span_(&idx->shape, 0, idx->shape.rank);
    for (int64_t q = 0; q < ni; q++) {
        int64_t k = cp_elem_load_i64(idxd, idx->dtype, q);
        if (k < -dim || k >= dim)
            return false;
    }
    const unsigned char *src = xd;
    unsigned char *dst = yd;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t q = 0; q < ni; q++) {
            int64_t k = cp_elem_load_i64(idxd, idx->dtype, q);
            k = k < 0 ? k + dim : k;
            copy_bytes(dst + (size_t)(o * ni + q) * blk, src + (size_t)(o * dim + k) * blk, blk);
        }
    }
    return true;
}

void cp_eval_range(enum cp_dtype dt, const void *start, const void *delta, int64_t n, void *y)
{
    if (dt == CP_DTYPE_F32) {
        double s = cp_elem_load_f64(start, dt, 0), d = cp_elem_load_f64(delta, dt, 0);
        float *yf = y;
        for (int64_t i = 0; i < n; i++)
            yf[i] = (float)(s + (double)i * d);
        return;
    }
    uint64_t s = (uint64_t)cp_elem_load_i64(start, dt, 0);
    uint64_t d = (uint64_t)cp_elem_load_i64(delta, dt, 0);
    for (int64_t i = 0; i < n; i++)
        cp_eval_store_i64(y, dt, i, (int64_t)(s + (uint64_t)i * d));
}

void cp_eval_fill(size_t es, const void *value, int64_t n, void *y)
{
    unsigned char *out = y;
    for (int64_t i = 0; i < n; i++)
        cp_eval_copy_elem(out + (size_t)i * es, value, es);
}
