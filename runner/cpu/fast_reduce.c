/*
 * Reductions and per-channel normalisation in plain C, f32 data with double
 * accumulators: ReduceMean, ReduceSum, ReduceMax, GlobalAveragePool,
 * InstanceNormalization and BatchNormalization (inference).
 *
 * A reduction is accepted when, after dropping size-1 dims and merging
 * neighbours, the reduced dims form one block: [outer, R] (a row reduction,
 * e.g. over the last axis) or [outer, R, inner] (a middle block, e.g. over
 * H*W of NCHW seen from the channel side). Other patterns go to the
 * reference kernel.
 *
 * InstanceNormalization (which is also how PyTorch exports GroupNorm) takes
 * each (n, c) plane, computes its mean and then the mean squared deviation
 * (two passes, double sums: exact enough for large planes), and writes
 * scale * (x - mean) / sqrt(var + eps) + bias in a third pass.
 */
#include "runner/cpu/fast_util.h"
#include "runner/cpu/layout.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

enum red_kind { RED_SUM, RED_MEAN, RED_MAX };

struct red_state {
    enum red_kind kind;
    int64_t outer, r, inner;
};

static bool reduce_axes(const struct cp_graph *g, const struct cp_node *n, int rank, bool *red)
{
    int64_t axes[CP_MAX_RANK];
    size_t na = 0;
    bool from_input = n->op == CP_OP_REDUCE_SUM && cp_fk_opset(g) >= 13;
    bool noop = cp_node_attr_int(n, "noop_with_empty_axes", 0) != 0;
    if (from_input) {
        const struct cp_tensor *t = cp_fk_in(g, n, 1);
        if (t && !cp_fk_const_ints(t, axes, CP_MAX_RANK, &na))
            return false;
    } else {
        const struct cp_attr *a = cp_node_attr(n, "axes");
        if (a) {
            if (a->type != CP_ATTR_INTS || a->n > CP_MAX_RANK)
                return false;
            na = a->n;
            for (size_t i = 0; i < na; i++)
                axes[i] = a->ints[i];
        }
    }
    for (int i = 0; i < rank; i++)
        red[i] = na == 0 && !noop;
    for (size_t i = 0; i < na; i++) {
        int64_t ax = axes[i] < 0 ? axes[i] + rank : axes[i];
        if (ax < 0 || ax >= rank)
            return false;
        red[ax] = true;
    }
    return true;
}

/* [outer, r, inner] of a reduction; false when the reduced dims are not one
 * block. */
static bool reduce_geom(const struct cp_graph *g, const struct cp_node *n, struct red_state *s)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0);
    int64_t xd[CP_MAX_RANK];
    int r = cp_fk_dims(x, xd);
    bool red[CP_MAX_RANK];
    if (r < 0 || !reduce_axes(g, n, r, red))
        return false;
    int phase = 0; /* 0: outer, 1: reduced block, 2: inner */
    s->outer = s->r = s->inner = 1;
    for (int i = 0; i < r; i++) {
        if (xd[i] == 1)
            continue;
        if (red[i]) {
            if (phase == 2)
                return false;
            phase = 1;
            s->r *= xd[i];
        } else if (phase == 0) {
            s->outer *= xd[i];
        } else {
            phase = 2;
            s->inner *= xd[i];
        }
    }
    return cp_shape_numel(&x->shape) > 0;
}

static bool reduce_supports(const struct cp_graph *g, const struct cp_node *n)
{
    struct red_state s;
    if (n->n_inputs < 1 || n->n_inputs > 2 || n->n_outputs != 1 ||
        !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) || !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    if (n->n_inputs == 2 && !(n->op == CP_OP_REDUCE_SUM && cp_fk_opset(g) >= 13))
        return false;
    if (!reduce_geom(g, n, &s))
        return false;
    return cp_shape_numel(&cp_fk_out(g, n, 0)->shape) == s.outer * s.inner;
}

static bool gap_supports(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *x = cp_fk_in(g, n, 0);
    if (n->n_inputs != 1 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) || x->shape.rank < 3)
        return false;
    /* Plain planes, or an NHWC / blocked tensor pooled into the same
     * layout: the planes are then strided rows (see gap_geom). oneDNN 2.6
     * has only its reference loop for nChw16c pooling on AVX2, and
     * squeeze-excitation blocks run one per block. */
    const struct cp_tensor *y = cp_fk_out(g, n, 0);
    if (!(cp_tensor_is_plain(x) && cp_tensor_is_plain(y)) &&
        (x->layout != y->layout || x->shape.rank != 4))
        return false;
    return cp_shape_numel(&x->shape) > 0;
}

