/*
 * The fusion pass family (see pass.h), in the order the manager runs them.
 *
 * GELU, LayerNorm and GroupNorm come first: they turn op-by-op exports back
 * into single ops, which the operator fusions can then take as activations
 * (a Gelu after a Linear layer, SiLU after a GroupNorm). The operator
 * fusions (UBFusion, as ATC groups its buffer fusions) then fold bias,
 * activation and residual Add into Conv, MatMul and Gemm. The patterns,
 * and why each rewrite keeps the function, are described in fusion_norm.c
 * and fusion_conv.c; the shared matchers in fusion_act.c.
 */
#include "atc_bridge/passes/fusion_internal.h"

#include <stddef.h>

const struct cp_pass cp_fusion_passes[] = {
    /* First, before the Conv/MatMul fusions take the float products. */
    {"QDQFoldPass", "GraphFusion",
     "DequantizeLinear pairs around Conv/MatMul/Gemm [-> QuantizeLinear] become one int8 kernel "
     "(QLinearConv/QLinearMatMul, or ConvInteger/MatMulInteger with the scaling)",
     cp_quant_qdq_fold_run},
    {CP_PASS_GELU, "GraphFusion",
     "Div(sqrt2) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5) becomes one Gelu", cp_fusion_gelu_run},
    {CP_PASS_LAYERNORM, "GraphFusion",
     "decomposed LayerNorm (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add) becomes one "
     "LayerNormalization",
     cp_fusion_layernorm_run},
    {CP_PASS_GROUPNORM, "GraphFusion",
     "Reshape -> InstanceNormalization -> Reshape -> Mul -> Add [-> SiLU] becomes one "
     "GroupNormalization",
     cp_fusion_groupnorm_run},
    {CP_PASS_CONV_BIAS_ACT, "UBFusion",
     "Conv + bias + activation + residual Add become one FusedConv (oneDNN post-ops)",
     cp_fusion_conv_run},
    {CP_PASS_MATMUL_BIAS_ACT, "UBFusion",
     "MatMul/Gemm + bias + activation + residual Add become one FusedMatMul (oneDNN post-ops)",
     cp_fusion_matmul_run},
    {NULL, NULL, NULL, NULL},
};
