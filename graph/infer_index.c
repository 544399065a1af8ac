/* Inference for the ops that select or join along an axis: Concat, Split,
 * Slice and Gather, with value propagation (these carry the pieces of a
 * shape from Shape to Reshape in exported models). */
#include "graph/infer_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_SPLITS 256

static enum cp_status nomem(struct cp_infer *c)
{
    return cp_infer_fail_st(c, CP_ERR_NOMEM, "out of memory propagating values");
}

/* Values of input i when its shape is static and they are all there. */
static const struct cp_sval *input_values(struct cp_infer *c, size_t i)
{
    int64_t n;
    const struct cp_tensor *t = cp_infer_in(c, i);
    const struct cp_sval *e = t ? cp_infer_vals(c, cp_infer_in_index(c, i), &n) : NULL;
    return e && cp_shape_numel(&t->shape) == n ? e : NULL;
}

static int64_t vector_len(const struct cp_tensor *t)
{
    if (t->shape.rank == 1)
        return t->shape.dims[0].value;
    return t->shape.rank == 0 ? 1 : -1;
}

/* ---- Concat ------------------------------------------------------------------- */

static enum cp_status concat_values(struct cp_infer *c, int axis)
{
    int64_t numel;
    if (!cp_infer_out_small(c, 0, &numel))
        return CP_OK;
    const struct cp_shape *os = &cp_infer_out(c, 0)->shape;
    int64_t outer = 1, inner = 1;
    for (int k = 0; k < axis; k++)
        outer *= os->dims[k].value;
    for (int k = axis + 1; k < os->rank; k++)
        inner *= os->dims[k].value;
    size_t n_in = c->node->n_inputs;
    for (size_t i = 0; i < n_in; i++)
        if (!input_values(c, i))
            return CP_OK;
    struct cp_sval *e = cp_calloc((size_t)numel, sizeof *e);
    if (!e)
        return nomem(c);
    int64_t pos = 0;
    for (int64_t o = 0; o < outer; o++) {
        for (size_t i = 0; i < n_in; i++) {
            const struct cp_tensor *t = cp_infer_in(c, i);
            int64_t blk = t->shape.dims[axis].value * inner;
            const struct cp_sval *src = input_values(c, i);
            for (int64_t k = 0; k < blk && pos < numel; k++)
                e[pos++] = src[o * blk + k];
        }
    }
    return cp_infer_set_vals(c, 0, e, numel);
}

enum cp_status cp_infer_concat(struct cp_infer *c)
{
    const struct cp_node *n = c->node;
    const struct cp_attr *aa = cp_node_attr(n, "axis");
    if (!aa || aa->type != CP_ATTR_INT)
        return cp_infer_fail(c, "missing required attribute 'axis'");
    const struct cp_tensor *first = NULL, *in0 = cp_infer_in(c, 0);
    for (size_t i = 0; i < n->n_inputs; i++) {
        const struct cp_tensor *t = cp_infer_in(c, i);
        if (!t)
            return cp_infer_fail(c, "input %zu is missing", i);
        if (t->dtype && in0->dtype && t->dtype != in0->dtype)
            return cp_infer_fail(c, "inputs '%s' and '%s' have different types: %s vs %s",
                                 in0->name, t->name, cp_dtype_name(in0->dtype),
                                 cp_dtype_name(t->dtype));
        if (!first && t->shape.rank >= 0)
            first = t;
    }
    struct cp_shape s;
    if (!first) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, in0->dtype, &s);
    }
    int r = first->shape.rank, axis;
    if (r == 0)
        return cp_infer_fail(c, "cannot concatenate scalar '%s'", first->name);
    enum cp_status st = cp_infer_axis(c, aa->i, r, false, "axis", &axis);
    if (st != CP_OK)
        return st;
    s = first->shape;
    const char *owner[CP_MAX_RANK];
    for (int k = 0; k < r; k++)
        owner[k] = first->name;
    bool axis_dyn = false;
    int64_t sum = 0;
    for (size_t i = 0; i < n->n_inputs; i++) {
        const struct cp_tensor *t = cp_infer_in(c, i);
        if (t->shape.rank < 0) {
            axis_dyn = true;
            continue;
        }
        if (t->shape.rank != r)
            return cp_infer_fail(c, "input '%s' has rank %d but '%s' has rank %d", t->name,
                                 t->shape.rank, first->name, r);
        for (int k = 0; k < r; k++) {
            const struct cp_dim *td = &t->shape.dims[k];
            struct cp_dim *sd = &s.dims[k];
            if (k == axis) {
                if (td->value < 0)
                    axis_dyn = true;
                else if (__builtin_add_overflow(sum, td->value, &sum))
                    axis_dyn = true;
                continue;
            }
            if (td->value >= 0 && sd->value >= 0 && td->value != sd->value)
                return cp_infer_fail(c,
                                     "inputs '%s' and '%s' differ in dimension %d: %lld vs "
                                     "%lld (only axis %d may differ)",
                                     owner[k], t->name, k, (long long)sd->value,
                                     (long long)td->value, axis);
            if (sd->value < 0 && td->value >= 0) {
                *sd = *td;
                owner[k] = t->name;
            } else if (sd->value < 0 && !sd->sym && td->sym) {
                sd->sym = td->sym;
            }
        }
    }
    if (n->n_inputs == 1)
        s.dims[axis] = first->shape.dims[axis];
    else if (axis_dyn)
        cp_infer_dim_dyn(&s.dims[axis]);
    else
        cp_infer_dim_set(&s.dims[axis], sum);
    if ((st = cp_infer_set_out(c, 0, in0->dtype, &s)) != CP_OK)
        return st;
    return concat_values(c, axis);
}