/* GlobalAveragePool as a reduction of the middle axis of [outer, r, inner]:
 * plain [N*C, H*W, 1], NHWC [N, H*W, C], nChw{B}c [N*C/B, H*W, B]. */
static void gap_geom(const struct cp_tensor *x, struct red_state *s)
{
    int64_t n = x->shape.dims[0].value, c = x->shape.dims[1].value;
    int64_t plane = cp_shape_numel(&x->shape) / (n * c);
    int block = cp_layout_block(x->layout);
    s->kind = RED_MEAN;
    s->r = plane;
    if (x->layout == CP_LAYOUT_NHWC) {
        s->outer = n;
        s->inner = c;
    } else if (block > 0) {
        s->outer = n * (c / block);
        s->inner = block;
    } else {
        s->outer = n * c;
        s->inner = 1;
    }
}

static enum cp_status reduce_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct red_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    if (k->node->op == CP_OP_GLOBAL_AVERAGE_POOL) {
        gap_geom(k->in[0], s);
    } else {
        if (!reduce_geom(k->g, k->node, s)) {
            free(s);
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': unsupported axes", k->node->name);
        }
        s->kind = k->node->op == CP_OP_REDUCE_MAX    ? RED_MAX
                  : k->node->op == CP_OP_REDUCE_MEAN ? RED_MEAN
                                                     : RED_SUM;
    }
    k->state = s;
    return CP_OK;
}

CP_FK_HOT static void reduce_rows(enum red_kind kind, const float *x, float *y, int64_t r,
                                  int64_t o0, int64_t o1)
{
    for (int64_t o = o0; o < o1; o++) {
        const float *row = x + o * r;
        if (kind == RED_MAX) {
            float m = row[0];
#pragma omp simd reduction(max : m)
            for (int64_t i = 0; i < r; i++)
                m = row[i] > m ? row[i] : m;
            y[o] = m;
        } else {
            double sum = 0.0;
#pragma omp simd reduction(+ : sum)
            for (int64_t i = 0; i < r; i++)
                sum += row[i];
            y[o] = (float)(kind == RED_MEAN ? sum / (double)r : sum);
        }
    }
}

#define BLOCK 256

/* Reduce the middle dim of [outer, r, inner] for output columns
 * [c0, c1) of the flattened [outer, inner] output. */
CP_FK_HOT static void reduce_mid(enum red_kind kind, const float *x, float *y, int64_t r,
                                 int64_t inner, int64_t c0, int64_t c1)
{
    double acc[BLOCK];
    float mx[BLOCK];
    for (int64_t c = c0; c < c1;) {
        int64_t o = c / inner, j0 = c % inner;
        int64_t len = inner - j0 < BLOCK ? inner - j0 : BLOCK;
        if (len > c1 - c)
            len = c1 - c;
        const float *base = x + o * r * inner + j0;
        if (kind == RED_MAX) {
            for (int64_t j = 0; j < len; j++)
                mx[j] = base[j];
            for (int64_t i = 1; i < r; i++)
                for (int64_t j = 0; j < len; j++)
                    mx[j] = base[i * inner + j] > mx[j] ? base[i * inner + j] : mx[j];
            for (int64_t j = 0; j < len; j++)
                y[c + j] = mx[j];
        } else {
            for (int64_t j = 0; j < len; j++)
                acc[j] = 0.0;
            for (int64_t i = 0; i < r; i++)
                for (int64_t j = 0; j < len; j++)
                    acc[j] += base[i * inner + j];
            double scale = kind == RED_MEAN ? 1.0 / (double)r : 1.0;
            for (int64_t j = 0; j < len; j++)
                y[c + j] = (float)(acc[j] * scale);
        }
        c += len;
    }
}

static enum cp_status reduce_run(struct cp_kexec *k)
{
    const struct red_state *s = k->state;
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int64_t total = s->outer * s->r * s->inner;
    int nt = cp_fk_threads(k, total, 32768);
    if (s->inner == 1) {
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            int64_t b, e;
            cp_fk_split(s->outer, 1, &b, &e);
            reduce_rows(s->kind, x, y, s->r, b, e);
        }
    } else {
#pragma omp parallel num_threads(nt) if (nt > 1)
        {
            int64_t b, e;
            cp_fk_split(s->outer * s->inner, 16, &b, &e);
            reduce_mid(s->kind, x, y, s->r, s->inner, b, e);
        }
    }
    return CP_OK;
}

