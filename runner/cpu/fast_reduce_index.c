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
#include "graph/op_eval.h" /* Einsum's equation, transposes */

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

/* ---- Einsum as a batched matmul ------------------------------------------------------------ */

/* Two-input equations whose labels each fall in one class: batch (both
 * inputs and the output), M (A and the output), N (B and the output) or K
 * (both inputs, summed): "bhid,bhjd->bhij", "bij,bjk->bik", "ij,kj->ik",
 * "bhij,bhjd->bhid", ... Each operand is brought to [batch, M, K] /
 * [batch, K, N] (a transposed block is passed to sgemm as such instead of
 * being copied), one sgemm per batch, and the result transposed to the
 * output's order when that differs. Repeated labels, labels summed out of
 * one input only, and broadcasting dims go to the reference. */
enum { EM_BATCH, EM_M, EM_N, EM_K };

struct em_geom {
    int nb, nm, nn, nk;
    int64_t batch, m, n, k;
    /* canonical orders of A ([batch, M, K]), B ([batch, K, N]), C ([batch, M, N])
     * as dims of A, B, and the output */
    int64_t perm_a[CP_MAX_RANK], perm_b[CP_MAX_RANK], perm_c[CP_MAX_RANK];
    bool copy_a, copy_b, copy_c; /* needs a transpose into scratch */
    bool trans_a, trans_b;       /* the block is stored transposed */
    int rank_a, rank_b, rank_c;
    int64_t dims_a[CP_MAX_RANK], dims_b[CP_MAX_RANK], dims_c[CP_MAX_RANK];
};

static bool is_identity(const int64_t *p, int r)
{
    for (int i = 0; i < r; i++)
        if (p[i] != i)
            return false;
    return true;
}

static int find_label(const int *labels, int r, int l)
{
    for (int i = 0; i < r; i++)
        if (labels[i] == l)
            return i;
    return -1;
}

static bool em_plan(const struct cp_graph *g, const struct cp_node *n, struct em_geom *gm)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_shape *shapes[2] = {&cp_fk_in(g, n, 0)->shape, &cp_fk_in(g, n, 1)->shape};
    struct cp_einsum e;
    char why[8];
    if (!cp_eval_einsum_plan(cp_node_attr_string(n, "equation", ""), 2, shapes, &e, why,
                             sizeof why))
        return false;
    const int *la = e.label[0], *lb = e.label[1], *lc = e.out_label;
    int ra = e.rank[0], rb = e.rank[1], rc = e.out_rank;
    /* no repeats, no broadcasting */
    for (int i = 0; i < ra; i++)
        if (find_label(la, i, la[i]) >= 0 || e.dim[0][i] != e.size[la[i]])
            return false;
    for (int i = 0; i < rb; i++)
        if (find_label(lb, i, lb[i]) >= 0 || e.dim[1][i] != e.size[lb[i]])
            return false;
    memset(gm, 0, sizeof *gm);
    gm->batch = gm->m = gm->n = gm->k = 1;
    int ob[CP_MAX_RANK], om[CP_MAX_RANK], on[CP_MAX_RANK], okk[CP_MAX_RANK];
    for (int q = 0; q < rc; q++) {
        int l = lc[q];
        bool ia = find_label(la, ra, l) >= 0, ib = find_label(lb, rb, l) >= 0;
        if (ia && ib)
            ob[gm->nb++] = l, gm->batch *= e.size[l];
        else if (ia)
            om[gm->nm++] = l, gm->m *= e.size[l];
        else
            on[gm->nn++] = l, gm->n *= e.size[l];
    }
    for (int i = 0; i < ra; i++) {
        int l = la[i];
        if (find_label(lc, rc, l) >= 0)
            continue;
        if (find_label(lb, rb, l) < 0)
            return false; /* summed out of A alone */
        okk[gm->nk++] = l;
        gm->k *= e.size[l];
    }
    for (int i = 0; i < rb; i++)
        if (find_label(lc, rc, lb[i]) < 0 && find_label(la, ra, lb[i]) < 0)
            return false; /* summed out of B alone */
    /* A as [batch, M, K] or, transposed, [batch, K, M] */
    int p = 0;
    for (int i = 0; i < gm->nb; i++)
        gm->perm_a[p++] = find_label(la, ra, ob[i]);
    int64_t t_a[CP_MAX_RANK];
    memcpy(t_a, gm->perm_a, sizeof t_a);
    int pt = p;
    for (int i = 0; i < gm->nm; i++)
        gm->perm_a[p++] = find_label(la, ra, om[i]);
    for (int i = 0; i < gm->nk; i++)
        gm->perm_a[p++] = find_label(la, ra, okk[i]);
    for (int i = 0; i < gm->nk; i++)
        t_a[pt++] = find_label(la, ra, okk[i]);
    for (int i = 0; i < gm->nm; i++)
        t_a[pt++] = find_label(la, ra, om[i]);
    if (!is_identity(gm->perm_a, ra) && is_identity(t_a, ra))
        gm->trans_a = true;
    gm->copy_a = !is_identity(gm->perm_a, ra) && !gm->trans_a;
    /* B as [batch, K, N] or, transposed, [batch, N, K] */
    p = 0;
    for (int i = 0; i < gm->nb; i++)
        gm->perm_b[p++] = find_label(lb, rb, ob[i]);
    int64_t t_b[CP_MAX_RANK];
    memcpy(t_b, gm->perm_b, sizeof t_b);
    pt = p;
    for (int i = 0; i < gm->nk; i++)
        gm->perm_b[p++] = find_label(lb, rb, okk[i]);
    for (int i = 0; i < gm->nn; i++)
        gm->perm_b[p++] = find_label(lb, rb, on[i]);
    for (int i = 0; i < gm->nn; i++)
        t_b[pt++] = find_label(lb, rb, on[i]);
    for (int i = 0; i < gm->nk; i++)
        t_b[pt++] = find_label(lb, rb, okk[i]);
    if (!is_identity(gm->perm_b, rb) && is_identity(t_b, rb))
        gm->trans_b = true;
    gm->copy_b = !is_identity(gm->perm_b, rb) && !gm->trans_b;
    /* C computed as [batch, M, N]; perm_c takes it to the output's order */
    int canon[CP_MAX_RANK];
    p = 0;
    for (int i = 0; i < gm->nb; i++)
        canon[p++] = ob[i];
    for (int i = 0; i < gm->nm; i++)
        canon[p++] = om[i];
    for (int i = 0; i < gm->nn; i++)
        canon[p++] = on[i];
    for (int q = 0; q < rc; q++)
        gm->perm_c[q] = find_label(canon, rc, lc[q]);
    gm->copy_c = !is_identity(gm->perm_c, rc);
    gm->rank_a = ra, gm->rank_b = rb, gm->rank_c = rc;
    for (int i = 0; i < ra; i++)
        gm->dims_a[i] = e.dim[0][i];
    for (int i = 0; i < rb; i++)
        gm->dims_b[i] = e.dim[1][i];
    for (int q = 0; q < rc; q++)
        gm->dims_c[q] = e.size[canon[q]];
    return gm->batch > 0 && gm->m > 0 && gm->n > 0 && gm->k > 0;
}

