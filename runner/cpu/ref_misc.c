/* Reference kernels for the ops that make data from a description:
 * ConstantOfShape and Range (graph/op_eval.h's definitions, which the
 * constant folder uses too), and Pad (constant, reflect, edge and wrap). */
#include "runner/cpu/ref_util.h"
#include "runner/cpu/ref_shared.h"

#include <string.h>

/* ---- ConstantOfShape ------------------------------------------------------------ */

/* The fill value: the `value` tensor attribute's one element, else f32
 * zero. */
static const struct cp_tensor *fill_tensor(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_attr *a = cp_node_attr(n, "value");
    if (!a || a->type != CP_ATTR_TENSOR)
        return NULL;
    return cp_graph_tensor(g, a->tensor);
}

static bool const_of_shape_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    const struct cp_attr *a = cp_node_attr(n, "value");
    if (!a)
        return y->dtype == CP_DTYPE_F32;
    const struct cp_tensor *v = fill_tensor(g, n);
    return v && v->data && v->dtype == y->dtype && cp_dtype_size(v->dtype) > 0 &&
           v->nbytes >= cp_dtype_size(v->dtype);
}

static enum cp_status const_of_shape_run(struct cp_kexec *k)
{
    const struct cp_tensor *v = fill_tensor(k->g, k->node);
    unsigned char zero[8] = {0};
    cp_eval_fill(cp_dtype_size(k->out[0]->dtype), v ? v->data : zero,
                 cp_ref_numel(&k->out[0]->shape), k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_constant_of_shape, CP_OP_CONSTANT_OF_SHAPE, const_of_shape_supports, NULL,
              const_of_shape_run);

/* ---- Range ------------------------------------------------------------------------ */

static bool range_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_inputs != 3 || n->n_outputs != 1)
        return false;
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    if (y->dtype != CP_DTYPE_F32 && y->dtype != CP_DTYPE_I32 && y->dtype != CP_DTYPE_I64)
        return false;
    for (size_t i = 0; i < 3; i++) {
        const struct cp_tensor *t = cp_ref_in(g, n, i);
        if (!t || t->dtype != y->dtype || cp_ref_numel(&t->shape) != 1)
            return false;
    }
    return y->shape.rank == 1;
}

/* output[i] = start + i * delta; the count is the output's (inferred) size. */
static enum cp_status range_run(struct cp_kexec *k)
{
    cp_eval_range(k->out[0]->dtype, k->in_data[0], k->in_data[2], cp_ref_numel(&k->out[0]->shape),
                  k->out_data[0]);
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_range, CP_OP_RANGE, range_supports, NULL, range_run);

/* ---- Pad ------------------------------------------------------------------------------- */

enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP, PAD_BAD };

static enum pad_mode pad_mode(const struct cp_node *n)
{
    const char *m = cp_node_attr_string(n, "mode", "constant");
    if (strcmp(m, "constant") == 0)
        return PAD_CONSTANT;
    if (strcmp(m, "reflect") == 0)
        return PAD_REFLECT;
    if (strcmp(m, "edge") == 0)
        return PAD_EDGE;
    if (strcmp(m, "wrap") == 0)
        return PAD_WRAP;
    return PAD_BAD;
}

/* Begin padding per axis (0 for axes not padded). Pads come from the
 * `pads` attribute before opset 11, from input 1 after; from opset 18 an
 * optional axes input says which axes they are for. in_data NULL: check the
 * form only. */
static bool pad_begins(const struct cp_graph *g, const struct cp_node *n, void *const *in_data,
                       const struct cp_shape *xs, const struct cp_shape *ys, int64_t *begin)
{
    int r = xs->rank;
    int axes[CP_MAX_RANK];
    int n_axes = r;
    for (int a = 0; a < r; a++) {
        axes[a] = a;
        begin[a] = 0;
    }
    const struct cp_tensor *ta = cp_ref_opset(g) >= 18 ? cp_ref_in(g, n, 3) : NULL;
    if (ta) {
        if ((ta->dtype != CP_DTYPE_I64 && ta->dtype != CP_DTYPE_I32) ||
            cp_ref_numel(&ta->shape) > r)
            return false;
        n_axes = (int)cp_ref_numel(&ta->shape);
        for (int j = 0; in_data && j < n_axes; j++)
            if (!cp_eval_axis(cp_elem_load_i64(in_data[3], ta->dtype, j), r, &axes[j]))
                return false;
    }
    const int64_t *attr = NULL;
    const struct cp_tensor *tp = NULL;
    int64_t np;
    if (cp_ref_opset(g) < 11) {
        const struct cp_attr *a = cp_node_attr(n, "pads");
        if (!a || a->type != CP_ATTR_INTS)
            return false;
        attr = a->ints;
        np = (int64_t)a->n;
    } else {
        tp = cp_ref_in(g, n, 1);
        if (!tp || (tp->dtype != CP_DTYPE_I64 && tp->dtype != CP_DTYPE_I32))
            return false;
        np = cp_ref_numel(&tp->shape);
    }
    if (np != 2 * (int64_t)n_axes)
        return false;
    if (!in_data && tp)
        return true;
    bool seen[CP_MAX_RANK] = {false};
    for (int j = 0; j < n_axes; j++) {
        int a = axes[j];
        if (seen[a])
            return false;
        seen[a] = true;
        int64_t b = attr ? attr[j] : cp_elem_load_i64(in_data[1], tp->dtype, j);
        int64_t e = attr ? attr[j + n_axes] : cp_elem_load_i64(in_data[1], tp->dtype, j + n_axes);
        if (xs->dims[a].value + b + e != ys->dims[a].value)
            return false;
        begin[a] = b;
    }
    for (int a = 0; a < r; a++)
        if (!seen[a] && xs->dims[a].value != ys->dims[a].value)
            return false;
    return true;
}