/* ---- Split -------------------------------------------------------------------- */

/* Values of output `out` = input 0 from `offset` along `axis`. */
static enum cp_status split_values(struct cp_infer *c, size_t out, int axis, int64_t offset)
{
    int64_t numel;
    const struct cp_sval *e = input_values(c, 0);
    if (!e || !cp_infer_out_small(c, out, &numel))
        return CP_OK;
    const struct cp_shape *xs = &cp_infer_in(c, 0)->shape;
    const struct cp_shape *os = &cp_infer_out(c, out)->shape;
    int64_t map[CP_VALUE_MAX_ELEMS], co[CP_MAX_RANK];
    for (int64_t k = 0; k < numel; k++) {
        cp_infer_unravel(os, k, co);
        co[axis] += offset;
        map[k] = cp_infer_ravel(xs, co);
    }
    return cp_infer_copy_vals(c, out, e, map, numel);
}

/* Split sizes: the 'split' attribute before opset 13, input 1 from 13
 * (either form accepted when the expected one is absent). */
static enum cp_status split_sizes(struct cp_infer *c, int64_t *sp, size_t *n, bool *present,
                                  bool *known)
{
    bool attr;
    enum cp_status st = cp_infer_attr_ints(c, "split", sp, MAX_SPLITS, n, &attr);
    if (st != CP_OK)
        return st;
    int32_t ti = cp_infer_in_index(c, 1);
    *present = attr;
    *known = attr;
    if (ti >= 0 && (c->opset >= 13 || !attr)) {
        int64_t len;
        *present = true;
        *known = cp_infer_ints(c, ti, sp, MAX_SPLITS, &len);
        *n = *known ? (size_t)len : 0;
    }
    return CP_OK;
}