static void state_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

const struct cp_kernel cp_fast_reduce_mean = {
    "c:reduce", CP_OP_REDUCE_MEAN, reduce_supports, reduce_prepare, reduce_run, state_release,
    NULL};
const struct cp_kernel cp_fast_reduce_sum = {
    "c:reduce", CP_OP_REDUCE_SUM, reduce_supports, reduce_prepare, reduce_run, state_release, NULL};
const struct cp_kernel cp_fast_reduce_max = {
    "c:reduce", CP_OP_REDUCE_MAX, reduce_supports, reduce_prepare, reduce_run, state_release, NULL};
const struct cp_kernel cp_fast_global_avg_pool = {
    "c:reduce", CP_OP_GLOBAL_AVERAGE_POOL, gap_supports, reduce_prepare, reduce_run, state_release,
    NULL};

/* ---- InstanceNormalization ------------------------------------------- */

struct in_state {
    int64_t nc, c, plane;
    float eps;
};

static bool in_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 3 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32) || !cp_fk_in_is(g, n, 2, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0);
    if (x->shape.rank < 3 || cp_shape_numel(&x->shape) <= 0)
        return false;
    int64_t C = x->shape.dims[1].value;
    return cp_shape_numel(&cp_fk_in(g, n, 1)->shape) == C &&
           cp_shape_numel(&cp_fk_in(g, n, 2)->shape) == C &&
           cp_shape_equal(&x->shape, &cp_fk_out(g, n, 0)->shape);
}

static enum cp_status in_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct in_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    const struct cp_tensor *x = k->in[0];
    s->c = x->shape.dims[1].value;
    s->nc = x->shape.dims[0].value * s->c;
    s->plane = cp_shape_numel(&x->shape) / s->nc;
    s->eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    k->state = s;
    return CP_OK;
}

CP_FK_HOT static void in_plane(const float *x, float *y, int64_t n, float scale, float bias,
                               float eps)
{
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < n; i++)
        sum += x[i];
    double mean = sum / (double)n;
    double sq = 0.0;
#pragma omp simd reduction(+ : sq)
    for (int64_t i = 0; i < n; i++) {
        double dv = (double)x[i] - mean;
        sq += dv * dv;
    }
    double var = sq / (double)n;
    float a = (float)((double)scale / sqrt(var + (double)eps));
    float m = (float)mean;
    for (int64_t i = 0; i < n; i++)
        y[i] = (x[i] - m) * a + bias;
}

static enum cp_status in_run(struct cp_kexec *k)
{
    const struct in_state *s = k->state;
    const float *x = k->in_data[0], *scale = k->in_data[1], *bias = k->in_data[2];
    float *y = k->out_data[0];
    int nt = cp_fk_threads(k, s->nc * s->plane, 16384);
    if (nt > s->nc)
        nt = (int)s->nc;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t p = 0; p < s->nc; p++) {
        int64_t c = p % s->c;
        in_plane(x + p * s->plane, y + p * s->plane, s->plane, scale[c], bias[c], s->eps);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_instance_norm = {"c:instance_norm",
                                                CP_OP_INSTANCE_NORMALIZATION,
                                                in_supports,
                                                in_prepare,
                                                in_run,
                                                state_release,
                                                NULL};

/* ---- BatchNormalization (inference) ---------------------------------------- */

/* y = (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + bias[c]: a
 * per-channel affine map, far cheaper in a loop than a primitive call for
 * the small activations of a CNN. The tensor is read as [outer, pixels,
 * lanes] with channel (o % blocks) * lanes + lane: plain [N*C, HW, 1],
 * NHWC [N, HW, C], nChw{B}c [N*C/B, HW, B], so a norm inside a layout
 * region (DenseNet's after every Concat) needs no TransData. */
struct bn_state {
    int64_t outer, pixels, lanes, blocks;
    float eps;
    bool folded; /* a (scale) and b (shift) computed once, in prepare */
    float *a, *b;
};

static bool bn_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 5 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32) || cp_node_attr_int(n, "training_mode", 0) != 0)
        return false;
    for (size_t i = 1; i < n->n_outputs; i++)
        if (n->outputs[i] >= 0)
            return false;
    const struct cp_tensor *x = cp_fk_in(g, n, 0), *y = cp_fk_out(g, n, 0);
    if (x->shape.rank < 2 || !cp_shape_equal(&x->shape, &y->shape) ||
        cp_shape_numel(&x->shape) <= 0)
        return false;
    if (!(cp_tensor_is_plain(x) && cp_tensor_is_plain(y)) &&
        (x->layout != y->layout || x->shape.rank != 4))
        return false;
    for (size_t i = 1; i < 5; i++)
        if (!cp_fk_in_is(g, n, i, CP_DTYPE_F32) ||
            cp_shape_numel(&cp_fk_in(g, n, i)->shape) != x->shape.dims[1].value)
            return false;
    return true;
}

