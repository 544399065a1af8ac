/* Reference kernels of the reduce_index family, part 1: the reductions
 * (any dtype; ReduceMean/Sum/Max of the dtypes ref_reduce.c leaves out come
 * here too), LogSoftmax and Hardmax, ArgMax/ArgMin, TopK, CumSum and the
 * two loss functions. Floats compute in double, integers in int64. */
#include "runner/cpu/ref_reduce_index.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- shared -------------------------------------------------------------------------- */

bool cp_ri_is_index(enum cp_dtype dt)
{
    return dt == CP_DTYPE_I64 || dt == CP_DTYPE_I32;
}

bool cp_ri_is_int(enum cp_dtype dt)
{
    return dt != CP_DTYPE_UNDEFINED && !cp_dtype_is_float(dt);
}

void cp_ri_int_range(enum cp_dtype dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case CP_DTYPE_BOOL:
        *lo = 0, *hi = 1;
        break;
    case CP_DTYPE_I8:
        *lo = INT8_MIN, *hi = INT8_MAX;
        break;
    case CP_DTYPE_U8:
        *lo = 0, *hi = UINT8_MAX;
        break;
    case CP_DTYPE_I16:
        *lo = INT16_MIN, *hi = INT16_MAX;
        break;
    case CP_DTYPE_U16:
        *lo = 0, *hi = UINT16_MAX;
        break;
    case CP_DTYPE_I32:
        *lo = INT32_MIN, *hi = INT32_MAX;
        break;
    case CP_DTYPE_U32:
        *lo = 0, *hi = UINT32_MAX;
        break;
    case CP_DTYPE_U64:
        *lo = 0, *hi = INT64_MAX;
        break;
    default:
        *lo = INT64_MIN, *hi = INT64_MAX;
        break;
    }
}

bool cp_ri_axis_geometry(const struct cp_shape *s, int axis, int64_t *outer, int64_t *len,
                         int64_t *inner)
{
    if (axis < 0 || axis >= s->rank)
        return false;
    *outer = cp_ref_span(s, 0, axis);
    *len = s->dims[axis].value;
    *inner = cp_ref_span(s, axis + 1, s->rank);
    return true;
}

/* ---- reductions ------------------------------------------------------------------------ */

bool cp_ri_reduce_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    if (!x || y->dtype != x->dtype)
        return false;
    if (x->dtype == CP_DTYPE_BOOL && n->op != CP_OP_REDUCE_MAX && n->op != CP_OP_REDUCE_MIN)
        return false;
    if (cp_eval_reduce_axes_from_input(g, n) && !cp_ri_is_index(cp_ref_in(g, n, 1)->dtype))
        return false;
    bool mask[CP_MAX_RANK], noop;
    return cp_eval_reduce_mask(g, n, NULL, x->shape.rank, mask, &noop);
}

enum cp_status cp_ri_reduce_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = (size_t)cp_ref_numel(&k->out[0]->shape) * 8 + 8;
    return CP_OK;
}

/* Whether the op accumulates integers exactly in int64. */
static bool int_accumulates(enum cp_op op, enum cp_dtype dt)
{
    return cp_ri_is_int(dt) && op != CP_OP_REDUCE_L2 && op != CP_OP_REDUCE_LOG_SUM &&
           op != CP_OP_REDUCE_LOG_SUM_EXP;
}