enum cp_status cp_infer_split(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    size_t n_out = c->node->n_outputs;
    int r = x->shape.rank, axis;
    struct cp_shape s;
    enum cp_status st;
    if (r < 0) {
        cp_shape_set_unknown(&s);
        for (size_t i = 0; i < n_out; i++)
            if ((st = cp_infer_set_out(c, i, x->dtype, &s)) != CP_OK)
                return st;
        return CP_OK;
    }
    st = cp_infer_axis(c, cp_node_attr_int(c->node, "axis", 0), r, false, "axis", &axis);
    if (st != CP_OK)
        return st;
    int64_t sp[MAX_SPLITS];
    size_t nsp;
    bool present, known;
    if ((st = split_sizes(c, sp, &nsp, &present, &known)) != CP_OK)
        return st;
    int64_t dim = x->shape.dims[axis].value;
    if (present && known) {
        if (nsp != n_out)
            return cp_infer_fail(c, "split has %zu sizes for %zu outputs", nsp, n_out);
        int64_t sum = 0;
        for (size_t i = 0; i < nsp; i++) {
            if (sp[i] < 0)
                return cp_infer_fail(c, "split size %lld is negative", (long long)sp[i]);
            if (__builtin_add_overflow(sum, sp[i], &sum))
                return cp_infer_fail(c, "split sizes overflow");
        }
        if (dim >= 0 && sum != dim)
            return cp_infer_fail(c, "split sizes sum to %lld but axis %d of '%s' is %lld",
                                 (long long)sum, axis, x->name, (long long)dim);
    } else if (!present) {
        /* Equal parts; from opset 18 the last may be smaller. */
        int64_t parts = (int64_t)n_out;
        int64_t chunk = dim >= 0 ? (dim + parts - 1) / parts : -1;
        if (dim >= 0 && dim % parts != 0 && c->opset < 18)
            return cp_infer_fail(c, "axis %d of '%s' (%lld) does not split into %zu equal parts",
                                 axis, x->name, (long long)dim, n_out);
        for (size_t i = 0; i < n_out; i++) {
            int64_t left = dim - chunk * (int64_t)i;
            sp[i] = dim < 0 ? -1 : left < chunk ? (left > 0 ? left : 0) : chunk;
        }
        known = dim >= 0;
    }
    int64_t offset = 0;
    for (size_t i = 0; i < n_out; i++) {
        s = x->shape;
        if (known)
            cp_infer_dim_set(&s.dims[axis], sp[i]);
        else if (!(n_out == 1 && !present))
            cp_infer_dim_dyn(&s.dims[axis]);
        if ((st = cp_infer_set_out(c, i, x->dtype, &s)) != CP_OK)
            return st;
        if (known && (st = split_values(c, i, axis, offset)) != CP_OK)
            return st;
        offset += known ? sp[i] : 0;
    }
    return CP_OK;
}

/* ---- Slice ---------------------------------------------------------------------- */

/* Length of a slice of a static dim, with ONNX clamping. OUT: *first. */
static int64_t slice_len(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first)
{
    if (start < 0)
        start += dim;
    if (end < 0)
        end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        *first = start;
        return end > start ? (end - start - 1) / step + 1 : 0;
    }
    start = start < 0 ? 0 : start > dim - 1 ? dim - 1 : start;
    end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
    *first = start;
    if (start <= end)
        return 0;
    if (step == INT64_MIN)
        return 1;
    return (start - end - 1) / -step + 1;
}

/* One of Slice's parameter lists: an attribute (before opset 10) or an input.
 * e is NULL when the values are unknown; *len is -1 when even the length is. */
struct slice_arg {
    const struct cp_sval *e;
    int64_t len;
    bool present;
    struct cp_sval buf[CP_MAX_RANK];
};

static enum cp_status slice_arg(struct cp_infer *c, const char *attr, size_t input,
                                struct slice_arg *a)
{
    a->e = NULL;
    a->len = -1;
    a->present = false;
    if (c->opset < 10) {
        int64_t v[CP_MAX_RANK];
        size_t n;
        enum cp_status st = cp_infer_attr_ints(c, attr, v, CP_MAX_RANK, &n, &a->present);
        if (st != CP_OK || !a->present)
            return st;
        for (size_t k = 0; k < n; k++)
            a->buf[k] = (struct cp_sval){v[k], NULL, true};
        a->e = a->buf;
        a->len = (int64_t)n;
        return CP_OK;
    }
    int32_t ti = cp_infer_in_index(c, input);
    if (ti < 0)
        return CP_OK;
    a->present = true;
    a->e = cp_infer_vals(c, ti, &a->len);
    if (!a->e)
        a->len = vector_len(cp_graph_tensor(c->g, ti));
    if (a->len > CP_MAX_RANK)
        return cp_infer_fail(c, "input %zu has %lld entries; at most %d expected", input,
                             (long long)a->len, CP_MAX_RANK);
    return CP_OK;
}