static bool em_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct em_geom gm;
    return em_plan(g, n, &gm);
}

static enum cp_status em_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    struct em_geom gm;
    if (!em_plan(k->g, k->node, &gm))
        return CP_ERR_INTERNAL;
    size_t f = sizeof(float), s = 64;
    if (gm.copy_a)
        s += (size_t)(gm.batch * gm.m * gm.k) * f + 64;
    if (gm.copy_b)
        s += (size_t)(gm.batch * gm.k * gm.n) * f + 64;
    if (gm.copy_c)
        s += (size_t)(gm.batch * gm.m * gm.n) * f + 64;
    k->scratch_bytes = s;
    return CP_OK;
}

/* x (dims xd, rank r) permuted by perm into y. */
static void em_transpose(const float *x, const int64_t *xd, int r, const int64_t *perm, float *y)
{
    struct cp_tensor tx = {.dtype = CP_DTYPE_F32}, ty = {.dtype = CP_DTYPE_F32};
    int64_t yd[CP_MAX_RANK];
    for (int i = 0; i < r; i++)
        yd[i] = xd[perm[i]];
    cp_shape_set(&tx.shape, r, xd);
    cp_shape_set(&ty.shape, r, yd);
    cp_eval_transpose(&tx, x, perm, &ty, y);
}

