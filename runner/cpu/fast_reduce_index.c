/*
 * Fast f32 kernels of the reduce_index family, for what models spend time
 * in: LogSoftmax over the innermost axis (classifier heads, decoding),
 * ArgMax/ArgMin over the innermost axis (greedy decoding, segmentation
 * maps), the new reductions over trailing axes (norms, LogSumExp) and
 * CumSum along any axis (position ids, masks).
 *
 * Each works on rows of a contiguous innermost block, split over threads;
 * the inner loops are vectorised (omp simd, ISA clones). Anything else
 * goes to the reference kernels. The harness checks them against those.
 */
#include "runner/cpu/fast_kernels.h"
#include "runner/cpu/fast_util.h"

#include <math.h>
#include <omp.h>
#include <string.h>

/* Rows and row length when the reduction/normalisation runs over the
 * trailing dims from `axis` on: rows = prod dims[0:axis). */
static void rows_from(const int64_t *xd, int r, int axis, int64_t *rows, int64_t *len)
{
    *rows = 1;
    *len = 1;
    for (int i = 0; i < r; i++) {
        if (i < axis)
            *rows *= xd[i];
        else
            *len *= xd[i];
    }
}

static bool one_f32(const struct cp_graph *g, const struct cp_node *n)
{
    return n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32);
}

/* ---- LogSoftmax --------------------------------------------------------------------------- */

static bool lsm_geom(const struct cp_graph *g, const struct cp_node *n, int64_t *rows, int64_t *len)
{
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(cp_fk_in(g, n, 0), xd);
    if (r < 1)
        return false;
    bool old = cp_fk_opset(g) < 13;
    int64_t axis = cp_node_attr_int(n, "axis", old ? 1 : -1);
    if (axis < 0)
        axis += r;
    if (axis < 0 || axis >= r)
        return false;
    for (int i = (int)axis + 1; i < r && !old; i++)
        if (xd[i] != 1)
            return false; /* a strided axis: the reference */
    rows_from(xd, r, (int)axis, rows, len);
    return *rows > 0 && *len > 0;
}

static bool lsm_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t rows, len;
    return n->n_inputs == 1 && one_f32(g, n) && lsm_geom(g, n, &rows, &len);
}

CP_FK_HOT static void lsm_rows(const float *x, float *y, int64_t len, int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * len;
        float *yr = y + r * len;
        float m = xr[0];
#pragma omp simd reduction(max : m)
        for (int64_t i = 0; i < len; i++)
            m = xr[i] > m ? xr[i] : m;
        float sum = 0.0f;
        for (int64_t i = 0; i < len; i++)
            sum += expf(xr[i] - m);
        float sub = m + logf(sum);
#pragma omp simd
        for (int64_t i = 0; i < len; i++)
            yr[i] = xr[i] - sub;
    }
}

static enum cp_status lsm_run(struct cp_kexec *k)
{
    int64_t rows, len;
    if (!lsm_geom(k->g, k->node, &rows, &len))
        return CP_ERR_INTERNAL;
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int nt = cp_fk_threads(k, rows * len, 8192);
    if (nt <= 1) {
        lsm_rows(x, y, len, 0, rows);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(rows, 1, &b, &e);
        lsm_rows(x, y, len, b, e);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_log_softmax = {
    "c:log_softmax", CP_OP_LOG_SOFTMAX, lsm_supports, NULL, lsm_run, NULL, NULL};

/* ---- ArgMax, ArgMin over the innermost axis ------------------------------------------------ */

static bool arg_geom(const struct cp_graph *g, const struct cp_node *n, int64_t *rows, int64_t *len)
{
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(cp_fk_in(g, n, 0), xd);
    if (r < 1)
        return false;
    int64_t axis = cp_node_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += r;
    if (axis != r - 1)
        return false;
    rows_from(xd, r, (int)axis, rows, len);
    return *len > 0;
}

static bool arg_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t rows, len;
    return n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_I64) && arg_geom(g, n, &rows, &len);
}

/* The max (or min) by a vectorised pass, then the first (or last) index
 * holding it: two passes over a row in L1 beat a branchy single pass. */
CP_FK_HOT static void arg_rows(const float *x, int64_t *y, int64_t len, bool is_max, bool last,
                               int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * len;
        float m = xr[0];
        if (is_max) {
#pragma omp simd reduction(max : m)
            for (int64_t i = 0; i < len; i++)
                m = xr[i] > m ? xr[i] : m;
        } else {
#pragma omp simd reduction(min : m)
            for (int64_t i = 0; i < len; i++)
                m = xr[i] < m ? xr[i] : m;
        }
        int64_t at = 0;
        if (last) {
            for (int64_t i = len - 1; i >= 0; i--)
                if (xr[i] == m) {
                    at = i;
                    break;
                }
        } else {
            for (int64_t i = 0; i < len; i++)
                if (xr[i] == m) {
                    at = i;
                    break;
                }
        }
        y[r] = at;
    }
}