enum cp_status cp_ri_reduce_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *y = k->out[0];
    enum cp_op op = k->node->op;
    int rank = x->shape.rank;
    bool mask[CP_MAX_RANK], noop;
    const void *axes_data = k->node->n_inputs > 1 ? k->in_data[1] : NULL;
    if (!cp_eval_reduce_mask(k->g, k->node, axes_data, rank, mask, &noop))
        return CP_ERR_INTERNAL;
    int64_t nx = cp_ref_numel(&x->shape), ny = cp_ref_numel(&y->shape);
    if (noop) {
        if (nx != ny)
            return CP_ERR_INTERNAL;
        cp_ref_copy(k->out_data[0], k->in_data[0], (size_t)nx * cp_dtype_size(x->dtype));
        return CP_OK;
    }
    /* Output offset strides: the kept shape's strides, 0 along reduced axes. */
    struct cp_shape kept = x->shape;
    for (int a = 0; a < rank; a++)
        if (mask[a])
            kept.dims[a].value = 1;
    if (cp_ref_numel(&kept) != ny)
        return CP_ERR_INTERNAL;
    int64_t ostr[CP_MAX_RANK];
    cp_ref_strides(&kept, ostr);
    for (int a = 0; a < rank; a++)
        if (mask[a])
            ostr[a] = 0;
    int64_t count = ny > 0 ? nx / ny : 0;
    bool ints = int_accumulates(op, x->dtype);
    double *acc = k->scratch;
    int64_t *iacc = k->scratch;
    int64_t lo, hi;
    cp_ri_int_range(x->dtype, &lo, &hi);
    for (int64_t i = 0; i < ny; i++) {
        if (ints)
            iacc[i] = op == CP_OP_REDUCE_MIN    ? hi
                      : op == CP_OP_REDUCE_MAX  ? lo
                      : op == CP_OP_REDUCE_PROD ? 1
                                                : 0;
        else
            acc[i] = op == CP_OP_REDUCE_MIN    ? INFINITY
                     : op == CP_OP_REDUCE_MAX  ? -INFINITY
                     : op == CP_OP_REDUCE_PROD ? 1.0
                                               : 0.0;
    }
    for (int64_t i = 0; i < nx; i++) {
        int64_t o = 0, rem = i;
        for (int a = rank - 1; a >= 0; a--) {
            int64_t dm = x->shape.dims[a].value;
            o += (rem % dm) * ostr[a];
            rem /= dm;
        }
        if (ints) {
            int64_t v = cp_elem_load_i64(k->in_data[0], x->dtype, i), *a = &iacc[o];
            uint64_t u = (uint64_t)*a;
            switch (op) {
            case CP_OP_REDUCE_MIN:
                *a = v < *a ? v : *a;
                break;
            case CP_OP_REDUCE_MAX:
                *a = v > *a ? v : *a;
                break;
            case CP_OP_REDUCE_PROD:
                *a = (int64_t)(u * (uint64_t)v);
                break;
            case CP_OP_REDUCE_L1:
                *a = (int64_t)(u + (uint64_t)(v < 0 ? -(uint64_t)v : (uint64_t)v));
                break;
            case CP_OP_REDUCE_SUM_SQUARE:
                *a = (int64_t)(u + (uint64_t)v * (uint64_t)v);
                break;
            default: /* Sum, Mean */
                *a = (int64_t)(u + (uint64_t)v);
                break;
            }
        } else {
            double v = cp_elem_load_f64(k->in_data[0], x->dtype, i), *a = &acc[o];
            switch (op) {
            case CP_OP_REDUCE_MIN:
                if (isnan(v) || v < *a)
                    *a = v;
                break;
            case CP_OP_REDUCE_MAX:
                if (isnan(v) || v > *a)
                    *a = v;
                break;
            case CP_OP_REDUCE_PROD:
                *a *= v;
                break;
            case CP_OP_REDUCE_L1:
                *a += fabs(v);
                break;
            case CP_OP_REDUCE_L2:
            case CP_OP_REDUCE_SUM_SQUARE:
                *a += v * v;
                break;
            case CP_OP_REDUCE_LOG_SUM_EXP:
                *a += exp(v);
                break;
            default: /* Sum, Mean, LogSum */
                *a += v;
                break;
            }
        }
    }
    for (int64_t i = 0; i < ny; i++) {
        if (ints) {
            int64_t v = iacc[i];
            if (op == CP_OP_REDUCE_MEAN)
                v = count ? v / count : 0;
            cp_eval_store_i64(k->out_data[0], y->dtype, i, v);
            continue;
        }
        double v = acc[i];
        if (op == CP_OP_REDUCE_MEAN)
            v = count ? v / (double)count : NAN;
        else if (op == CP_OP_REDUCE_L2)
            v = sqrt(v);
        else if (op == CP_OP_REDUCE_LOG_SUM || op == CP_OP_REDUCE_LOG_SUM_EXP)
            v = log(v);
        cp_eval_store_f64(k->out_data[0], y->dtype, i, v);
    }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_reduce_min, CP_OP_REDUCE_MIN, cp_ri_reduce_supports, cp_ri_reduce_prepare,
              cp_ri_reduce_run);
