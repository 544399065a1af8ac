/* The fusion pattern table and the matchers both the passes and the rule
 * engine run (see pattern.h). */
#include "graph/pattern.h"

#include <assert.h>

/* ---- the pattern table ---------------------------------------------------------------- */

static const struct cp_pattern_def patterns[] = {
    [CP_PATTERN_ATTENTION] = {"attention", CP_PASS_FLASH_ATTENTION,
                              "MatMul -> [Mul/Div scale] -> [Add mask] -> Softmax -> MatMul, with "
                              "the head split and merge Transposes that only feed it",
                              "fuse into one FusedAttention kernel that never writes the scores"},
    [CP_PATTERN_LAYERNORM] = {"layernorm", CP_PASS_LAYERNORM,
                              "ReduceMean -> Sub -> Pow/Mul -> ReduceMean -> Add -> Sqrt -> Div "
                              "[-> Mul gamma -> Add beta]",
                              "fuse into one LayerNormalization"},
    [CP_PATTERN_GROUPNORM] = {"groupnorm", CP_PASS_GROUPNORM,
                              "(Reshape) InstanceNormalization (Reshape) -> Mul -> Add [-> SiLU]",
                              "fuse into one GroupNormalization (with its SiLU)"},
    [CP_PATTERN_GELU] = {"gelu", CP_PASS_GELU, "Div/Mul -> Erf -> Add -> Mul -> Mul (erf form)",
                         "fuse into one Gelu"},
    [CP_PATTERN_GELU_TANH] = {"gelu", "",
                              "Pow/Mul -> Mul -> Add -> Mul -> Tanh -> Add -> Mul -> Mul (tanh "
                              "form)",
                              "no pass fuses the tanh form; GeluFusionPass fuses GELU exported "
                              "with approximate='none' (the erf form)"},
    [CP_PATTERN_CONV_ACT] = {"conv_act", CP_PASS_CONV_BIAS_ACT,
                             "Conv [-> bias Add] -> activation (Relu, LeakyRelu, Clip, Sigmoid, "
                             "Gelu, SiLU = Sigmoid + Mul, or a decomposed GELU) [-> residual Add]",
                             "fuse bias, activation and residual Add into the Conv (oneDNN "
                             "post-ops)"},
    [CP_PATTERN_CONV_ADD] = {"conv_add", CP_PASS_CONV_BIAS_ACT,
                             "Conv -> bias and/or residual Add, no activation",
                             "fuse bias, activation and residual Add into the Conv (oneDNN "
                             "post-ops)"},
    [CP_PATTERN_CONV_BN] = {"conv_bn", CP_PASS_CONV_BN,
                            "Conv -> BatchNormalization [-> activation, residual Add]",
                            "fold the BatchNormalization into the Conv's weights; "
                            "ConvBiasActivationFusionPass then fuses what follows"},
    [CP_PATTERN_MATMUL_ACT] = {"matmul_act", CP_PASS_MATMUL_BIAS_ACT,
                               "MatMul with a weight (or Gemm) [-> bias Add] -> activation [-> "
                               "residual Add]",
                               "fuse bias, activation and residual Add into the MatMul (oneDNN "
                               "post-ops)"},
    [CP_PATTERN_MATMUL_ADD] = {"matmul_add", CP_PASS_MATMUL_BIAS_ACT,
                               "MatMul with a weight (or Gemm) -> bias and/or residual Add, no "
                               "activation",
                               "fuse bias, activation and residual Add into the MatMul (oneDNN "
                               "post-ops)"},
    [CP_PATTERN_ROUNDTRIP_TRANSDATA] = {"layout_roundtrip", CP_PASS_LAYOUT_TRANSFORM,
                                        "TransData, at most 4 ops, then a TransData that restores "
                                        "the first one's input shape and layout",
                                        "the ops between have no kernel for the blocked layout: "
                                        "give them one, or try --layout_policy=nchw"},
    [CP_PATTERN_ROUNDTRIP_TRANSPOSE] = {"layout_roundtrip", CP_PASS_TRANSPOSE_ROUNDTRIP,
                                        "Transpose, at most 4 ops, then a Transpose that restores "
                                        "the first one's input shape and layout",
                                        "the pass cancels the pair when every op between is "
                                        "layout-agnostic"},
};
static_assert(sizeof patterns / sizeof patterns[0] == CP_PATTERN_COUNT, "pattern table size");