/* Exported models slice "to the end" with INT64_MAX or INT32_MAX. */
#define SLICE_TO_END INT32_MAX

enum cp_status cp_infer_slice(struct cp_infer *c)
{
    const struct cp_tensor *x = cp_infer_in(c, 0);
    if (c->opset >= 10 && (cp_infer_in_index(c, 1) < 0 || cp_infer_in_index(c, 2) < 0))
        return cp_infer_fail(c, "needs inputs 'starts' and 'ends'");
    struct slice_arg starts, ends, axes, steps;
    enum cp_status st;
    if ((st = slice_arg(c, "starts", 1, &starts)) != CP_OK ||
        (st = slice_arg(c, "ends", 2, &ends)) != CP_OK ||
        (st = slice_arg(c, "axes", 3, &axes)) != CP_OK ||
        (st = slice_arg(c, "steps", 4, &steps)) != CP_OK)
        return st;
    if (c->opset < 10 && (!starts.present || !ends.present))
        return cp_infer_fail(c, "missing required attributes 'starts' and 'ends'");
    int64_t n = starts.len;
    const struct slice_arg *others[] = {&ends, &axes, &steps};
    for (size_t i = 0; i < 3; i++) {
        const struct slice_arg *o = others[i];
        if (o->present && o->len >= 0 && n >= 0 && o->len != n)
            return cp_infer_fail(c, "starts has %lld entries but %s has %lld", (long long)n,
                                 i == 0   ? "ends"
                                 : i == 1 ? "axes"
                                          : "steps",
                                 (long long)o->len);
        if (n < 0 && o->present)
            n = o->len;
    }
    int r = x->shape.rank;
    struct cp_shape s = x->shape;
    if (r < 0)
        return cp_infer_set_out(c, 0, x->dtype, &s);
    bool axes_known = !axes.present || axes.e;
    for (int64_t j = 0; axes.e && j < axes.len; j++)
        axes_known = axes_known && axes.e[j].known;
    if (n < 0 || !axes_known) {
        /* Which axes are sliced is unknown. */
        cp_infer_shape_dyn(&s, r);
        return cp_infer_set_out(c, 0, x->dtype, &s);
    }
    int64_t first[CP_MAX_RANK] = {0}, stride[CP_MAX_RANK];
    bool sliced[CP_MAX_RANK] = {false}, exact = true;
    for (int k = 0; k < r; k++)
        stride[k] = 1;
    for (int64_t j = 0; j < n; j++) {
        int a;
        int64_t av = axes.present ? axes.e[j].v : j;
        if ((st = cp_infer_axis(c, av, r, false, "axis", &a)) != CP_OK)
            return st;
        if (sliced[a])
            return cp_infer_fail(c, "axis %lld is listed twice", (long long)av);
        sliced[a] = true;
        struct cp_sval b = starts.e ? starts.e[j] : (struct cp_sval){0, NULL, false};
        struct cp_sval e = ends.e ? ends.e[j] : (struct cp_sval){0, NULL, false};
        struct cp_sval stp = !steps.present ? (struct cp_sval){1, NULL, true}
                             : steps.e      ? steps.e[j]
                                            : (struct cp_sval){0, NULL, false};
        if (stp.known && stp.v == 0)
            return cp_infer_fail(c, "step for axis %d is 0", a);
        struct cp_dim *dm = &s.dims[a];
        if (!b.known || !e.known || !stp.known) {
            cp_infer_dim_dyn(dm);
            exact = false;
        } else if (dm->value >= 0) {
            cp_infer_dim_set(dm, slice_len(dm->value, b.v, e.v, stp.v, &first[a]));
            stride[a] = stp.v;
        } else if (!(b.v == 0 && stp.v == 1 && e.v >= SLICE_TO_END)) {
            cp_infer_dim_dyn(dm); /* else the whole dynamic dim: keep it */
            exact = false;
        }
    }
    if ((st = cp_infer_set_out(c, 0, x->dtype, &s)) != CP_OK)
        return st;
    int64_t numel;
    const struct cp_sval *src = input_values(c, 0);
    if (!exact || !src || !cp_infer_out_small(c, 0, &numel))
        return CP_OK;
    const struct cp_shape *os = &cp_infer_out(c, 0)->shape;
    int64_t map[CP_VALUE_MAX_ELEMS], co[CP_MAX_RANK];
    for (int64_t k = 0; k < numel; k++) {
        cp_infer_unravel(os, k, co);
        for (int a = 0; a < r; a++)
            co[a] = first[a] + co[a] * stride[a];
        map[k] = cp_infer_ravel(&x->shape, co);
    }
    return cp_infer_copy_vals(c, 0, src, map, numel);
}