CP_REF_KERNEL(cp_ref_reduce_prod, CP_OP_REDUCE_PROD, cp_ri_reduce_supports, cp_ri_reduce_prepare,
              cp_ri_reduce_run);
CP_REF_KERNEL(cp_ref_reduce_l1, CP_OP_REDUCE_L1, cp_ri_reduce_supports, cp_ri_reduce_prepare,
              cp_ri_reduce_run);
CP_REF_KERNEL(cp_ref_reduce_l2, CP_OP_REDUCE_L2, cp_ri_reduce_supports, cp_ri_reduce_prepare,
              cp_ri_reduce_run);
CP_REF_KERNEL(cp_ref_reduce_log_sum, CP_OP_REDUCE_LOG_SUM, cp_ri_reduce_supports,
              cp_ri_reduce_prepare, cp_ri_reduce_run);
CP_REF_KERNEL(cp_ref_reduce_log_sum_exp, CP_OP_REDUCE_LOG_SUM_EXP, cp_ri_reduce_supports,
              cp_ri_reduce_prepare, cp_ri_reduce_run);
CP_REF_KERNEL(cp_ref_reduce_sum_square, CP_OP_REDUCE_SUM_SQUARE, cp_ri_reduce_supports,
              cp_ri_reduce_prepare, cp_ri_reduce_run);

/* ---- LogSoftmax, Hardmax ------------------------------------------------------------------ */

static bool smax_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int64_t o, l, i;
    return x && cp_dtype_is_float(x->dtype) && y->dtype == x->dtype &&
           cp_shape_equal(&x->shape, &y->shape) &&
           cp_ref_softmax_geometry(g, n, &x->shape, &o, &l, &i);
}

static enum cp_status smax_run(struct cp_kexec *k)
{
    int64_t outer, len, inner;
    enum cp_dtype dt = k->in[0]->dtype;
    const void *x = k->in_data[0];
    void *y = k->out_data[0];
    if (!cp_ref_softmax_geometry(k->g, k->node, &k->in[0]->shape, &outer, &len, &inner))
        return CP_ERR_INTERNAL;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i;
            double m = cp_elem_load_f64(x, dt, base);
            int64_t arg = 0;
            for (int64_t l = 1; l < len; l++) {
                double v = cp_elem_load_f64(x, dt, base + l * inner);
                if (v > m) {
                    m = v;
                    arg = l;
                }
            }
            if (k->node->op == CP_OP_HARDMAX) {
                for (int64_t l = 0; l < len; l++)
                    cp_eval_store_f64(y, dt, base + l * inner, l == arg ? 1.0 : 0.0);
                continue;
            }
            double sum = 0.0;
            for (int64_t l = 0; l < len; l++)
                sum += exp(cp_elem_load_f64(x, dt, base + l * inner) - m);
            double ls = log(sum);
            for (int64_t l = 0; l < len; l++)
                cp_eval_store_f64(y, dt, base + l * inner,
                                  cp_elem_load_f64(x, dt, base + l * inner) - m - ls);
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_log_softmax, CP_OP_LOG_SOFTMAX, smax_supports, NULL, smax_run);
CP_REF_KERNEL(cp_ref_hardmax, CP_OP_HARDMAX, smax_supports, NULL, smax_run);

/* ---- ArgMax, ArgMin ---------------------------------------------------------------------- */

static bool arg_geometry(const struct cp_node *n, const struct cp_shape *s, int64_t *outer,
                         int64_t *len, int64_t *inner)
{
    int axis;
    return s->rank > 0 && cp_eval_axis(cp_node_attr_int(n, "axis", 0), s->rank, &axis) &&
           cp_ri_axis_geometry(s, axis, outer, len, inner);
}

