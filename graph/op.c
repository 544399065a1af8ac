/* The operator name table. */
#include "graph/graph.h"

#include <assert.h>
#include <string.h>

static const char *const op_names[] = {
    [CP_OP_UNKNOWN] = "Unknown",
    [CP_OP_ADD] = "Add",
    [CP_OP_SUB] = "Sub",
    [CP_OP_MUL] = "Mul",
    [CP_OP_DIV] = "Div",
    [CP_OP_POW] = "Pow",
    [CP_OP_SQRT] = "Sqrt",
    [CP_OP_EXP] = "Exp",
    [CP_OP_ERF] = "Erf",
    [CP_OP_TANH] = "Tanh",
    [CP_OP_SIGMOID] = "Sigmoid",
    [CP_OP_RELU] = "Relu",
    [CP_OP_LEAKY_RELU] = "LeakyRelu",
    [CP_OP_CLIP] = "Clip",
    [CP_OP_SOFTMAX] = "Softmax",
    [CP_OP_REDUCE_MEAN] = "ReduceMean",
    [CP_OP_REDUCE_SUM] = "ReduceSum",
    [CP_OP_REDUCE_MAX] = "ReduceMax",
    [CP_OP_MATMUL] = "MatMul",
    [CP_OP_GEMM] = "Gemm",
    [CP_OP_CONV] = "Conv",
    [CP_OP_CONV_TRANSPOSE] = "ConvTranspose",
    [CP_OP_MAX_POOL] = "MaxPool",
    [CP_OP_AVERAGE_POOL] = "AveragePool",
    [CP_OP_GLOBAL_AVERAGE_POOL] = "GlobalAveragePool",
    [CP_OP_BATCH_NORMALIZATION] = "BatchNormalization",
    [CP_OP_INSTANCE_NORMALIZATION] = "InstanceNormalization",
    [CP_OP_LAYER_NORMALIZATION] = "LayerNormalization",
    [CP_OP_CONCAT] = "Concat",
    [CP_OP_SPLIT] = "Split",
    [CP_OP_SLICE] = "Slice",
    [CP_OP_GATHER] = "Gather",
    [CP_OP_RESHAPE] = "Reshape",
    [CP_OP_FLATTEN] = "Flatten",
    [CP_OP_TRANSPOSE] = "Transpose",
    [CP_OP_SQUEEZE] = "Squeeze",
    [CP_OP_UNSQUEEZE] = "Unsqueeze",
    [CP_OP_SHAPE] = "Shape",
    [CP_OP_EXPAND] = "Expand",
    [CP_OP_WHERE] = "Where",
    [CP_OP_EQUAL] = "Equal",
    [CP_OP_CAST] = "Cast",
    [CP_OP_CONSTANT] = "Constant",
    [CP_OP_CONSTANT_OF_SHAPE] = "ConstantOfShape",
    [CP_OP_IDENTITY] = "Identity",
    [CP_OP_RESIZE] = "Resize",
    [CP_OP_PAD] = "Pad",
    [CP_OP_RANGE] = "Range",
    [CP_OP_DROPOUT] = "Dropout",
    [CP_OP_FUSED_CONV] = "FusedConv",
    [CP_OP_FUSED_MATMUL] = "FusedMatMul",
    [CP_OP_GROUP_NORMALIZATION] = "GroupNormalization",
    [CP_OP_GELU] = "Gelu",
    [CP_OP_FUSED_ATTENTION] = "FusedAttention",
    [CP_OP_TRANS_DATA] = "TransData",
    /* ---- [elementwise] ---- */
    [CP_OP_ABS] = "Abs",
    [CP_OP_NEG] = "Neg",
    [CP_OP_RECIPROCAL] = "Reciprocal",
    [CP_OP_FLOOR] = "Floor",
    [CP_OP_CEIL] = "Ceil",
    [CP_OP_ROUND] = "Round",
    [CP_OP_SIGN] = "Sign",
    [CP_OP_LOG] = "Log",
    [CP_OP_SIN] = "Sin",
    [CP_OP_COS] = "Cos",
    [CP_OP_TAN] = "Tan",
    [CP_OP_ASIN] = "Asin",
    [CP_OP_ACOS] = "Acos",
    [CP_OP_ATAN] = "Atan",
    [CP_OP_SINH] = "Sinh",
    [CP_OP_COSH] = "Cosh",
    [CP_OP_ASINH] = "Asinh",
    [CP_OP_ACOSH] = "Acosh",
    [CP_OP_ATANH] = "Atanh",
    [CP_OP_IS_NAN] = "IsNaN",
    [CP_OP_IS_INF] = "IsInf",
    [CP_OP_NOT] = "Not",
    [CP_OP_BITWISE_NOT] = "BitwiseNot",
    [CP_OP_ELU] = "Elu",
    [CP_OP_SELU] = "Selu",
    [CP_OP_CELU] = "Celu",
    [CP_OP_HARD_SIGMOID] = "HardSigmoid",
    [CP_OP_HARD_SWISH] = "HardSwish",
    [CP_OP_SOFTSIGN] = "Softsign",
    [CP_OP_SOFTPLUS] = "Softplus",
    [CP_OP_THRESHOLDED_RELU] = "ThresholdedRelu",
    [CP_OP_SHRINK] = "Shrink",
    [CP_OP_MISH] = "Mish",
    [CP_OP_PRELU] = "PRelu",
    [CP_OP_GREATER] = "Greater",
    [CP_OP_LESS] = "Less",
    [CP_OP_GREATER_OR_EQUAL] = "GreaterOrEqual",
    [CP_OP_LESS_OR_EQUAL] = "LessOrEqual",
    [CP_OP_AND] = "And",
    [CP_OP_OR] = "Or",
    [CP_OP_XOR] = "Xor",
    [CP_OP_MOD] = "Mod",
    [CP_OP_BIT_SHIFT] = "BitShift",
    [CP_OP_BITWISE_AND] = "BitwiseAnd",
    [CP_OP_BITWISE_OR] = "BitwiseOr",
    [CP_OP_BITWISE_XOR] = "BitwiseXor",
    [CP_OP_MAX] = "Max",
    [CP_OP_MIN] = "Min",
    [CP_OP_SUM] = "Sum",
    [CP_OP_MEAN] = "Mean",
    [CP_OP_CAST_LIKE] = "CastLike",
    [CP_OP_RANDOM_NORMAL] = "RandomNormal",
    [CP_OP_RANDOM_UNIFORM] = "RandomUniform",
    [CP_OP_RANDOM_NORMAL_LIKE] = "RandomNormalLike",
    [CP_OP_RANDOM_UNIFORM_LIKE] = "RandomUniformLike",
    [CP_OP_BERNOULLI] = "Bernoulli",
    [CP_OP_MULTINOMIAL] = "Multinomial",
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    [CP_OP_REDUCE_MIN] = "ReduceMin",
    [CP_OP_REDUCE_PROD] = "ReduceProd",
    [CP_OP_REDUCE_L1] = "ReduceL1",
    [CP_OP_REDUCE_L2] = "ReduceL2",
    [CP_OP_REDUCE_LOG_SUM] = "ReduceLogSum",
    [CP_OP_REDUCE_LOG_SUM_EXP] = "ReduceLogSumExp",
    [CP_OP_REDUCE_SUM_SQUARE] = "ReduceSumSquare",
    [CP_OP_ARG_MAX] = "ArgMax",
    [CP_OP_ARG_MIN] = "ArgMin",
    [CP_OP_TOP_K] = "TopK",
    [CP_OP_CUM_SUM] = "CumSum",
    [CP_OP_HARDMAX] = "Hardmax",
    [CP_OP_LOG_SOFTMAX] = "LogSoftmax",
    [CP_OP_GATHER_ELEMENTS] = "GatherElements",
    [CP_OP_GATHER_ND] = "GatherND",
    [CP_OP_SCATTER_ELEMENTS] = "ScatterElements",
    [CP_OP_SCATTER_ND] = "ScatterND",
    [CP_OP_SCATTER] = "Scatter",
    [CP_OP_COMPRESS] = "Compress",
    [CP_OP_NON_ZERO] = "NonZero",
    [CP_OP_ONE_HOT] = "OneHot",
    [CP_OP_TRILU] = "Trilu",
    [CP_OP_TILE] = "Tile",
    [CP_OP_SIZE] = "Size",
    [CP_OP_EYE_LIKE] = "EyeLike",
    [CP_OP_NLL_LOSS] = "NegativeLogLikelihoodLoss",
    [CP_OP_SCE_LOSS] = "SoftmaxCrossEntropyLoss",
    [CP_OP_REVERSE_SEQUENCE] = "ReverseSequence",
    [CP_OP_DET] = "Det",
    [CP_OP_EINSUM] = "Einsum",
    [CP_OP_UNIQUE] = "Unique",
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    [CP_OP_LRN] = "LRN",
    [CP_OP_LP_NORMALIZATION] = "LpNormalization",
    [CP_OP_MEAN_VARIANCE_NORMALIZATION] = "MeanVarianceNormalization",
    [CP_OP_GLOBAL_MAX_POOL] = "GlobalMaxPool",
    [CP_OP_LP_POOL] = "LpPool",
    [CP_OP_GLOBAL_LP_POOL] = "GlobalLpPool",
    [CP_OP_MAX_UNPOOL] = "MaxUnpool",
    [CP_OP_DEPTH_TO_SPACE] = "DepthToSpace",
    [CP_OP_SPACE_TO_DEPTH] = "SpaceToDepth",
    [CP_OP_GRID_SAMPLE] = "GridSample",
    [CP_OP_ROI_ALIGN] = "RoiAlign",
    [CP_OP_NON_MAX_SUPPRESSION] = "NonMaxSuppression",
    [CP_OP_MAX_ROI_POOL] = "MaxRoiPool",
    [CP_OP_CENTER_CROP_PAD] = "CenterCropPad",
    [CP_OP_COL2IM] = "Col2Im",
    [CP_OP_AFFINE_GRID] = "AffineGrid",
    [CP_OP_DEFORM_CONV] = "DeformConv",
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    [CP_OP_LSTM] = "LSTM",
    [CP_OP_GRU] = "GRU",
    [CP_OP_RNN] = "RNN",
    [CP_OP_DFT] = "DFT",
    [CP_OP_STFT] = "STFT",
    [CP_OP_HANN_WINDOW] = "HannWindow",
    [CP_OP_HAMMING_WINDOW] = "HammingWindow",
    [CP_OP_BLACKMAN_WINDOW] = "BlackmanWindow",
    [CP_OP_MEL_WEIGHT_MATRIX] = "MelWeightMatrix",
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    [CP_OP_IF] = "If",
    [CP_OP_LOOP] = "Loop",
    [CP_OP_SCAN] = "Scan",
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
    [CP_OP_QUANTIZE_LINEAR] = "QuantizeLinear",
    [CP_OP_DEQUANTIZE_LINEAR] = "DequantizeLinear",
    [CP_OP_QLINEAR_CONV] = "QLinearConv",
    [CP_OP_QLINEAR_MATMUL] = "QLinearMatMul",
    [CP_OP_MATMUL_INTEGER] = "MatMulInteger",
    [CP_OP_CONV_INTEGER] = "ConvInteger",
    [CP_OP_DYNAMIC_QUANTIZE_LINEAR] = "DynamicQuantizeLinear",
    /* ---- end [quant] ---- */

    /* ---- [legacy] ---- */
    /* ---- end [legacy] ---- */
};
static_assert(sizeof op_names / sizeof op_names[0] == CP_OP_COUNT, "op table size");

const char *cp_op_name(enum cp_op op)
{
    return (unsigned)op < CP_OP_COUNT ? op_names[op] : "Unknown";
}

enum cp_op cp_op_from_name(const char *op_type)
{
    for (int i = 1; i < CP_OP_COUNT; i++)
        if (!cp_op_is_own((enum cp_op)i) && strcmp(op_names[i], op_type) == 0)
            return (enum cp_op)i;
    return CP_OP_UNKNOWN;
}

enum cp_op cp_op_from_domain_name(const char *domain, const char *op_type)
{
    if (!domain || !domain[0] || strcmp(domain, "ai.onnx") == 0)
        return cp_op_from_name(op_type);
    if (strcmp(domain, CP_DOMAIN) != 0)
        return CP_OP_UNKNOWN;
    for (int i = CP_OP_FUSED_CONV; i <= CP_OP_TRANS_DATA; i++)
        if (strcmp(op_names[i], op_type) == 0)
            return (enum cp_op)i;
    return CP_OP_UNKNOWN;
}

bool cp_op_is_own(enum cp_op op)
{
    return op >= CP_OP_FUSED_CONV && op <= CP_OP_TRANS_DATA;
}