/* ---- Gather ---------------------------------------------------------------------- */

enum cp_status cp_infer_gather(struct cp_infer *c)
{
    const struct cp_tensor *d = cp_infer_in(c, 0), *ix = cp_infer_in(c, 1);
    int rd = d->shape.rank, ri = ix->shape.rank;
    struct cp_shape s;
    if (rd == 0)
        return cp_infer_fail(c, "cannot gather from scalar '%s'", d->name);
    if (rd < 0 || ri < 0) {
        cp_shape_set_unknown(&s);
        return cp_infer_set_out(c, 0, d->dtype, &s);
    }
    int axis;
    enum cp_status st =
        cp_infer_axis(c, cp_node_attr_int(c->node, "axis", 0), rd, false, "axis", &axis);
    if (st != CP_OK)
        return st;
    if (rd - 1 + ri > CP_MAX_RANK)
        return cp_infer_fail_st(c, CP_ERR_UNSUPPORTED, "output rank %d exceeds %d", rd - 1 + ri,
                                CP_MAX_RANK);
    s.rank = 0;
    for (int k = 0; k < axis; k++)
        s.dims[s.rank++] = d->shape.dims[k];
    for (int k = 0; k < ri; k++)
        s.dims[s.rank++] = ix->shape.dims[k];
    for (int k = axis + 1; k < rd; k++)
        s.dims[s.rank++] = d->shape.dims[k];

    /* Indices may be negative (counted from the end); out of range is an
     * error when both are known. */
    int64_t dim = d->shape.dims[axis].value, ni;
    const struct cp_sval *iv = input_values(c, 1);
    ni = iv ? cp_shape_numel(&ix->shape) : 0;
    for (int64_t k = 0; k < ni && dim >= 0; k++)
        if (iv[k].known && (iv[k].v < -dim || iv[k].v >= dim))
            return cp_infer_fail(c,
                                 "index %lld in '%s' is out of range for axis %d of '%s' "
                                 "(size %lld)",
                                 (long long)iv[k].v, ix->name, axis, d->name, (long long)dim);
    if ((st = cp_infer_set_out(c, 0, d->dtype, &s)) != CP_OK)
        return st;
    int64_t numel;
    const struct cp_sval *dv = input_values(c, 0);
    if (!dv || !iv || dim < 0 || !cp_infer_out_small(c, 0, &numel))
        return CP_OK;
    const struct cp_shape *os = &cp_infer_out(c, 0)->shape;
    struct cp_sval *e = cp_calloc((size_t)numel, sizeof *e);
    if (!e)
        return nomem(c);
    int64_t co[CP_MAX_RANK], dc[CP_MAX_RANK];
    for (int64_t k = 0; k < numel; k++) {
        cp_infer_unravel(os, k, co);
        int64_t flat = 0;
        for (int j = 0; j < ri; j++)
            flat = flat * ix->shape.dims[j].value + co[axis + j];
        struct cp_sval idx = iv[flat];
        if (!idx.known)
            continue; /* element stays unknown */
        for (int j = 0; j < axis; j++)
            dc[j] = co[j];
        dc[axis] = idx.v < 0 ? idx.v + dim : idx.v;
        for (int j = axis + 1; j < rd; j++)
            dc[j] = co[j - 1 + ri];
        e[k] = dv[cp_infer_ravel(&d->shape, dc)];
    }
    return cp_infer_set_vals(c, 0, e, numel);
}
