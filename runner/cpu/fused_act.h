/*
 * Private to runner/cpu: the fused activation of FusedConv, FusedMatMul and
 * GroupNormalization (graph.h), as the kernels read it from a node.
 *
 * cp_act_ref is the reference definition (libm, double where it matters);
 * cp_act_row applies an activation to a row with the branch-free
 * approximations of fast_math.h, one loop per kind so each vectorises;
 * cp_act_dnnl maps an activation onto a oneDNN eltwise post-op.
 */
#ifndef CP_RUNNER_FUSED_ACT_H
#define CP_RUNNER_FUSED_ACT_H

#include "graph/graph.h"
#include "runner/cpu/fast_math.h"

#include <float.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <string.h>

enum cp_act_kind {
    CP_ACT_NONE = 0,
    CP_ACT_RELU,
    CP_ACT_LEAKY_RELU,
    CP_ACT_CLIP,
    CP_ACT_SIGMOID,
    CP_ACT_SILU,
    CP_ACT_GELU,
    CP_ACT_GELU_TANH,
    CP_ACT_BAD
};

struct cp_act {
    enum cp_act_kind kind;
    float alpha, beta;
};

/* The activation attributes of a node; kind CP_ACT_BAD when unknown. */
static inline struct cp_act cp_act_of(const struct cp_node *n)
{
    static const char *const names[] = {"",        "Relu", "LeakyRelu", "Clip",
                                        "Sigmoid", "SiLU", "Gelu",      "GeluTanh"};
    const char *s = cp_node_attr_string(n, "activation", "");
    struct cp_act a = {CP_ACT_BAD, 0.0f, 0.0f};
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(s, names[i]) == 0)
            a.kind = (enum cp_act_kind)i;
    if (a.kind == CP_ACT_LEAKY_RELU)
        a.alpha = cp_node_attr_float(n, "activation_alpha", 0.01f);
    if (a.kind == CP_ACT_CLIP) {
        a.alpha = cp_node_attr_float(n, "activation_alpha", -FLT_MAX);
        a.beta = cp_node_attr_float(n, "activation_beta", FLT_MAX);
    }
    return a;
}

/* sqrt(2/pi) and the cubic coefficient of the tanh form of GELU. */
#define CP_GELU_TANH_K 0.7978845608028654
#define CP_GELU_TANH_C 0.044715

static inline float cp_act_ref(const struct cp_act *a, float x)
{
    switch (a->kind) {
    case CP_ACT_RELU:
        return x > 0.0f ? x : 0.0f;
    case CP_ACT_LEAKY_RELU:
        return x >= 0.0f ? x : a->alpha * x;
    case CP_ACT_CLIP:
        return x < a->alpha ? a->alpha : (x > a->beta ? a->beta : x);
    case CP_ACT_SIGMOID:
        return (float)(1.0 / (1.0 + exp(-(double)x)));
    case CP_ACT_SILU:
        return (float)((double)x / (1.0 + exp(-(double)x)));
    case CP_ACT_GELU:
        return (float)(0.5 * x * (1.0 + erf((double)x / sqrt(2.0))));
    case CP_ACT_GELU_TANH: {
        double u = CP_GELU_TANH_K * ((double)x + CP_GELU_TANH_C * (double)x * x * x);
        return (float)(0.5 * x * (1.0 + tanh(u)));
    }
    default:
        return x;
    }
}

/* tanh(u) = 1 - 2 / (e^(2u) + 1), vectorisable. */
__attribute__((always_inline)) static inline float cp_act_tanh(float u)
{
    return 1.0f - 2.0f / (cp_fm_exp(2.0f * u) + 1.0f);
}

__attribute__((always_inline)) static inline float cp_act_gelu(float x)
{
    return 0.5f * x * (1.0f + cp_fm_erf(x * 0.70710678118654752f));
}

__attribute__((always_inline)) static inline float cp_act_gelu_tanh(float x)
{
    float u = (float)CP_GELU_TANH_K * (x + (float)CP_GELU_TANH_C * x * x * x);
    return 0.5f * x * (1.0f + cp_act_tanh(u));
}

/* y[i] = act(y[i]) for i < n. Always inlined, so that it is compiled for
 * the ISA of the hot (target_clones) function that calls it. */
__attribute__((always_inline)) static inline void cp_act_row(const struct cp_act *a, float *y,
                                                             int64_t n)
{
    float al = a->alpha, be = a->beta;
    switch (a->kind) {
    case CP_ACT_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] > 0.0f ? y[i] : 0.0f;
        break;
    case CP_ACT_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] >= 0.0f ? y[i] : al * y[i];
        break;
    case CP_ACT_CLIP:
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] < al ? al : (y[i] > be ? be : y[i]);
        break;
    case CP_ACT_SIGMOID:
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_fm_sigmoid(y[i]);
        break;
    case CP_ACT_SILU:
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] * cp_fm_sigmoid(y[i]);
        break;
    case CP_ACT_GELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_act_gelu(y[i]);
        break;
    case CP_ACT_GELU_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_act_gelu_tanh(y[i]);
        break;
    default:
        break;
    }
}

/* The oneDNN eltwise algorithm and its alpha/beta. False for none. */
static inline bool cp_act_dnnl(const struct cp_act *a, dnnl_alg_kind_t *alg, float *alpha,
                               float *beta)
{
    *alpha = 0.0f;
    *beta = 0.0f;
    switch (a->kind) {
    case CP_ACT_RELU:
        *alg = dnnl_eltwise_relu;
        return true;
    case CP_ACT_LEAKY_RELU:
        *alg = dnnl_eltwise_relu;
        *alpha = a->alpha;
        return true;
    case CP_ACT_CLIP:
        *alg = dnnl_eltwise_clip;
        *alpha = a->alpha;
        *beta = a->beta;
        return true;
    case CP_ACT_SIGMOID:
        *alg = dnnl_eltwise_logistic;
        return true;
    case CP_ACT_SILU:
        *alg = dnnl_eltwise_swish;
        *alpha = 1.0f;
        return true;
    case CP_ACT_GELU:
        *alg = dnnl_eltwise_gelu_erf;
        return true;
    case CP_ACT_GELU_TANH:
        *alg = dnnl_eltwise_gelu_tanh;
        return true;
    default:
        return false;
    }
}

#endif