static bool arg_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *y = cp_ref_out(g, n, 0);
    int64_t o, l, i;
    return x && x->dtype != CP_DTYPE_BOOL && y->dtype == CP_DTYPE_I64 &&
           arg_geometry(n, &x->shape, &o, &l, &i) && l > 0 && cp_ref_numel(&y->shape) == o * i;
}

static enum cp_status arg_run(struct cp_kexec *k)
{
    int64_t outer, len, inner;
    const struct cp_tensor *x = k->in[0];
    if (!arg_geometry(k->node, &x->shape, &outer, &len, &inner))
        return CP_ERR_INTERNAL;
    bool last = cp_node_attr_int(k->node, "select_last_index", 0) != 0;
    bool is_max = k->node->op == CP_OP_ARG_MAX;
    int64_t *y = k->out_data[0];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * len * inner + i, arg = 0;
            double best = cp_elem_load_f64(k->in_data[0], x->dtype, base);
            for (int64_t l = 1; l < len; l++) {
                double v = cp_elem_load_f64(k->in_data[0], x->dtype, base + l * inner);
                bool better = is_max ? v > best : v < best;
                if (better || (last && v == best)) {
                    best = v;
                    arg = l;
                }
            }
            y[o * inner + i] = arg;
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_arg_max, CP_OP_ARG_MAX, arg_supports, NULL, arg_run);
CP_REF_KERNEL(cp_ref_arg_min, CP_OP_ARG_MIN, arg_supports, NULL, arg_run);

/* ---- TopK ------------------------------------------------------------------------------ */

struct topk_item {
    double v;
    int64_t i;
};

/* Ties keep the lower index first, as ONNX specifies. */
static int cmp_largest(const void *a, const void *b)
{
    const struct topk_item *x = a, *y = b;
    if (x->v != y->v)
        return x->v > y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_smallest(const void *a, const void *b)
{
    const struct topk_item *x = a, *y = b;
    if (x->v != y->v)
        return x->v < y->v ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static bool topk_geometry(const struct cp_node *n, const struct cp_shape *s, int64_t *outer,
                          int64_t *len, int64_t *inner, int *axis)
{
    return s->rank > 0 && cp_eval_axis(cp_node_attr_int(n, "axis", -1), s->rank, axis) &&
           cp_ri_axis_geometry(s, *axis, outer, len, inner);
}

static bool topk_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 2)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *v = cp_ref_out(g, n, 0);
    const struct cp_tensor *ix = cp_ref_out(g, n, 1), *kt = cp_ref_in(g, n, 1);
    int64_t o, l, i;
    int axis;
    if (!x || !ix || v->dtype != x->dtype || ix->dtype != CP_DTYPE_I64 ||
        x->dtype == CP_DTYPE_BOOL || !topk_geometry(n, &x->shape, &o, &l, &i, &axis) ||
        !cp_shape_equal(&v->shape, &ix->shape) || v->shape.rank != x->shape.rank)
        return false;
    if (kt && (kt->dtype != CP_DTYPE_I64 || cp_ref_numel(&kt->shape) != 1))
        return false;
    return v->shape.dims[axis].value <= l;
}

static enum cp_status topk_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = (size_t)cp_ref_numel(&k->in[0]->shape) * sizeof(struct topk_item) + 16;
    return CP_OK;
}