static enum cp_status em_run(struct cp_kexec *k)
{
    struct em_geom gm;
    if (!em_plan(k->g, k->node, &gm))
        return CP_ERR_INTERNAL;
    char *s = k->scratch;
    const float *a = k->in_data[0], *b = k->in_data[1];
    float *c = k->out_data[0];
    size_t f = sizeof(float);
    if (gm.copy_a) {
        float *t = (float *)s;
        em_transpose(a, gm.dims_a, gm.rank_a, gm.perm_a, t);
        a = t;
        s += ((size_t)(gm.batch * gm.m * gm.k) * f + 63) / 64 * 64;
    }
    if (gm.copy_b) {
        float *t = (float *)s;
        em_transpose(b, gm.dims_b, gm.rank_b, gm.perm_b, t);
        b = t;
        s += ((size_t)(gm.batch * gm.k * gm.n) * f + 63) / 64 * 64;
    }
    float *cc = gm.copy_c ? (float *)s : c;
    int64_t lda = gm.trans_a ? gm.m : gm.k, ldb = gm.trans_b ? gm.k : gm.n;
    for (int64_t bb = 0; bb < gm.batch; bb++)
        if (dnnl_sgemm(gm.trans_a ? 'T' : 'N', gm.trans_b ? 'T' : 'N', gm.m, gm.n, gm.k, 1.0f,
                       a + bb * gm.m * gm.k, lda, b + bb * gm.k * gm.n, ldb, 0.0f,
                       cc + bb * gm.m * gm.n, gm.n) != dnnl_success)
            return CP_ERR_INTERNAL;
    if (gm.copy_c)
        em_transpose(cc, gm.dims_c, gm.rank_c, gm.perm_c, c);
    return CP_OK;
}

const struct cp_kernel cp_fast_einsum = {
    "c:einsum_matmul", CP_OP_EINSUM, em_supports, em_prepare, em_run, NULL, NULL};

/* ---- TopK over the innermost axis ------------------------------------------------------------ */

/* k small against the row (beam search, top-k sampling): one pass per row
 * keeping the k best in a sorted buffer, which ONNX's tie order (the lower
 * index first) falls out of, as later equal values never pass earlier
 * ones. Larger k (a detector's 1000 best of 300k anchor scores) keeps them
 * in a heap whose root is the worst kept, then sorts the k: O(n log k)
 * against the reference's sort of the whole row. */
#define TOPK_MAX_K 256

static bool topk_geom(const struct cp_graph *g, const struct cp_node *n, int64_t *rows,
                      int64_t *len, int64_t *k)
{
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    int r = cp_fk_dims(cp_fk_in(g, n, 0), xd);
    const struct cp_tensor *y = cp_fk_out(g, n, 0);
    if (r < 1 || !y || cp_fk_dims(y, yd) != r)
        return false;
    int64_t axis = cp_node_attr_int(n, "axis", -1);
    if (axis < 0)
        axis += r;
    if (axis != r - 1)
        return false;
    rows_from(xd, r, r - 1, rows, len);
    *k = yd[r - 1];
    return *k >= 1 && *k <= *len;
}

/* Whether (a, ia) goes before (b, ib): the better value, the lower index
 * among equals. */
static inline bool topk_before(float a, int64_t ia, float b, int64_t ib, bool largest)
{
    if (a != b)
        return largest ? a > b : a < b;
    return ia < ib;
}

/* Restore the heap (worst at the root) below position p. */
static void topk_sift(float *hv, int64_t *hi, int64_t n, int64_t p, bool largest)
{
    for (;;) {
        int64_t c = 2 * p + 1;
        if (c >= n)
            return;
        if (c + 1 < n && topk_before(hv[c], hi[c], hv[c + 1], hi[c + 1], largest))
            c++;
        if (!topk_before(hv[p], hi[p], hv[c], hi[c], largest))
            return;
        float tv = hv[p];
        int64_t ti = hi[p];
        hv[p] = hv[c];
        hi[p] = hi[c];
        hv[c] = tv;
        hi[c] = ti;
        p = c;
    }
}

static void topk_rows_heap(const float *x, float *yv, int64_t *yi, int64_t len, int64_t k,
                           bool largest, int64_t r0, int64_t r1, float *hv, int64_t *hi)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * len;
        for (int64_t i = 0; i < k; i++) {
            hv[i] = xr[i];
            hi[i] = i;
        }
        for (int64_t p = k / 2; p-- > 0;)
            topk_sift(hv, hi, k, p, largest);
        for (int64_t i = k; i < len; i++) {
            /* A later index never goes before an equal value kept. */
            if (!(largest ? xr[i] > hv[0] : xr[i] < hv[0]))
                continue;
            hv[0] = xr[i];
            hi[0] = i;
            topk_sift(hv, hi, k, 0, largest);
        }
        /* Pop the worst to the back: best first. */
        for (int64_t n = k; n > 0; n--) {
            yv[r * k + n - 1] = hv[0];
            yi[r * k + n - 1] = hi[0];
            hv[0] = hv[n - 1];
            hi[0] = hi[n - 1];
            topk_sift(hv, hi, n - 1, 0, largest);
        }
    }
}