const struct cp_pattern_def *cp_pattern_get(enum cp_pattern_id id)
{
    return (unsigned)id < CP_PATTERN_COUNT ? &patterns[id] : NULL;
}

/* ---- matchers ----------------------------------------------------------------------------- */

bool cp_pattern_is_activation_op(enum cp_op op)
{
    switch (op) {
    case CP_OP_RELU:
    case CP_OP_LEAKY_RELU:
    case CP_OP_CLIP:
    case CP_OP_SIGMOID:
    case CP_OP_GELU:
        return true;
    default:
        return false;
    }
}

static enum cp_act_kind act_kind_of(enum cp_op op)
{
    switch (op) {
    case CP_OP_RELU:
        return CP_ACT_RELU;
    case CP_OP_LEAKY_RELU:
        return CP_ACT_LEAKY_RELU;
    case CP_OP_CLIP:
        return CP_ACT_CLIP;
    case CP_OP_SIGMOID:
        return CP_ACT_SIGMOID;
    case CP_OP_GELU:
        return CP_ACT_GELU;
    default:
        return CP_ACT_BAD;
    }
}

/* Whether binary node n reads a on one side and b on the other. */
static bool reads_pair(const struct cp_pattern_view *v, int32_t n, int32_t a, int32_t b)
{
    if (v->n_inputs(v->ctx, n) != 2)
        return false;
    int32_t i0 = v->input(v->ctx, n, 0), i1 = v->input(v->ctx, n, 1);
    return (i0 == a && i1 == b) || (i0 == b && i1 == a);
}

bool cp_pattern_match_silu(const struct cp_pattern_view *v, int32_t x, struct cp_pattern_act *m)
{
    int32_t r[3];
    if (x < 0 || v->readers(v->ctx, x, r, 3) != 2 || !v->private_to(v->ctx, x, 2))
        return false;
    for (int i = 0; i < 2; i++) {
        int32_t sg = r[i], mul = r[1 - i];
        if (v->op(v->ctx, sg) != CP_OP_SIGMOID || v->op(v->ctx, mul) != CP_OP_MUL ||
            v->n_inputs(v->ctx, sg) < 1 || v->input(v->ctx, sg, 0) != x)
            continue;
        int32_t s = v->output(v->ctx, sg, 0), only;
        if (s < 0 || s == x || !reads_pair(v, mul, x, s) || v->readers(v->ctx, s, &only, 1) != 1 ||
            only != mul || !v->private_to(v->ctx, s, 1))
            continue;
        m->kind = CP_ACT_SILU;
        m->nodes[0] = sg;
        m->nodes[1] = mul;
        m->n_nodes = 2;
        m->out = v->output(v->ctx, mul, 0);
        m->reads = 2;
        return true;
    }
    return false;
}

bool cp_pattern_match_activation(const struct cp_pattern_view *v, int32_t x,
                                 struct cp_pattern_act *m)
{
    int32_t r[3];
    size_t n = x >= 0 ? v->readers(v->ctx, x, r, 3) : 0;
    if (n == 1 && v->private_to(v->ctx, x, 1)) {
        enum cp_op op = v->op(v->ctx, r[0]);
        if (!cp_pattern_is_activation_op(op) || v->n_inputs(v->ctx, r[0]) < 1 ||
            v->input(v->ctx, r[0], 0) != x)
            return false;
        m->kind = act_kind_of(op);
        m->nodes[0] = r[0];
        m->n_nodes = 1;
        m->out = v->output(v->ctx, r[0], 0);
        m->reads = 1;
        return true;
    }
    return n == 2 && cp_pattern_match_silu(v, x, m);
}