static enum cp_status arg_run(struct cp_kexec *k)
{
    int64_t rows, len;
    if (!arg_geom(k->g, k->node, &rows, &len))
        return CP_ERR_INTERNAL;
    bool is_max = k->node->op == CP_OP_ARG_MAX;
    bool last = cp_node_attr_int(k->node, "select_last_index", 0) != 0;
    const float *x = k->in_data[0];
    int64_t *y = k->out_data[0];
    int nt = cp_fk_threads(k, rows * len, 16384);
    if (nt <= 1) {
        arg_rows(x, y, len, is_max, last, 0, rows);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(rows, 1, &b, &e);
        arg_rows(x, y, len, is_max, last, b, e);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_arg_max = {"c:argmax", CP_OP_ARG_MAX, arg_supports, NULL,
                                          arg_run,    NULL,          NULL};
const struct cp_kernel cp_fast_arg_min = {"c:argmin", CP_OP_ARG_MIN, arg_supports, NULL,
                                          arg_run,    NULL,          NULL};

/* ---- reductions over trailing axes ---------------------------------------------------------- */

/* The reduced axes, from the attribute (before opset 18) or a constant
 * input, must be a trailing block [axis, rank). */
static bool red_geom(const struct cp_graph *g, const struct cp_node *n, int64_t *rows, int64_t *len)
{
    int64_t xd[CP_MAX_RANK], axes[CP_MAX_RANK];
    int r = cp_fk_dims(cp_fk_in(g, n, 0), xd);
    size_t na = 0;
    if (r < 1 || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_attr *a = cp_node_attr(n, "axes");
    const struct cp_tensor *at = cp_fk_in(g, n, 1);
    if (at && (cp_fk_opset(g) >= 18 || !a)) {
        if (!cp_fk_const_ints(at, axes, CP_MAX_RANK, &na))
            return false;
    } else if (a) {
        if (a->type != CP_ATTR_INTS || a->n > CP_MAX_RANK)
            return false;
        na = a->n;
        memcpy(axes, a->ints, na * sizeof *axes);
    }
    if (na == 0)
        return false; /* all axes or the identity: the reference */
    bool mask[CP_MAX_RANK] = {false};
    for (size_t i = 0; i < na; i++) {
        int64_t v = axes[i] < 0 ? axes[i] + r : axes[i];
        if (v < 0 || v >= r || mask[v])
            return false;
        mask[v] = true;
    }
    int first = r - (int)na;
    for (int i = first; i < r; i++)
        if (!mask[i])
            return false;
    rows_from(xd, r, first, rows, len);
    return *rows > 0 && *len > 0;
}

static bool red_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t rows, len;
    return cp_fk_in_is(g, n, 0, CP_DTYPE_F32) && n->n_outputs == 1 && red_geom(g, n, &rows, &len);
}

CP_FK_HOT static void red_rows(enum cp_op op, const float *x, float *y, int64_t len, int64_t r0,
                               int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * len;
        float acc;
        switch (op) {
        case CP_OP_REDUCE_MIN:
            acc = xr[0];
#pragma omp simd reduction(min : acc)
            for (int64_t i = 0; i < len; i++)
                acc = xr[i] < acc ? xr[i] : acc;
            for (int64_t i = 0; i < len; i++)
                if (isnan(xr[i]))
                    acc = xr[i];
            break;
        case CP_OP_REDUCE_PROD:
            acc = 1.0f;
            for (int64_t i = 0; i < len; i++)
                acc *= xr[i];
            break;
        case CP_OP_REDUCE_L1:
            acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t i = 0; i < len; i++)
                acc += fabsf(xr[i]);
            break;
        case CP_OP_REDUCE_LOG_SUM:
            acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t i = 0; i < len; i++)
                acc += xr[i];
            acc = logf(acc);
            break;
        case CP_OP_REDUCE_LOG_SUM_EXP: {
            float m = xr[0];
#pragma omp simd reduction(max : m)
            for (int64_t i = 0; i < len; i++)
                m = xr[i] > m ? xr[i] : m;
            acc = 0.0f;
            if (isinf(m)) {
                for (int64_t i = 0; i < len; i++)
                    acc += expf(xr[i]);
                acc = logf(acc);
                break;
            }
            for (int64_t i = 0; i < len; i++)
                acc += expf(xr[i] - m);
            acc = m + logf(acc);
            break;
        }
        default: /* L2, SumSquare */
            acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int64_t i = 0; i < len; i++)
                acc += xr[i] * xr[i];
            if (op == CP_OP_REDUCE_L2)
                acc = sqrtf(acc);
            break;
        }
        y[r] = acc;
    }
}

