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
    /* ---- end [elementwise] ---- */

    /* ---- [reduce_index] ---- */
    /* ---- end [reduce_index] ---- */

    /* ---- [nn] ---- */
    /* ---- end [nn] ---- */

    /* ---- [rnn] ---- */
    /* ---- end [rnn] ---- */

    /* ---- [control] ---- */
    [CP_OP_IF] = "If",
    [CP_OP_LOOP] = "Loop",
    [CP_OP_SCAN] = "Scan",
    /* ---- end [control] ---- */

    /* ---- [quant] ---- */
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
