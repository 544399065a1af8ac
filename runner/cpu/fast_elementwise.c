/*
 * The elementwise family's f32 ops that real models spend time in, as
 * plain loops the compiler vectorises, cloned per ISA level (CP_FK_HOT) and
 * split over threads when large:
 *  - unary: HardSwish, HardSigmoid, Elu, Softplus, Mish, Neg, Reciprocal,
 *    Abs, Floor, Ceil, Log, Sin, Cos (exp from fast_math.h; log, sin, cos
 *    and log1p from libm);
 *  - PRelu with its slope broadcast to the input;
 *  - Max and Min of two inputs (NaN wins, as the reference), and the
 *    comparisons Greater, Less, GreaterOrEqual, LessOrEqual into bool,
 *    both with numpy broadcasting.
 * The reference kernels (graph/op_eval_elementwise.h) compute in double;
 * these stay in f32, within the kernel harness's tolerance.
 */
#include "graph/op_eval.h" /* cp_walk */
#include "runner/cpu/fast_math.h"
#include "runner/cpu/fast_util.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#define GRAIN 16384

/* ---- unary -------------------------------------------------------------------------------- */

static bool un_supports(const struct cp_graph *g, const struct cp_node *n)
{
    return n->n_inputs == 1 && n->n_outputs == 1 && cp_fk_in_is(g, n, 0, CP_DTYPE_F32) &&
           cp_fk_out_is(g, n, 0, CP_DTYPE_F32) &&
           cp_shape_equal(&cp_fk_in(g, n, 0)->shape, &cp_fk_out(g, n, 0)->shape);
}

struct un_state {
    enum cp_op op;
    float alpha, beta;
    int64_t n;
};

static enum cp_status un_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct un_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    struct cp_ew_params p;
    cp_ew_params_of(k->node, &p);
    s->op = k->node->op;
    s->alpha = (float)p.alpha;
    s->beta = (float)p.beta;
    s->n = cp_shape_numel(&k->in[0]->shape);
    k->state = s;
    return CP_OK;
}

static void un_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

/* x * tanh(softplus(x)) = x * m / (m + 2) with m = e^x (e^x + 2); past 20
 * the ratio is 1 in f32 (and e^2x would overflow). */
static inline float mish_f32(float x)
{
    float e = cp_fm_exp(x < 20.0f ? x : 20.0f);
    float m = e * (e + 2.0f);
    return x >= 20.0f ? x : x * m / (m + 2.0f);
}

CP_FK_HOT static void un_span(enum cp_op op, float alpha, float beta, const float *x, float *y,
                              int64_t n)
{
    switch (op) {
    case CP_OP_HARD_SWISH:
        for (int64_t i = 0; i < n; i++) {
            float t = x[i] * (1.0f / 6.0f) + 0.5f;
            t = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
            y[i] = x[i] * t;
        }
        break;
    case CP_OP_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) {
            float t = alpha * x[i] + beta;
            y[i] = t < 0.0f ? 0.0f : t > 1.0f ? 1.0f : t;
        }
        break;
    case CP_OP_ELU:
        for (int64_t i = 0; i < n; i++) {
            float e = cp_fm_exp(x[i] < 0.0f ? x[i] : 0.0f);
            y[i] = x[i] < 0.0f ? alpha * (e - 1.0f) : x[i];
        }
        break;
    case CP_OP_SOFTPLUS:
        for (int64_t i = 0; i < n; i++) {
            float a = fabsf(x[i]);
            float e = cp_fm_exp(-a);
            y[i] = (x[i] > 0.0f ? x[i] : 0.0f) + log1pf(e);
        }
        break;
    case CP_OP_MISH:
        for (int64_t i = 0; i < n; i++)
            y[i] = mish_f32(x[i]);
        break;
    case CP_OP_NEG:
        for (int64_t i = 0; i < n; i++)
            y[i] = -x[i];
        break;
    case CP_OP_RECIPROCAL:
        for (int64_t i = 0; i < n; i++)
            y[i] = 1.0f / x[i];
        break;
    case CP_OP_ABS:
        for (int64_t i = 0; i < n; i++)
            y[i] = fabsf(x[i]);
        break;
    case CP_OP_FLOOR:
        for (int64_t i = 0; i < n; i++)
            y[i] = floorf(x[i]);
        break;
    case CP_OP_CEIL:
        for (int64_t i = 0; i < n; i++)
            y[i] = ceilf(x[i]);
        break;
    case CP_OP_LOG:
        for (int64_t i = 0; i < n; i++)
            y[i] = logf(x[i]);
        break;
    case CP_OP_SIN:
        for (int64_t i = 0; i < n; i++)
            y[i] = sinf(x[i]);
        break;
    default: /* CP_OP_COS */
        for (int64_t i = 0; i < n; i++)
            y[i] = cosf(x[i]);
        break;
    }
}

