/*
 * Private to runner/cpu: the fast forms of the fused activation of
 * FusedConv, FusedMatMul and GroupNormalization.
 *
 * The activation itself (its names, how a node carries it, cp_act_of, and
 * its reference definition cp_act_ref) is graph/op_eval.h's, shared with
 * the fusion passes that write it. Here: cp_act_row applies an activation
 * to a row with the branch-free approximations of fast_math.h, one loop per
 * kind so each vectorises; cp_act_dnnl maps an activation onto a oneDNN
 * eltwise post-op.
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