static bool topk_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t rows, len, k;
    const struct cp_tensor *kt = cp_fk_in(g, n, 1);
    return n->n_outputs == 2 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32) && cp_fk_out_is(g, n, 1, CP_DTYPE_I64) &&
           (!kt || (kt->dtype == CP_DTYPE_I64 && cp_shape_numel(&kt->shape) == 1)) &&
           topk_geom(g, n, &rows, &len, &k);
}

static void topk_rows(const float *x, float *yv, int64_t *yi, int64_t len, int64_t k, bool largest,
                      int64_t r0, int64_t r1)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = x + r * len;
        float *bv = yv + r * k;
        int64_t *bi = yi + r * k, n = 0;
        for (int64_t i = 0; i < len; i++) {
            float v = xr[i];
            if (n == k && (largest ? !(v > bv[k - 1]) : !(v < bv[k - 1])))
                continue;
            int64_t p = n < k ? n : k - 1;
            while (p > 0 && (largest ? v > bv[p - 1] : v < bv[p - 1])) {
                bv[p] = bv[p - 1];
                bi[p] = bi[p - 1];
                p--;
            }
            bv[p] = v;
            bi[p] = i;
            if (n < k)
                n++;
        }
    }
}

/* One thread's heap, in 64-byte steps so every thread's starts aligned. */
static size_t topk_heap_bytes(int64_t k)
{
    return ((size_t)k * (sizeof(float) + sizeof(int64_t)) + 63) / 64 * 64;
}

static enum cp_status topk_run(struct cp_kexec *k)
{
    int64_t rows, len, kk;
    if (!topk_geom(k->g, k->node, &rows, &len, &kk))
        return CP_ERR_INTERNAL;
    int64_t want = k->node->n_inputs > 1 && k->in_data[1] ? *(const int64_t *)k->in_data[1]
                                                          : cp_node_attr_int(k->node, "k", -1);
    if (want != kk)
        return CP_ERR_INTERNAL; /* K disagrees with the planned output shape */
    bool largest = cp_node_attr_int(k->node, "largest", 1) != 0;
    const float *x = k->in_data[0];
    float *yv = k->out_data[0];
    int64_t *yi = k->out_data[1];
    int nt = cp_fk_threads(k, rows * len, 16384);
    bool heap = kk > TOPK_MAX_K;
    size_t per = topk_heap_bytes(kk);
    if (nt <= 1) {
        if (heap)
            topk_rows_heap(x, yv, yi, len, kk, largest, 0, rows,
                           (float *)((char *)k->scratch + (size_t)kk * sizeof(int64_t)),
                           k->scratch);
        else
            topk_rows(x, yv, yi, len, kk, largest, 0, rows);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(rows, 1, &b, &e);
        if (heap) {
            char *mine = (char *)k->scratch + (size_t)omp_get_thread_num() * per;
            topk_rows_heap(x, yv, yi, len, kk, largest, b, e,
                           (float *)(mine + (size_t)kk * sizeof(int64_t)), (int64_t *)mine);
        } else {
            topk_rows(x, yv, yi, len, kk, largest, b, e);
        }
    }
    return CP_OK;
}

/* The heap's scratch: k indices then k values per thread. */
static enum cp_status topk_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    (void)d;
    int64_t rows, len, kk;
    if (topk_geom(k->g, k->node, &rows, &len, &kk) && kk > TOPK_MAX_K) {
        int nt = k->env->threads > 0 ? k->env->threads : 1;
        k->scratch_bytes = (size_t)nt * topk_heap_bytes(kk);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_top_k = {"c:topk", CP_OP_TOP_K, topk_supports, topk_prepare,
                                        topk_run, NULL,        NULL};

/* ---- GatherElements over the innermost axis ------------------------------------------------ */

/* Rows of the indices (all but the last dim) map to rows of the data at
 * the same leading coordinates; each row gathers along the last axis. */
static bool ge_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t xd[CP_MAX_RANK], id[CP_MAX_RANK];
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *ix = cp_fk_in(g, n, 1);
    const struct cp_tensor *y = cp_fk_out(g, n, 0);
    if (n->n_inputs != 2 || n->n_outputs != 1 || !x || !ix || !y)
        return false;
    int r = cp_fk_dims(x, xd);
    if (r < 1 || cp_fk_dims(ix, id) != r ||
        (x->dtype != CP_DTYPE_F32 && x->dtype != CP_DTYPE_I64) ||
        (ix->dtype != CP_DTYPE_I64 && ix->dtype != CP_DTYPE_I32) || y->dtype != x->dtype ||
        !cp_shape_equal(&y->shape, &ix->shape))
        return false;
    int64_t axis = cp_node_attr_int(n, "axis", 0);
    if (axis < 0)
        axis += r;
    if (axis != r - 1)
        return false;
    for (int i = 0; i < r - 1; i++)
        if (id[i] > xd[i])
            return false;
    return true;
}