/* y = x * a + b per channel, from scale, bias, mean and var (in double). */
static void bn_factors(int64_t c, const float *sc, const float *bi, const float *mean,
                       const float *var, float eps, float *a, float *b)
{
    for (int64_t i = 0; i < c; i++) {
        double f = (double)sc[i] / sqrt((double)var[i] + (double)eps);
        a[i] = (float)f;
        b[i] = (float)((double)bi[i] - (double)mean[i] * f);
    }
}

static enum cp_status bn_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct bn_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    const struct cp_tensor *x = k->in[0];
    int64_t n = x->shape.dims[0].value, c = x->shape.dims[1].value;
    int block = cp_layout_block(x->layout);
    s->pixels = cp_shape_numel(&x->shape) / (n * c);
    if (x->layout == CP_LAYOUT_NHWC) {
        s->lanes = c;
        s->blocks = 1;
    } else {
        s->lanes = block > 0 ? block : 1;
        s->blocks = c / s->lanes;
    }
    s->outer = n * s->blocks;
    s->eps = cp_node_attr_float(k->node, "epsilon", 1e-5f);
    k->state = s;
    /* constant parameters (every inference model's): y = x * a + b with
     * a and b made here, not per run (1024 divisions and square roots
     * cost as much as normalising a 4x4 map) */
    const float *p[4];
    s->folded = true;
    for (int i = 0; i < 4; i++) {
        const struct cp_tensor *t = k->in[i + 1];
        p[i] = t->kind == CP_TENSOR_INITIALIZER ? t->data : NULL;
        s->folded = s->folded && p[i];
    }
    if (s->folded) {
        s->a = malloc((size_t)(2 * c) * sizeof(float));
        if (!s->a)
            return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
        s->b = s->a + c;
        bn_factors(c, p[0], p[1], p[2], p[3], s->eps, s->a, s->b);
        return CP_OK;
    }
    k->scratch_bytes = (size_t)(2 * c) * sizeof(float);
    return CP_OK;
}

static void bn_release(struct cp_kexec *k)
{
    struct bn_state *s = k->state;
    if (s)
        free(s->a);
    free(s);
    k->state = NULL;
}

/* One [pixels, lanes] slab: lane j is channel c0 + j, y = x * a[j] + b[j]. */
CP_FK_HOT static void bn_slab(const float *x, float *y, int64_t pixels, int64_t lanes,
                              const float *a, const float *b)
{
    if (lanes == 1) {
        for (int64_t i = 0; i < pixels; i++)
            y[i] = x[i] * a[0] + b[0];
        return;
    }
    for (int64_t p = 0; p < pixels; p++)
        for (int64_t j = 0; j < lanes; j++)
            y[p * lanes + j] = x[p * lanes + j] * a[j] + b[j];
}

static enum cp_status bn_run(struct cp_kexec *k)
{
    const struct bn_state *s = k->state;
    const float *x = k->in_data[0], *sc = k->in_data[1], *bi = k->in_data[2], *mean = k->in_data[3],
                *var = k->in_data[4];
    float *y = k->out_data[0];
    int64_t c = s->blocks * s->lanes, slab = s->pixels * s->lanes;
    const float *a = s->a, *b = s->b;
    if (!s->folded) {
        float *sa = k->scratch, *sb = sa + c;
        bn_factors(c, sc, bi, mean, var, s->eps, sa, sb);
        a = sa;
        b = sb;
    }
    int nt = cp_fk_threads(k, s->outer * slab, 32768);
    if (nt > s->outer)
        nt = (int)s->outer;
#pragma omp parallel for num_threads(nt) if (nt > 1) schedule(static)
    for (int64_t o = 0; o < s->outer; o++) {
        int64_t c0 = (o % s->blocks) * s->lanes;
        bn_slab(x + o * slab, y + o * slab, s->pixels, s->lanes, a + c0, b + c0);
    }
    return CP_OK;
}

const struct cp_kernel cp_fast_batch_norm = {
    "c:batch_norm", CP_OP_BATCH_NORMALIZATION, bn_supports, bn_prepare, bn_run, bn_release, NULL};