bool cp_pad_supported(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1 || pad_mode(n) == PAD_BAD)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!x || y->dtype != x->dtype || y->shape.rank != x->shape.rank)
        return false;
    const struct cp_tensor *cv = cp_ref_opset(g) >= 11 ? cp_ref_in(g, n, 2) : NULL;
    if (cv && cp_ref_numel(&cv->shape) > 0 && cv->dtype != x->dtype)
        return false;
    int64_t begin[CP_MAX_RANK];
    return pad_begins(g, n, NULL, &x->shape, &y->shape, begin);
}

/* Source coordinate of output coordinate o along an axis of size d, or -1
 * for the constant. */
static int64_t pad_source(enum pad_mode mode, int64_t o, int64_t begin, int64_t d)
{
    int64_t c = o - begin;
    if (c >= 0 && c < d)
        return c;
    switch (mode) {
    case PAD_EDGE:
        return c < 0 ? 0 : d - 1;
    case PAD_REFLECT: {
        if (d == 1)
            return 0;
        int64_t period = 2 * (d - 1);
        c %= period;
        c = c < 0 ? c + period : c;
        return c < d ? c : period - c;
    }
    case PAD_WRAP:
        c %= d;
        return c < 0 ? c + d : c;
    default:
        return -1;
    }
}

bool cp_pad_geometry(const struct cp_kexec *k, int64_t *begin, unsigned char *fill, bool *constant)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    enum cp_dtype dt = k->in[0]->dtype;
    if (!pad_begins(k->g, k->node, k->in_data, xs, ys, begin))
        return false;
    *constant = pad_mode(k->node) == PAD_CONSTANT;
    memset(fill, 0, 8);
    if (cp_ref_opset(k->g) < 11) {
        cp_eval_store_f64(fill, dt, 0, cp_node_attr_float(k->node, "value", 0.0f));
    } else if (k->node->n_inputs > 2 && k->in[2] && cp_ref_numel(&k->in[2]->shape) > 0) {
        memcpy(fill, k->in_data[2], cp_dtype_size(dt));
    }
    return true;
}

static enum cp_status pad_run(struct cp_kexec *k)
{
    const struct cp_shape *xs = &k->in[0]->shape, *ys = &k->out[0]->shape;
    enum cp_dtype dt = k->in[0]->dtype;
    size_t es = cp_dtype_size(dt);
    enum pad_mode mode = pad_mode(k->node);
    int64_t begin[CP_MAX_RANK], xst[CP_MAX_RANK];
    unsigned char fill[8];
    bool constant;
    if (!cp_pad_geometry(k, begin, fill, &constant))
        return CP_ERR_INTERNAL;
    int64_t ny = cp_ref_numel(ys);
    if (ny == 0)
        return CP_OK;
    if (mode != PAD_CONSTANT && cp_ref_numel(xs) == 0)
        return CP_ERR_INTERNAL; /* nothing to reflect or repeat */
    cp_ref_strides(xs, xst);
    int r = ys->rank;
    int last = r - 1;
    int64_t inner = r > 0 ? ys->dims[last].value : 1;
    int64_t rows = ny / inner;
    int64_t oc[CP_MAX_RANK] = {0};
    const unsigned char *x = k->in_data[0];
    unsigned char *y = k->out_data[0];
    for (int64_t row = 0; row < rows; row++) {
        /* Source offset of the row from the outer axes, or -1: the whole row
         * is the constant. */
        int64_t base = 0;
        for (int a = 0; a < last && base >= 0; a++) {
            int64_t c = pad_source(mode, oc[a], begin[a], xs->dims[a].value);
            base = c < 0 ? -1 : base + c * xst[a];
        }
        unsigned char *yrow = y + (size_t)(row * inner) * es;
        for (int64_t j = 0; j < inner; j++) {
            int64_t c = base < 0 ? -1
                        : r > 0  ? pad_source(mode, j, begin[last], xs->dims[last].value)
                                 : 0;
            const unsigned char *src = c < 0 ? fill : x + (size_t)(base + c) * es;
            cp_eval_copy_elem(yrow + (size_t)j * es, src, es);
        }
        for (int a = last - 1; a >= 0; a--) {
            if (++oc[a] < ys->dims[a].value)
                break;
            oc[a] = 0;
        }
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_pad, CP_OP_PAD, cp_pad_supported, NULL, pad_run);