static enum cp_status topk_run(struct cp_kexec *k)
{
    int64_t outer, len, inner;
    int axis;
    const struct cp_tensor *x = k->in[0];
    if (!topk_geometry(k->node, &x->shape, &outer, &len, &inner, &axis))
        return CP_ERR_INTERNAL;
    int64_t kk = k->out[0]->shape.dims[axis].value;
    int64_t want = k->node->n_inputs > 1 && k->in_data[1] ? *(const int64_t *)k->in_data[1]
                                                          : cp_node_attr_int(k->node, "k", -1);
    if (want != kk)
        return CP_ERR_INTERNAL; /* K disagrees with the planned output shape */
    bool largest = cp_node_attr_int(k->node, "largest", 1) != 0;
    struct topk_item *it = k->scratch;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t l = 0; l < len; l++)
                it[l] = (struct topk_item){
                    cp_elem_load_f64(k->in_data[0], x->dtype, (o * len + l) * inner + i), l};
            qsort(it, (size_t)len, sizeof *it, largest ? cmp_largest : cmp_smallest);
            for (int64_t l = 0; l < kk; l++) {
                int64_t src = (o * len + it[l].i) * inner + i, dst = (o * kk + l) * inner + i;
                size_t es = cp_dtype_size(x->dtype);
                memcpy((char *)k->out_data[0] + dst * (int64_t)es,
                       (const char *)k->in_data[0] + src * (int64_t)es, es);
                ((int64_t *)k->out_data[1])[dst] = it[l].i;
            }
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_top_k, CP_OP_TOP_K, topk_supports, topk_prepare, topk_run);

/* ---- CumSum ------------------------------------------------------------------------------ */

static bool cumsum_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n) || n->n_outputs != 1)
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *a = cp_ref_in(g, n, 1);
    const struct cp_tensor *y = cp_ref_out(g, n, 0);
    return x && a && cp_ri_is_index(a->dtype) && cp_ref_numel(&a->shape) == 1 &&
           x->dtype != CP_DTYPE_BOOL && y->dtype == x->dtype && x->shape.rank > 0 &&
           cp_shape_equal(&x->shape, &y->shape);
}

static enum cp_status cumsum_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0];
    int axis;
    int64_t outer, len, inner;
    if (!cp_eval_axis(cp_elem_load_i64(k->in_data[1], k->in[1]->dtype, 0), x->shape.rank, &axis) ||
        !cp_ri_axis_geometry(&x->shape, axis, &outer, &len, &inner))
        return CP_ERR_INTERNAL;
    bool excl = cp_node_attr_int(k->node, "exclusive", 0) != 0;
    bool rev = cp_node_attr_int(k->node, "reverse", 0) != 0;
    bool ints = cp_ri_is_int(x->dtype);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0.0;
            uint64_t si = 0;
            for (int64_t q = 0; q < len; q++) {
                int64_t l = rev ? len - 1 - q : q, at = (o * len + l) * inner + i;
                if (ints) {
                    uint64_t v = (uint64_t)cp_elem_load_i64(k->in_data[0], x->dtype, at);
                    if (!excl)
                        si += v;
                    cp_eval_store_i64(k->out_data[0], x->dtype, at, (int64_t)si);
                    if (excl)
                        si += v;
                } else {
                    double v = cp_elem_load_f64(k->in_data[0], x->dtype, at);
                    if (!excl)
                        s += v;
                    cp_eval_store_f64(k->out_data[0], x->dtype, at, s);
                    if (excl)
                        s += v;
                }
            }
        }
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_cum_sum, CP_OP_CUM_SUM, cumsum_supports, NULL, cumsum_run);

/* ---- NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss ----------------------------------- */

/* input [N, C, d...] as (N, C, D); target [N, d...] as (N, D). */
static bool loss_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (!cp_ref_node_is_static(g, n))
        return false;
    const struct cp_tensor *x = cp_ref_in(g, n, 0), *t = cp_ref_in(g, n, 1);
    const struct cp_tensor *w = cp_ref_in(g, n, 2), *y = cp_ref_out(g, n, 0);
    const struct cp_tensor *lp = cp_ref_out(g, n, 1);
    if (!x || !t || !cp_dtype_is_float(x->dtype) || !cp_ri_is_index(t->dtype) ||
        y->dtype != x->dtype || x->shape.rank < 2)
        return false;
    int64_t nn = x->shape.dims[0].value, c = x->shape.dims[1].value;
    if (cp_ref_numel(&t->shape) * c != cp_ref_numel(&x->shape) || t->shape.dims[0].value != nn)
        return false;
    if (w && (w->dtype != x->dtype || cp_ref_numel(&w->shape) != c))
        return false;
    if (lp && (n->op != CP_OP_SCE_LOSS || lp->dtype != x->dtype ||
               !cp_shape_equal(&lp->shape, &x->shape)))
        return false;
    const char *red = cp_node_attr_string(n, "reduction", "mean");
    if (strcmp(red, "none") == 0)
        return cp_ref_numel(&y->shape) == cp_ref_numel(&t->shape);
    return (strcmp(red, "sum") == 0 || strcmp(red, "mean") == 0) && cp_ref_numel(&y->shape) == 1;
}