static enum cp_status un_run(struct cp_kexec *k)
{
    const struct un_state *s = k->state;
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int nt = cp_fk_threads(k, s->n, GRAIN / 4);
    if (nt <= 1) {
        un_span(s->op, s->alpha, s->beta, x, y, s->n);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(s->n, 16, &b, &e);
        un_span(s->op, s->alpha, s->beta, x + b, y + b, e - b);
    }
    return CP_OK;
}

/* ---- binary: PRelu, Max, Min, comparisons -------------------------------------------------- */

static bool bin_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs != 2 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_in_is(g, n, 1, CP_DTYPE_F32))
        return false;
    const struct cp_tensor *a = cp_fk_in(g, n, 0), *b = cp_fk_in(g, n, 1);
    const struct cp_tensor *y = cp_fk_out(g, n, 0);
    bool cmp = n->op == CP_OP_GREATER || n->op == CP_OP_LESS || n->op == CP_OP_GREATER_OR_EQUAL ||
               n->op == CP_OP_LESS_OR_EQUAL;
    if (!cp_fk_out_is(g, n, 0, cmp ? CP_DTYPE_BOOL : CP_DTYPE_F32))
        return false;
    if (n->op == CP_OP_PRELU && !cp_shape_equal(&a->shape, &y->shape))
        return false;
    return cp_eval_broadcasts(&a->shape, &y->shape) && cp_eval_broadcasts(&b->shape, &y->shape);
}

/* One row: y[j] = a[j * sa] op b[j * sb], strides 0 or 1. */
CP_FK_HOT static void bin_row(enum cp_op op, const float *a, int64_t sa, const float *b, int64_t sb,
                              void *yv, int64_t n)
{
    float *y = yv;
    uint8_t *q = yv;
    switch (op) {
    case CP_OP_PRELU:
        if (sb == 0) {
            float s = b[0];
            for (int64_t j = 0; j < n; j++)
                y[j] = a[j * sa] < 0.0f ? a[j * sa] * s : a[j * sa];
        } else {
            for (int64_t j = 0; j < n; j++)
                y[j] = a[j * sa] < 0.0f ? a[j * sa] * b[j * sb] : a[j * sa];
        }
        break;
    case CP_OP_MAX:
        for (int64_t j = 0; j < n; j++) {
            float u = a[j * sa], v = b[j * sb];
            y[j] = (u > v || u != u) ? u : v;
        }
        break;
    case CP_OP_MIN:
        for (int64_t j = 0; j < n; j++) {
            float u = a[j * sa], v = b[j * sb];
            y[j] = (u < v || u != u) ? u : v;
        }
        break;
    case CP_OP_GREATER:
        for (int64_t j = 0; j < n; j++)
            q[j] = a[j * sa] > b[j * sb];
        break;
    case CP_OP_LESS:
        for (int64_t j = 0; j < n; j++)
            q[j] = a[j * sa] < b[j * sb];
        break;
    case CP_OP_GREATER_OR_EQUAL:
        for (int64_t j = 0; j < n; j++)
            q[j] = a[j * sa] >= b[j * sb];
        break;
    default: /* CP_OP_LESS_OR_EQUAL */
        for (int64_t j = 0; j < n; j++)
            q[j] = a[j * sa] <= b[j * sb];
        break;
    }
}

