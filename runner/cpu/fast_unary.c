/*
 * Elementwise unary ops on f32: Relu, LeakyRelu, Sigmoid, Exp, Sqrt, Clip,
 * Erf and Pow with a scalar exponent. Plain loops the compiler vectorises
 * (exp and erf come from fast_math.h), cloned for AVX-512, AVX2 and the
 * baseline, and split over threads when the tensor is large enough.
 *
 * Pow special-cases the exponents models actually use (2, 3, 0.5, 1, -1,
 * 0): x*x is exactly what powf(x, 2) returns, sqrtf what powf(x, 0.5)
 * returns for every x >= 0 (they differ only at -0 and -inf).
 *
 * Erf with impl "exact" (ImplModePass, --op_select_implmode=high_precision)
 * calls libm's erff instead of the polynomial.
 */
#include "runner/cpu/fast_util.h"
#include "runner/cpu/fast_math.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define GRAIN 16384

enum un_kind {
    UN_RELU,
    UN_LEAKY,
    UN_SIGMOID,
    UN_EXP,
    UN_SQRT,
    UN_CLIP,
    UN_ERF,
    UN_ERF_EXACT,
    UN_POW,
};

struct unary_state {
    enum un_kind kind;
    float alpha; /* LeakyRelu slope */
    int64_t n;
};

static bool scalar_f32_input(const struct cp_graph *g, const struct cp_node *n, size_t i)
{
    const struct cp_tensor *t = cp_fk_in(g, n, i);
    if (!t)
        return true; /* absent optional input */
    return t->dtype == CP_DTYPE_F32 && cp_shape_is_static(&t->shape) &&
           cp_shape_numel(&t->shape) == 1;
}

static bool unary_supports(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->n_inputs < 1 || n->n_outputs != 1 || !cp_fk_in_is(g, n, 0, CP_DTYPE_F32) ||
        !cp_fk_out_is(g, n, 0, CP_DTYPE_F32))
        return false;
    if (!cp_shape_equal(&cp_fk_in(g, n, 0)->shape, &cp_fk_out(g, n, 0)->shape))
        return false;
    switch (n->op) {
    case CP_OP_CLIP:
        /* before opset 11 the bounds are attributes: the reference's */
        return cp_fk_opset(g) >= 11 && n->n_inputs <= 3 && scalar_f32_input(g, n, 1) &&
               scalar_f32_input(g, n, 2);
    case CP_OP_POW:
        return n->n_inputs == 2 && cp_fk_in(g, n, 1) && scalar_f32_input(g, n, 1);
    default:
        return n->n_inputs == 1;
    }
}

static enum cp_status unary_prepare(struct cp_kexec *k, struct cp_diag *d)
{
    struct unary_state *s = calloc(1, sizeof *s);
    if (!s)
        return cp_diag_set(d, CP_ERR_NOMEM, "node '%s': out of memory", k->node->name);
    switch (k->node->op) {
    case CP_OP_RELU:
        s->kind = UN_RELU;
        break;
    case CP_OP_LEAKY_RELU:
        s->kind = UN_LEAKY;
        s->alpha = cp_node_attr_float(k->node, "alpha", 0.01f);
        break;
    case CP_OP_SIGMOID:
        s->kind = UN_SIGMOID;
        break;
    case CP_OP_EXP:
        s->kind = UN_EXP;
        break;
    case CP_OP_SQRT:
        s->kind = UN_SQRT;
        break;
    case CP_OP_CLIP:
        s->kind = UN_CLIP;
        break;
    case CP_OP_ERF:
        s->kind = strcmp(cp_node_attr_string(k->node, "impl", "fast"), "exact") == 0 ? UN_ERF_EXACT
                                                                                     : UN_ERF;
        break;
    default:
        s->kind = UN_POW;
        break;
    }
    s->n = cp_shape_numel(&k->in[0]->shape);
    k->state = s;
    return CP_OK;
}