static enum cp_status ge_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *ix = k->in[1];
    int r = x->shape.rank;
    int64_t xlen = x->shape.dims[r - 1].value, ilen = ix->shape.dims[r - 1].value;
    int64_t rows = cp_shape_numel(&ix->shape) / (ilen ? ilen : 1);
    bool i32 = ix->dtype == CP_DTYPE_I32, f32 = x->dtype == CP_DTYPE_F32;
    int64_t co[CP_MAX_RANK];
    bool bad = false;
    for (int64_t row = 0; row < rows && ilen; row++) {
        /* the data row at the indices row's leading coordinates */
        int64_t rem = row, xrow = 0, mul = 1;
        for (int a = r - 2; a >= 0; a--) {
            co[a] = rem % ix->shape.dims[a].value;
            rem /= ix->shape.dims[a].value;
        }
        for (int a = r - 2; a >= 0; a--) {
            xrow += co[a] * mul;
            mul *= x->shape.dims[a].value;
        }
        const int64_t *i64 = (const int64_t *)k->in_data[1] + row * ilen;
        const int32_t *i32p = (const int32_t *)k->in_data[1] + row * ilen;
        for (int64_t j = 0; j < ilen; j++) {
            int64_t v = i32 ? i32p[j] : i64[j];
            v = v < 0 ? v + xlen : v;
            if (v < 0 || v >= xlen) {
                bad = true;
                break;
            }
            if (f32)
                ((float *)k->out_data[0])[row * ilen + j] =
                    ((const float *)k->in_data[0])[xrow * xlen + v];
            else
                ((int64_t *)k->out_data[0])[row * ilen + j] =
                    ((const int64_t *)k->in_data[0])[xrow * xlen + v];
        }
        if (bad)
            break;
    }
    return bad ? CP_ERR_INTERNAL : CP_OK;
}

const struct cp_kernel cp_fast_gather_elements = {
    "c:gather_elements", CP_OP_GATHER_ELEMENTS, ge_supports, NULL, ge_run, NULL, NULL};

/* ---- Tile ------------------------------------------------------------------------------------ */

/* Output rows (all but the last dim) copy the data row at their
 * coordinates modulo the data's dims, repeated along the last dim. Any
 * dtype: rows move as bytes. */
static bool tile_supports(const struct cp_graph *g, const struct cp_node *n)
{
    int64_t xd[CP_MAX_RANK], yd[CP_MAX_RANK];
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    if (n->n_inputs != 2 || n->n_outputs != 1 || !x || !y || x->dtype != y->dtype ||
        cp_dtype_size(x->dtype) == 0)
        return false;
    int r = cp_fk_dims(x, xd);
    if (r < 1 || cp_fk_dims(y, yd) != r)
        return false;
    for (int i = 0; i < r; i++)
        if (xd[i] < 1 || yd[i] % xd[i] != 0)
            return false;
    return true;
}

static enum cp_status tile_run(struct cp_kexec *k)
{
    const struct cp_tensor *x = k->in[0], *y = k->out[0], *rp = k->in[1];
    int r = x->shape.rank;
    for (int a = 0; a < r; a++)
        if (x->shape.dims[a].value * cp_elem_load_i64(k->in_data[1], rp->dtype, a) !=
            y->shape.dims[a].value)
            return CP_ERR_INTERNAL; /* repeats disagree with the planned shape */
    size_t es = cp_dtype_size(x->dtype);
    int64_t xlen = x->shape.dims[r - 1].value, ylen = y->shape.dims[r - 1].value;
    size_t row_bytes = (size_t)xlen * es;
    int64_t rows = cp_shape_numel(&y->shape) / ylen;
    for (int64_t row = 0; row < rows; row++) {
        int64_t rem = row, xrow = 0, mul = 1;
        for (int a = r - 2; a >= 0; a--) {
            int64_t c = rem % y->shape.dims[a].value;
            rem /= y->shape.dims[a].value;
            xrow += (c % x->shape.dims[a].value) * mul;
            mul *= x->shape.dims[a].value;
        }
        const char *src = (const char *)k->in_data[0] + (size_t)xrow * row_bytes;
        char *dst = (char *)k->out_data[0] + (size_t)row * (size_t)ylen * es;
        for (int64_t t = 0; t < ylen / xlen; t++)
            memcpy(dst + (size_t)t * row_bytes, src, row_bytes);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_tile = {"c:tile", CP_OP_TILE, tile_supports, NULL,
                                       tile_run, NULL,       NULL};