static enum cp_status bin_run(struct cp_kexec *k)
{
    const struct cp_tensor *y = k->out[0];
    struct cp_walk w;
    cp_walk_init(&w, &y->shape, 3);
    cp_walk_bcast(&w, 0, &y->shape);
    cp_walk_bcast(&w, 1, &k->in[0]->shape);
    cp_walk_bcast(&w, 2, &k->in[1]->shape);
    cp_walk_finish(&w);
    size_t es = cp_dtype_size(y->dtype);
    const float *a = k->in_data[0], *b = k->in_data[1];
    char *yd = k->out_data[0];
    enum cp_op op = k->node->op;
    int64_t sa = w.inner_stride[1], sb = w.inner_stride[2];
    if (w.rows == 1) {
        /* One long row: split it over threads. */
        int nt = cp_fk_threads(k, w.inner, GRAIN);
        if (nt <= 1) {
            bin_row(op, a, sa, b, sb, yd, w.inner);
            return CP_OK;
        }
#pragma omp parallel num_threads(nt)
        {
            int64_t lo, hi;
            cp_fk_split(w.inner, 16, &lo, &hi);
            bin_row(op, a + lo * sa, sa, b + lo * sb, sb, yd + lo * (int64_t)es, hi - lo);
        }
        return CP_OK;
    }
    struct cp_walk_pos p;
    cp_walk_start(&w, &p);
    for (int64_t r = 0; r < w.rows; r++) {
        bin_row(op, a + p.off[1], sa, b + p.off[2], sb, yd + p.off[0] * (int64_t)es, w.inner);
        cp_walk_next(&w, &p);
    }
    return CP_OK;
}

/* ---- the kernels ----------------------------------------------------------------------------- */

#define FAST_UN(var, opv)                                                                          \
    const struct cp_kernel var = {"c:elementwise_f32", opv, un_supports, un_prepare, un_run,       \
                                  un_release,          NULL}
#define FAST_BIN(var, opv)                                                                         \
    const struct cp_kernel var = {                                                                 \
        "c:elementwise_bcast_f32", opv, bin_supports, NULL, bin_run, NULL, NULL}

FAST_UN(cp_fast_hard_swish, CP_OP_HARD_SWISH);
FAST_UN(cp_fast_hard_sigmoid, CP_OP_HARD_SIGMOID);
FAST_UN(cp_fast_elu, CP_OP_ELU);
FAST_UN(cp_fast_softplus, CP_OP_SOFTPLUS);
FAST_UN(cp_fast_mish, CP_OP_MISH);
FAST_UN(cp_fast_neg, CP_OP_NEG);
FAST_UN(cp_fast_reciprocal, CP_OP_RECIPROCAL);
FAST_UN(cp_fast_abs, CP_OP_ABS);
FAST_UN(cp_fast_floor, CP_OP_FLOOR);
FAST_UN(cp_fast_ceil, CP_OP_CEIL);
FAST_UN(cp_fast_log, CP_OP_LOG);
FAST_UN(cp_fast_sin, CP_OP_SIN);
FAST_UN(cp_fast_cos, CP_OP_COS);
FAST_BIN(cp_fast_prelu, CP_OP_PRELU);
FAST_BIN(cp_fast_max2, CP_OP_MAX);
FAST_BIN(cp_fast_min2, CP_OP_MIN);
FAST_BIN(cp_fast_greater, CP_OP_GREATER);
FAST_BIN(cp_fast_less, CP_OP_LESS);
FAST_BIN(cp_fast_greater_or_equal, CP_OP_GREATER_OR_EQUAL);
FAST_BIN(cp_fast_less_or_equal, CP_OP_LESS_OR_EQUAL);