static enum cp_status red_run(struct cp_kexec *k)
{
    int64_t rows, len;
    if (!red_geom(k->g, k->node, &rows, &len))
        return CP_ERR_INTERNAL;
    enum cp_op op = k->node->op;
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int nt = cp_fk_threads(k, rows * len, 16384);
    if (nt <= 1) {
        red_rows(op, x, y, len, 0, rows);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(rows, 1, &b, &e);
        red_rows(op, x, y, len, b, e);
    }
    return CP_OK;
}

#define RED_KERNEL(var, name, op)                                                                  \
    const struct cp_kernel var = {name, op, red_supports, NULL, red_run, NULL, NULL}
RED_KERNEL(cp_fast_reduce_min, "c:reduce_min", CP_OP_REDUCE_MIN);
RED_KERNEL(cp_fast_reduce_prod, "c:reduce_prod", CP_OP_REDUCE_PROD);
RED_KERNEL(cp_fast_reduce_l1, "c:reduce_l1", CP_OP_REDUCE_L1);
RED_KERNEL(cp_fast_reduce_l2, "c:reduce_l2", CP_OP_REDUCE_L2);
RED_KERNEL(cp_fast_reduce_log_sum, "c:reduce_log_sum", CP_OP_REDUCE_LOG_SUM);
RED_KERNEL(cp_fast_reduce_log_sum_exp, "c:reduce_log_sum_exp", CP_OP_REDUCE_LOG_SUM_EXP);
RED_KERNEL(cp_fast_reduce_sum_square, "c:reduce_sum_square", CP_OP_REDUCE_SUM_SQUARE);

/* ---- CumSum ---------------------------------------------------------------------------------- */

/* (outer, len, inner) around a constant axis. */
static bool cum_geom(const struct cp_graph *g, const struct cp_node *n, int64_t *outer,
                     int64_t *len, int64_t *inner)
{
    int64_t xd[CP_MAX_RANK], ax;
    size_t na;
    int r = cp_fk_dims(cp_fk_in(g, n, 0), xd);
    const struct cp_tensor *at = cp_fk_in(g, n, 1);
    if (r < 1 || !at || !cp_fk_const_ints(at, &ax, 1, &na) || na != 1)
        return false;
    if (ax < 0)
        ax += r;
    if (ax < 0 || ax >= r)
        return false;
    *outer = *inner = 1;
    for (int i = 0; i < r; i++) {
        if (i < ax)
            *outer *= xd[i];
        else if (i > ax)
            *inner *= xd[i];
    }
    *len = xd[ax];
    return true;
}

static bool cum_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t o, l, i;
    return n->n_inputs == 2 && one_f32(g, n) && cum_geom(g, n, &o, &l, &i);
}

/* Running sums of whole inner rows: y[l] = y[l-1] + x[l], vectorised over
 * the inner dimension (an inner of 1 is the scalar scan). */
CP_FK_HOT static void cum_block(const float *x, float *y, int64_t len, int64_t inner, bool excl,
                                bool rev)
{
    for (int64_t q = 0; q < len; q++) {
        int64_t l = rev ? len - 1 - q : q, prev = rev ? l + 1 : l - 1;
        float *yr = y + l * inner;
        const float *xr = x + l * inner, *xp = x + prev * inner, *yp = y + prev * inner;
        if (q == 0) {
#pragma omp simd
            for (int64_t i = 0; i < inner; i++)
                yr[i] = excl ? 0.0f : xr[i];
        } else {
            const float *add = excl ? xp : xr;
#pragma omp simd
            for (int64_t i = 0; i < inner; i++)
                yr[i] = yp[i] + add[i];
        }
    }
}

static enum cp_status cum_run(struct cp_kexec *k)
{
    int64_t outer, len, inner;
    if (!cum_geom(k->g, k->node, &outer, &len, &inner))
        return CP_ERR_INTERNAL;
    bool excl = cp_node_attr_int(k->node, "exclusive", 0) != 0;
    bool rev = cp_node_attr_int(k->node, "reverse", 0) != 0;
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int nt = cp_fk_threads(k, outer * len * inner, 16384);
    if (nt <= 1 || outer < 2) {
        for (int64_t o = 0; o < outer; o++)
            cum_block(x + o * len * inner, y + o * len * inner, len, inner, excl, rev);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(outer, 1, &b, &e);
        for (int64_t o = b; o < e; o++)
            cum_block(x + o * len * inner, y + o * len * inner, len, inner, excl, rev);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_cum_sum = {"c:cumsum", CP_OP_CUM_SUM, cum_supports, NULL,
                                          cum_run,    NULL,          NULL};