CP_FK_HOT static void unary_span(enum un_kind kind, float p0, float p1, const float *x, float *y,
                                 int64_t n)
{
    switch (kind) {
    case UN_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
        break;
    case UN_LEAKY:
        for (int64_t i = 0; i < n; i++)
            y[i] = x[i] >= 0.0f ? x[i] : x[i] * p0;
        break;
    case UN_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_fm_sigmoid(x[i]);
        break;
    case UN_EXP:
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_fm_exp(x[i]);
        break;
    case UN_SQRT:
        for (int64_t i = 0; i < n; i++)
            y[i] = sqrtf(x[i]);
        break;
    case UN_CLIP:
        for (int64_t i = 0; i < n; i++) {
            float v = x[i] < p0 ? p0 : x[i];
            y[i] = v > p1 ? p1 : v;
        }
        break;
    case UN_ERF:
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_fm_erf(x[i]);
        break;
    case UN_ERF_EXACT:
        for (int64_t i = 0; i < n; i++)
            y[i] = erff(x[i]);
        break;
    case UN_POW:
        if (p0 == 2.0f) {
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] * x[i];
        } else if (p0 == 3.0f) {
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i] * x[i] * x[i];
        } else if (p0 == 0.5f) {
            for (int64_t i = 0; i < n; i++)
                y[i] = sqrtf(x[i]);
        } else if (p0 == 1.0f) {
            for (int64_t i = 0; i < n; i++)
                y[i] = x[i];
        } else if (p0 == -1.0f) {
            for (int64_t i = 0; i < n; i++)
                y[i] = 1.0f / x[i];
        } else if (p0 == 0.0f) {
            for (int64_t i = 0; i < n; i++)
                y[i] = 1.0f;
        } else {
            for (int64_t i = 0; i < n; i++)
                y[i] = powf(x[i], p0);
        }
        break;
    }
}

static enum cp_status unary_run(struct cp_kexec *k)
{
    const struct unary_state *s = k->state;
    float p0 = s->alpha, p1 = 0.0f;
    if (s->kind == UN_CLIP) {
        p0 = k->node->n_inputs > 1 && k->in_data[1] ? *(const float *)k->in_data[1] : -INFINITY;
        p1 = k->node->n_inputs > 2 && k->in_data[2] ? *(const float *)k->in_data[2] : INFINITY;
    } else if (s->kind == UN_POW) {
        p0 = *(const float *)k->in_data[1];
    }
    const float *x = k->in_data[0];
    float *y = k->out_data[0];
    int64_t n = s->n;
    /* Transcendental ops are worth threading at smaller sizes. */
    int64_t grain =
        (s->kind == UN_ERF || s->kind == UN_ERF_EXACT || s->kind == UN_SIGMOID || s->kind == UN_EXP)
            ? GRAIN / 4
            : GRAIN;
    int nt = cp_fk_threads(k, n, grain);
    if (nt <= 1) {
        unary_span(s->kind, p0, p1, x, y, n);
        return CP_OK;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t b, e;
        cp_fk_split(n, 16, &b, &e);
        unary_span(s->kind, p0, p1, x + b, y + b, e - b);
    }
    return CP_OK;
}

static void unary_release(struct cp_kexec *k)
{
    free(k->state);
    k->state = NULL;
}

#define UNARY_KERNEL(var, opv)                                                                     \
    const struct cp_kernel var = {"c:unary_f32", opv, unary_supports, unary_prepare, unary_run,    \
                                  unary_release, NULL}

UNARY_KERNEL(cp_fast_relu, CP_OP_RELU);
UNARY_KERNEL(cp_fast_leaky_relu, CP_OP_LEAKY_RELU);
UNARY_KERNEL(cp_fast_sigmoid, CP_OP_SIGMOID);
UNARY_KERNEL(cp_fast_exp, CP_OP_EXP);
UNARY_KERNEL(cp_fast_sqrt, CP_OP_SQRT);
UNARY_KERNEL(cp_fast_clip, CP_OP_CLIP);
UNARY_KERNEL(cp_fast_erf, CP_OP_ERF);
UNARY_KERNEL(cp_fast_pow, CP_OP_POW);