static enum cp_status loss_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    k->scratch_bytes = k->node->op == CP_OP_SCE_LOSS
                           ? (size_t)cp_ref_numel(&k->in[0]->shape) * sizeof(double) + 8
                           : 0;
    return CP_OK;
}

static enum cp_status loss_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *t = k->in[1];
    enum cp_dtype dt = x->dtype;
    int64_t nn = x->shape.dims[0].value, c = x->shape.dims[1].value;
    int64_t dd = nn > 0 && c > 0 ? cp_ref_numel(&x->shape) / (nn * c) : 0;
    const void *w = k->node->n_inputs > 2 ? k->in_data[2] : NULL;
    const struct cp_attr *ig = cp_node_attr(k->node, "ignore_index");
    const char *red = cp_node_attr_string(k->node, "reduction", "mean");
    double *lp = k->scratch;
    bool sce = k->node->op == CP_OP_SCE_LOSS;
    if (sce) {
        /* log_softmax along the class axis */
        for (int64_t b = 0; b < nn; b++)
            for (int64_t q = 0; q < dd; q++) {
                double m = -INFINITY, s = 0.0;
                for (int64_t j = 0; j < c; j++) {
                    double v = cp_elem_load_f64(k->in_data[0], dt, (b * c + j) * dd + q);
                    m = v > m ? v : m;
                }
                for (int64_t j = 0; j < c; j++)
                    s += exp(cp_elem_load_f64(k->in_data[0], dt, (b * c + j) * dd + q) - m);
                double ls = log(s);
                for (int64_t j = 0; j < c; j++) {
                    int64_t at = (b * c + j) * dd + q;
                    lp[at] = cp_elem_load_f64(k->in_data[0], dt, at) - m - ls;
                    if (k->node->n_outputs > 1 && k->out_data[1])
                        cp_eval_store_f64(k->out_data[1], dt, at, lp[at]);
                }
            }
    }
    bool none = strcmp(red, "none") == 0;
    double total = 0.0, wsum = 0.0;
    for (int64_t b = 0; b < nn; b++)
        for (int64_t q = 0; q < dd; q++) {
            int64_t cls = cp_elem_load_i64(k->in_data[1], t->dtype, b * dd + q);
            double loss = 0.0, wt = 0.0;
            if (!(ig && ig->type == CP_ATTR_INT && cls == ig->i)) {
                if (cls < 0 || cls >= c)
                    return CP_ERR_INTERNAL; /* a target outside [0, C) */
                int64_t at = (b * c + cls) * dd + q;
                double v = sce ? lp[at] : cp_elem_load_f64(k->in_data[0], dt, at);
                wt = w ? cp_elem_load_f64(w, dt, cls) : 1.0;
                loss = -v * wt;
            }
            if (none)
                cp_eval_store_f64(k->out_data[0], dt, b * dd + q, loss);
            total += loss;
            wsum += wt;
        }
    if (!none)
        cp_eval_store_f64(k->out_data[0], dt, 0,
                          strcmp(red, "sum") == 0 ? total : (wsum != 0.0 ? total / wsum : NAN));
    return CP_OK;
}

CP_REF_KERNEL(cp_ref_nll_loss, CP_OP_NLL_LOSS, loss_supports, loss_prepare, loss_run);
CP_REF_KERNEL(cp_ref_sce_loss, CP_OP_SCE_LOSS, loss_supports, loss_prepare, loss_run);
