/*
 * Private to runner/cpu: the fast forms of the fused activation of
 * FusedConv, FusedMatMul and GroupNormalization.
 *
 * The activation itself (its names, how a node carries it, cp_act_of, and
 * its reference definition cp_act_ref) is graph/op_eval.h's, shared with
 * the fusion passes that write it. Here: cp_act_row applies an activation
 * to a row with the branch-free approximations of fast_math.h, one loop per
 * kind so each vectorises; cp_act_dnnl_append maps an activation onto oneDNN
 * eltwise post-ops.
 */
#ifndef CP_RUNNER_FUSED_ACT_H
#define CP_RUNNER_FUSED_ACT_H

#include "graph/op_eval.h"
#include "runner/cpu/fast_math.h"

#include <float.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <string.h>

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
    case CP_ACT_HARD_SWISH:
        for (int64_t i = 0; i < n; i++) {
            float g = y[i] * (1.0f / 6.0f) + 0.5f;
            y[i] *= g < 0.0f ? 0.0f : (g > 1.0f ? 1.0f : g);
        }
        break;
    case CP_ACT_HARD_SIGMOID:
        for (int64_t i = 0; i < n; i++) {
            float g = al * y[i] + be;
            y[i] = g < 0.0f ? 0.0f : (g > 1.0f ? 1.0f : g);
        }
        break;
    case CP_ACT_ELU:
        for (int64_t i = 0; i < n; i++)
            y[i] = y[i] < 0.0f ? al * (cp_fm_exp(y[i]) - 1.0f) : y[i];
        break;
    case CP_ACT_TANH:
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_act_tanh(y[i]);
        break;
    case CP_ACT_SOFTPLUS:
    case CP_ACT_MISH: /* libm: log1p has no fast form here */
        for (int64_t i = 0; i < n; i++)
            y[i] = cp_act_ref(a, y[i]);
        break;
    default:
        break;
    }
}

/* The oneDNN eltwise algorithm and its alpha/beta for post-op `part` of
 * the activation: one post-op each, but HardSigmoid, which takes two
 * (linear, then clip to [0, 1]). False past the last (at once for none). */
static inline bool cp_act_dnnl_part(const struct cp_act *a, int part, dnnl_alg_kind_t *alg,
                                    float *alpha, float *beta)
{
    *alpha = 0.0f;
    *beta = 0.0f;
    if (a->kind == CP_ACT_HARD_SIGMOID) {
        *alg = part == 0 ? dnnl_eltwise_linear : dnnl_eltwise_clip;
        *alpha = part == 0 ? a->alpha : 0.0f;
        *beta = part == 0 ? a->beta : 1.0f;
        return part < 2;
    }
    if (part > 0)
        return false;
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
    case CP_ACT_HARD_SWISH: /* oneDNN 2.6: x * relu6(x + 3) / 6, as ONNX's */
        *alg = dnnl_eltwise_hardswish;
        return true;
    case CP_ACT_ELU:
        *alg = dnnl_eltwise_elu;
        *alpha = a->alpha;
        return true;
    case CP_ACT_SOFTPLUS: /* oneDNN 2.6: log(1 + e^x) */
        *alg = dnnl_eltwise_soft_relu;
        return true;
    case CP_ACT_MISH:
        *alg = dnnl_eltwise_mish;
        return true;
    case CP_ACT_TANH:
        *alg = dnnl_eltwise_tanh;
        return true;
    default:
        return false;
    }
}

/* Whether the node carries an activation (oneDNN has a form for each). */
static inline bool cp_act_has_dnnl(const struct cp_act *a)
{
    dnnl_alg_kind_t alg;
    float alpha, beta;
    return cp_act_dnnl_part(a, 0, &alg, &alpha, &beta);
}

/* Append the activation's eltwise post-ops to po. OUT: *count, how many. */
static inline dnnl_status_t cp_act_dnnl_append(const struct cp_act *a, dnnl_post_ops_t po,
                                               int *count)
{
    dnnl_alg_kind_t alg;
    float alpha, beta;
    dnnl_status_t s = dnnl_success;
    *count = 0;
    for (int part = 0; s == dnnl_success && cp_act_dnnl_part(a, part, &alg, &alpha, &beta);
         part++) {
        s = dnnl_post_ops_append_eltwise(po, 1.0f, alg, alpha, beta);
        ++*count;
    }
    return s;
}

#endif
