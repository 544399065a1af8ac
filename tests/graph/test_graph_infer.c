/* Shape, dtype and value inference, op family by op family. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "graph/graph_build.h"

#define F32 CP_DTYPE_F32
#define I64 CP_DTYPE_I64

/* ---- elementwise and broadcasting ------------------------------------------- */

Test(graph_infer, test_infer_add_broadcasts_numpy_style)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 3, GB_DIMS(2, 1, 4));
    gb_input(g, "b", F32, 2, GB_DIMS(3, 1));
    gb_node(g, "add", "Add", GB_IN("a", "b"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 3, 4));
    cr_assert_eq(gb_get(g, "y")->dtype, F32);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_broadcast_keeps_symbolic_dim)
{
    struct cp_graph *g = gb_graph(17);
    gb_input_sym(g, "a", F32, 3, GB_DIMS(-1, 1, 4), (const char *[]){"batch", NULL, NULL});
    gb_input(g, "b", F32, 2, GB_DIMS(3, 4));
    gb_node(g, "mul", "Mul", GB_IN("a", "b"), GB_IN("y"));
    gb_node(g, "act", "Sigmoid", GB_IN("y"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "z", 3, GB_DIMS(-1, 3, 4));
    const struct cp_tensor *z = gb_get(g, "z");
    cr_assert_not_null(z->shape.dims[0].sym);
    cr_assert_str_eq(z->shape.dims[0].sym, "batch");
    cp_graph_free(g);
}

Test(graph_infer, test_infer_rejects_incompatible_broadcast_naming_node_and_tensors)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "left", F32, 2, GB_DIMS(2, 3));
    gb_input(g, "right", F32, 2, GB_DIMS(4, 3));
    gb_node(g, "bad_add", "Add", GB_IN("left", "right"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "node 'bad_add' (Add)"), "%s", msg);
    cr_assert(strstr(msg, "'left'") && strstr(msg, "'right'"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_rejects_wrong_input_count)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 1, GB_DIMS(3));
    gb_node(g, "add3", "Add", GB_IN("a", "a", "a"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'add3'") && strstr(msg, "expects 2 inputs, got 3"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_rejects_mixed_input_types)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 1, GB_DIMS(3));
    gb_input(g, "b", I64, 1, GB_DIMS(3));
    gb_node(g, "sub", "Sub", GB_IN("a", "b"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "f32 vs i64"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_where_broadcasts_three_inputs_and_selects_values)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "c", CP_DTYPE_BOOL, 2, GB_DIMS(2, 1));
    gb_input(g, "x", F32, 2, GB_DIMS(1, 3));
    gb_init(g, "zero", F32, 0, NULL, (const float[]){0.0f});
    gb_node(g, "w", "Where", GB_IN("c", "x", "zero"), GB_IN("y"));
    /* Value path: Where(Equal(v, -1), ones, v) as PyTorch emits for Expand. */
    gb_ints(g, "v", 3, GB_DIMS(2, -1, 4));
    gb_ints(g, "m1", 1, GB_DIMS(-1));
    gb_ints(g, "ones", 3, GB_DIMS(1, 1, 1));
    gb_node(g, "eq", "Equal", GB_IN("v", "m1"), GB_IN("isneg"));
    gb_node(g, "sel", "Where", GB_IN("isneg", "ones", "v"), GB_IN("fixed"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 2, GB_DIMS(2, 3));
    cr_assert_eq(gb_get(g, "isneg")->dtype, CP_DTYPE_BOOL);
    gb_assert_value(g, "isneg", 3, GB_DIMS(0, 1, 0));
    gb_assert_value(g, "fixed", 3, GB_DIMS(2, 1, 4));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_integer_arithmetic_values_truncate_like_c)
{
    struct cp_graph *g = gb_graph(17);
    gb_ints(g, "a", 3, GB_DIMS(7, -7, 12));
    gb_ints(g, "b", 1, GB_DIMS(2));
    gb_node(g, "div", "Div", GB_IN("a", "b"), GB_IN("q"));
    gb_node(g, "mul", "Mul", GB_IN("q", "b"), GB_IN("p"));
    gb_node(g, "sub", "Sub", GB_IN("a", "p"), GB_IN("r"));
    gb_node(g, "add", "Add", GB_IN("r", "b"), GB_IN("s"));
    gb_infer_ok(g);
    gb_assert_value(g, "q", 3, GB_DIMS(3, -3, 6));
    gb_assert_value(g, "r", 3, GB_DIMS(1, -1, 0));
    gb_assert_value(g, "s", 3, GB_DIMS(3, 1, 2));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_cast_sets_dtype_and_keeps_values)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(2, 5));
    gb_node(g, "shape", "Shape", GB_IN("x"), GB_IN("s"));
    int32_t n = gb_node(g, "to_i32", "Cast", GB_IN("s"), GB_IN("s32"));
    cr_assert_eq(cp_node_set_int(g, n, "to", 6), CP_OK);
    n = gb_node(g, "to_f", "Cast", GB_IN("x"), GB_IN("xh"));
    cr_assert_eq(cp_node_set_int(g, n, "to", 10), CP_OK);
    gb_infer_ok(g);
    cr_assert_eq(gb_get(g, "s32")->dtype, CP_DTYPE_I32);
    gb_assert_value(g, "s32", 2, GB_DIMS(2, 5));
    cr_assert_eq(gb_get(g, "xh")->dtype, CP_DTYPE_F16);
    gb_assert_shape(g, "xh", 2, GB_DIMS(2, 5));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_cast_without_to_is_an_error)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 1, GB_DIMS(2));
    gb_node(g, "cast", "Cast", GB_IN("x"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'cast'") && strstr(msg, "'to'"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_softmax_keeps_shape_and_checks_axis)
{
    struct cp_graph *g = gb_graph(11);
    gb_input(g, "x", F32, 3, GB_DIMS(2, 4, 8));
    gb_node(g, "sm", "Softmax", GB_IN("x"), GB_IN("y"));
    int32_t n = gb_node(g, "sm_bad", "Softmax", GB_IN("y"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 4, 8));
    cr_assert_eq(cp_node_set_int(g, n, "axis", 3), CP_OK);
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'sm_bad'") && strstr(msg, "out of range"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_dropout_mask_is_bool)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 2, GB_DIMS(3, 4));
    gb_node(g, "drop", "Dropout", GB_IN("x"), GB_IN("y", "mask"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 2, GB_DIMS(3, 4));
    gb_assert_shape(g, "mask", 2, GB_DIMS(3, 4));
    cr_assert_eq(gb_get(g, "mask")->dtype, CP_DTYPE_BOOL);
    cp_graph_free(g);
}

/* ---- reductions and normalizations ---------------------------------------------- */

Test(graph_infer, test_infer_reduce_axes_attribute_vs_input_by_opset)
{
    /* ReduceSum takes axes as an input from opset 13; ReduceMean keeps the
     * attribute until 18. */
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 3, GB_DIMS(2, 3, 4));
    gb_ints(g, "ax", 1, GB_DIMS(1));
    int32_t n = gb_node(g, "sum", "ReduceSum", GB_IN("x", "ax"), GB_IN("s"));
    cr_assert_eq(cp_node_set_int(g, n, "keepdims", 0), CP_OK);
    n = gb_node(g, "mean", "ReduceMean", GB_IN("x"), GB_IN("m"));
    cr_assert_eq(cp_node_set_ints(g, n, "axes", GB_DIMS(-1), 1), CP_OK);
    gb_node(g, "max", "ReduceMax", GB_IN("x"), GB_IN("all"));
    gb_infer_ok(g);
    gb_assert_shape(g, "s", 2, GB_DIMS(2, 4));
    gb_assert_shape(g, "m", 3, GB_DIMS(2, 3, 1));
    gb_assert_shape(g, "all", 3, GB_DIMS(1, 1, 1));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_layer_norm_mean_and_inv_std_shapes)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 3, GB_DIMS(2, 5, 8));
    gb_init(g, "gamma", F32, 1, GB_DIMS(8), NULL);
    gb_init(g, "beta", F32, 1, GB_DIMS(8), NULL);
    gb_node(g, "ln", "LayerNormalization", GB_IN("x", "gamma", "beta"), GB_IN("y", "mean", "istd"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 5, 8));
    gb_assert_shape(g, "mean", 3, GB_DIMS(2, 5, 1));
    gb_assert_shape(g, "istd", 3, GB_DIMS(2, 5, 1));
    cr_assert_eq(gb_get(g, "mean")->dtype, F32);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_layer_norm_rejects_mismatched_scale)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 3, GB_DIMS(2, 5, 8));
    gb_init(g, "gamma", F32, 1, GB_DIMS(6), NULL);
    gb_node(g, "ln", "LayerNormalization", GB_IN("x", "gamma"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'ln'") && strstr(msg, "'gamma'"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_batch_norm_checks_channel_params)
{
    struct cp_graph *g = gb_graph(15);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 16, 8, 8));
    gb_init(g, "s", F32, 1, GB_DIMS(16), NULL);
    gb_init(g, "b", F32, 1, GB_DIMS(16), NULL);
    gb_init(g, "m", F32, 1, GB_DIMS(16), NULL);
    gb_init(g, "v", F32, 1, GB_DIMS(12), NULL);
    gb_node(g, "bn", "BatchNormalization", GB_IN("x", "s", "b", "m", "v"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'bn'") && strstr(msg, "'v'") && strstr(msg, "12"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_batch_norm_keeps_input_shape)
{
    struct cp_graph *g = gb_graph(15);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 16, 8, 8));
    gb_init(g, "s", F32, 1, GB_DIMS(16), NULL);
    gb_node(g, "bn", "BatchNormalization", GB_IN("x", "s", "s", "s", "s"), GB_IN("y"));
    gb_node(g, "in", "InstanceNormalization", GB_IN("y", "s", "s"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 16, 8, 8));
    gb_assert_shape(g, "z", 4, GB_DIMS(1, 16, 8, 8));
    cp_graph_free(g);
}

/* ---- MatMul and Gemm -------------------------------------------------------------- */

Test(graph_infer, test_infer_matmul_batched_broadcast)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 4, GB_DIMS(2, 1, 8, 16));
    gb_input(g, "b", F32, 3, GB_DIMS(3, 16, 4));
    gb_node(g, "mm", "MatMul", GB_IN("a", "b"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(2, 3, 8, 4));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_matmul_promotes_1d_operands)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "v", F32, 1, GB_DIMS(16));
    gb_input(g, "w", F32, 2, GB_DIMS(16, 4));
    gb_input(g, "m", F32, 3, GB_DIMS(2, 8, 16));
    gb_node(g, "vm", "MatMul", GB_IN("v", "w"), GB_IN("y1"));
    gb_node(g, "mv", "MatMul", GB_IN("m", "v"), GB_IN("y2"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y1", 1, GB_DIMS(4));
    gb_assert_shape(g, "y2", 2, GB_DIMS(2, 8));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_matmul_inner_mismatch_names_node)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 2, GB_DIMS(2, 64));
    gb_init(g, "w", F32, 2, GB_DIMS(32, 16), NULL);
    gb_node(g, "proj", "MatMul", GB_IN("a", "w"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "node 'proj' (MatMul)"), "%s", msg);
    cr_assert(strstr(msg, "inner dimensions differ: 64 vs 32"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_gemm_honours_transposes)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 2, GB_DIMS(16, 5));      /* K x M, transA */
    gb_init(g, "b", F32, 2, GB_DIMS(7, 16), NULL); /* N x K, transB */
    gb_init(g, "c", F32, 1, GB_DIMS(7), NULL);
    int32_t n = gb_node(g, "fc", "Gemm", GB_IN("a", "b", "c"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "transA", 1), CP_OK);
    cr_assert_eq(cp_node_set_int(g, n, "transB", 1), CP_OK);
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 2, GB_DIMS(5, 7));
    cp_graph_free(g);
}

/* ---- convolutions and pools ------------------------------------------------------------ */

Test(graph_infer, test_infer_conv_with_pads_strides_and_group)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 32, 56, 56));
    gb_init(g, "w", F32, 4, GB_DIMS(64, 16, 3, 3), NULL);
    gb_init(g, "b", F32, 1, GB_DIMS(64), NULL);
    int32_t n = gb_node(g, "conv", "Conv", GB_IN("x", "w", "b"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "group", 2), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    /* Dilation 2 without padding: effective kernel 5, 56 - 5 + 1 = 52. */
    gb_init(g, "w2", F32, 4, GB_DIMS(8, 64, 3, 3), NULL);
    n = gb_node(g, "dil", "Conv", GB_IN("y", "w2"), GB_IN("z"));
    cr_assert_eq(cp_node_set_ints(g, n, "dilations", GB_DIMS(2, 2), 2), CP_OK);
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 64, 28, 28));
    gb_assert_shape(g, "z", 4, GB_DIMS(1, 8, 24, 24));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_conv_auto_pad_same_and_valid)
{
    struct cp_graph *g = gb_graph(17);
    gb_input_sym(g, "x", F32, 4, GB_DIMS(-1, 3, 15, 15), (const char *[]){"N", NULL, NULL, NULL});
    gb_init(g, "w", F32, 4, GB_DIMS(8, 3, 3, 3), NULL);
    int32_t n = gb_node(g, "same", "Conv", GB_IN("x", "w"), GB_IN("y"));
    cr_assert_eq(cp_node_set_string(g, n, "auto_pad", "SAME_UPPER"), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    n = gb_node(g, "valid", "Conv", GB_IN("x", "w"), GB_IN("z"));
    cr_assert_eq(cp_node_set_string(g, n, "auto_pad", "VALID"), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(-1, 8, 8, 8));
    gb_assert_shape(g, "z", 4, GB_DIMS(-1, 8, 7, 7));
    cr_assert_str_eq(gb_get(g, "y")->shape.dims[0].sym, "N");
    cp_graph_free(g);
}

Test(graph_infer, test_infer_conv_channel_mismatch_names_tensors)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 32, 8, 8));
    gb_init(g, "w", F32, 4, GB_DIMS(64, 8, 3, 3), NULL);
    int32_t n = gb_node(g, "conv", "Conv", GB_IN("x", "w"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "group", 2), CP_OK);
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'conv'") && strstr(msg, "'x'") && strstr(msg, "'w'"), "%s", msg);
    cr_assert(strstr(msg, "32 channels"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_conv_transpose_output_size)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 16, 8, 8));
    gb_init(g, "w", F32, 4, GB_DIMS(16, 4, 4, 4), NULL);
    int32_t n = gb_node(g, "up", "ConvTranspose", GB_IN("x", "w"), GB_IN("y"));
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4), CP_OK);
    cr_assert_eq(cp_node_set_int(g, n, "group", 2), CP_OK);
    n = gb_node(g, "up_op", "ConvTranspose", GB_IN("x", "w"), GB_IN("z"));
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "output_padding", GB_DIMS(1, 0), 2), CP_OK);
    n = gb_node(g, "up_os", "ConvTranspose", GB_IN("x", "w"), GB_IN("u"));
    cr_assert_eq(cp_node_set_ints(g, n, "output_shape", GB_DIMS(20, 21), 2), CP_OK);
    gb_infer_ok(g);
    /* (8 - 1) * 2 + 4 - 2 = 16; channels 4 * group 2. */
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 8, 16, 16));
    /* (8 - 1) * 2 + 4 + output_padding. */
    gb_assert_shape(g, "z", 4, GB_DIMS(1, 4, 19, 18));
    gb_assert_shape(g, "u", 4, GB_DIMS(1, 4, 20, 21));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_pools_with_pads_ceil_mode_and_global)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 64, 112, 112));
    int32_t n = gb_node(g, "mp", "MaxPool", GB_IN("x"), GB_IN("y", "idx"));
    cr_assert_eq(cp_node_set_ints(g, n, "kernel_shape", GB_DIMS(3, 3), 2), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4), CP_OK);
    gb_input(g, "s", F32, 4, GB_DIMS(1, 8, 7, 7));
    n = gb_node(g, "ap", "AveragePool", GB_IN("s"), GB_IN("a"));
    cr_assert_eq(cp_node_set_ints(g, n, "kernel_shape", GB_DIMS(2, 2), 2), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    cr_assert_eq(cp_node_set_int(g, n, "ceil_mode", 1), CP_OK);
    gb_node(g, "gap", "GlobalAveragePool", GB_IN("y"), GB_IN("gp"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 64, 56, 56));
    gb_assert_shape(g, "idx", 4, GB_DIMS(1, 64, 56, 56));
    cr_assert_eq(gb_get(g, "idx")->dtype, I64);
    gb_assert_shape(g, "a", 4, GB_DIMS(1, 8, 4, 4)); /* floor would give 3 */
    gb_assert_shape(g, "gp", 4, GB_DIMS(1, 64, 1, 1));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_pool_without_kernel_shape_is_an_error)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 3, 8, 8));
    gb_node(g, "mp", "MaxPool", GB_IN("x"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'mp'") && strstr(msg, "kernel_shape"), "%s", msg);
    cp_graph_free(g);
}

/* ---- shape chains and Reshape ----------------------------------------------------------- */

/* x -> Shape -> Gather(0) -> Unsqueeze -> Concat([b, -1, 3]) -> Reshape(x). */
static struct cp_graph *reshape_chain(int64_t batch, const char *sym)
{
    struct cp_graph *g = gb_graph(13);
    gb_input_sym(g, "x", F32, 3, GB_DIMS(batch, 4, 6), (const char *[]){sym, NULL, NULL});
    gb_scalar(g, "zero", 0);
    gb_ints(g, "ax0", 1, GB_DIMS(0));
    gb_ints(g, "m1", 1, GB_DIMS(-1));
    gb_ints(g, "three", 1, GB_DIMS(3));
    gb_node(g, "shape", "Shape", GB_IN("x"), GB_IN("s"));
    gb_node(g, "gather", "Gather", GB_IN("s", "zero"), GB_IN("b"));
    gb_node(g, "unsq", "Unsqueeze", GB_IN("b", "ax0"), GB_IN("b1"));
    int32_t n = gb_node(g, "cat", "Concat", GB_IN("b1", "m1", "three"), GB_IN("target"));
    cr_assert_eq(cp_node_set_int(g, n, "axis", 0), CP_OK);
    gb_node(g, "reshape", "Reshape", GB_IN("x", "target"), GB_IN("y"));
    return g;
}

Test(graph_infer, test_infer_reshape_resolves_shape_chain)
{
    struct cp_graph *g = reshape_chain(2, NULL);
    gb_infer_ok(g);
    gb_assert_value(g, "s", 3, GB_DIMS(2, 4, 6));
    gb_assert_shape(g, "b", 0, NULL);
    gb_assert_value(g, "b", 1, GB_DIMS(2));
    gb_assert_value(g, "target", 3, GB_DIMS(2, -1, 3));
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 8, 3));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_reshape_chain_keeps_symbolic_batch)
{
    struct cp_graph *g = reshape_chain(-1, "batch");
    gb_infer_ok(g);
    /* The value is only partly known, so no public value... */
    cr_assert_null(gb_get(g, "s")->value);
    gb_assert_shape(g, "target", 1, GB_DIMS(3));
    /* ...but the reshape still resolves around the symbol. */
    gb_assert_shape(g, "y", 3, GB_DIMS(-1, 8, 3));
    cr_assert_str_eq(gb_get(g, "y")->shape.dims[0].sym, "batch");
    cp_graph_free(g);
}

Test(graph_infer, test_infer_reshape_zero_copies_and_counts_elements)
{
    struct cp_graph *g = gb_graph(17);
    gb_input_sym(g, "x", F32, 3, GB_DIMS(-1, 3, 4), (const char *[]){"n", NULL, NULL});
    gb_ints(g, "s1", 2, GB_DIMS(0, -1));
    gb_node(g, "r1", "Reshape", GB_IN("x", "s1"), GB_IN("y"));
    gb_input(g, "w", F32, 3, GB_DIMS(2, 3, 4));
    gb_ints(g, "s2", 3, GB_DIMS(4, 0, -1));
    gb_node(g, "r2", "Reshape", GB_IN("w", "s2"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 2, GB_DIMS(-1, 12));
    cr_assert_str_eq(gb_get(g, "y")->shape.dims[0].sym, "n");
    gb_assert_shape(g, "z", 3, GB_DIMS(4, 3, 2));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_reshape_element_count_mismatch_is_an_error)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 3, GB_DIMS(2, 3, 4));
    gb_ints(g, "s", 2, GB_DIMS(5, 5));
    gb_node(g, "rs", "Reshape", GB_IN("x", "s"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'rs'") && strstr(msg, "24") && strstr(msg, "25"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_reshape_with_unknown_target_keeps_rank)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(4, 6));
    gb_input(g, "t", I64, 1, GB_DIMS(3));
    gb_node(g, "rs", "Reshape", GB_IN("x", "t"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 3, GB_DIMS(-1, -1, -1));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_flatten_folds_dims)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(2, 3, 4, 5));
    int32_t n = gb_node(g, "fl", "Flatten", GB_IN("x"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "axis", 2), CP_OK);
    gb_input_sym(g, "v", F32, 3, GB_DIMS(-1, 3, 4), (const char *[]){"batch", NULL, NULL});
    gb_node(g, "fl2", "Flatten", GB_IN("v"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 2, GB_DIMS(6, 20));
    gb_assert_shape(g, "z", 2, GB_DIMS(-1, 12));
    cr_assert_str_eq(gb_get(g, "z")->shape.dims[0].sym, "batch");
    cp_graph_free(g);
}

Test(graph_infer, test_infer_shape_start_end_attributes)
{
    struct cp_graph *g = gb_graph(15);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 3, 8, 9));
    int32_t n = gb_node(g, "sh", "Shape", GB_IN("x"), GB_IN("s"));
    cr_assert_eq(cp_node_set_int(g, n, "start", 1), CP_OK);
    cr_assert_eq(cp_node_set_int(g, n, "end", -1), CP_OK);
    gb_infer_ok(g);
    gb_assert_shape(g, "s", 1, GB_DIMS(2));
    gb_assert_value(g, "s", 2, GB_DIMS(3, 8));
    cp_graph_free(g);
}

/* ---- Squeeze, Unsqueeze, Transpose, Expand ------------------------------------------------- */

Test(graph_infer, test_infer_unsqueeze_and_squeeze_axes_attribute_in_opset_11)
{
    struct cp_graph *g = gb_graph(11);
    gb_input(g, "x", F32, 2, GB_DIMS(2, 3));
    int32_t n = gb_node(g, "unsq", "Unsqueeze", GB_IN("x"), GB_IN("u"));
    cr_assert_eq(cp_node_set_ints(g, n, "axes", GB_DIMS(0, 3), 2), CP_OK);
    n = gb_node(g, "sq", "Squeeze", GB_IN("u"), GB_IN("s"));
    cr_assert_eq(cp_node_set_ints(g, n, "axes", GB_DIMS(-1), 1), CP_OK);
    gb_node(g, "sq_all", "Squeeze", GB_IN("u"), GB_IN("all"));
    gb_infer_ok(g);
    gb_assert_shape(g, "u", 4, GB_DIMS(1, 2, 3, 1));
    gb_assert_shape(g, "s", 3, GB_DIMS(1, 2, 3));
    gb_assert_shape(g, "all", 2, GB_DIMS(2, 3));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_unsqueeze_and_squeeze_axes_input_from_opset_13)
{
    /* The same node reads its axes from the input at opset 13; the stale
     * attribute (which would give a different shape) is ignored. */
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 2, GB_DIMS(2, 3));
    gb_ints(g, "ax", 1, GB_DIMS(-1));
    int32_t n = gb_node(g, "unsq", "Unsqueeze", GB_IN("x", "ax"), GB_IN("u"));
    cr_assert_eq(cp_node_set_ints(g, n, "axes", GB_DIMS(0), 1), CP_OK);
    gb_ints(g, "ax2", 1, GB_DIMS(2));
    gb_node(g, "sq", "Squeeze", GB_IN("u", "ax2"), GB_IN("s"));
    gb_infer_ok(g);
    gb_assert_shape(g, "u", 3, GB_DIMS(2, 3, 1));
    gb_assert_shape(g, "s", 2, GB_DIMS(2, 3));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_squeeze_of_non_unit_dim_is_an_error)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 2, GB_DIMS(2, 3));
    gb_ints(g, "ax", 1, GB_DIMS(1));
    gb_node(g, "sq", "Squeeze", GB_IN("x", "ax"), GB_IN("s"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'sq'") && strstr(msg, "'x'") && strstr(msg, "not 1"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_transpose_perm_and_default_reverse)
{
    struct cp_graph *g = gb_graph(17);
    gb_input_sym(g, "x", F32, 3, GB_DIMS(-1, 3, 4), (const char *[]){"b", NULL, NULL});
    int32_t n = gb_node(g, "tp", "Transpose", GB_IN("x"), GB_IN("y"));
    cr_assert_eq(cp_node_set_ints(g, n, "perm", GB_DIMS(2, 0, 1), 3), CP_OK);
    gb_node(g, "rev", "Transpose", GB_IN("x"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 3, GB_DIMS(4, -1, 3));
    cr_assert_str_eq(gb_get(g, "y")->shape.dims[1].sym, "b");
    gb_assert_shape(g, "z", 3, GB_DIMS(4, 3, -1));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_expand_broadcasts_both_ways)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(3, 1));
    gb_ints(g, "shape", 3, GB_DIMS(2, 1, 4));
    gb_node(g, "ex", "Expand", GB_IN("x", "shape"), GB_IN("y"));
    gb_ints(g, "v", 2, GB_DIMS(5, 6));
    gb_ints(g, "shape2", 2, GB_DIMS(2, 1));
    gb_node(g, "exv", "Expand", GB_IN("v", "shape2"), GB_IN("vv"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 3, 4));
    gb_assert_shape(g, "vv", 2, GB_DIMS(2, 2));
    gb_assert_value(g, "vv", 4, GB_DIMS(5, 6, 5, 6));
    cp_graph_free(g);
}

/* ---- Concat, Split, Slice, Gather ------------------------------------------------------------ */

Test(graph_infer, test_infer_concat_sums_axis_and_checks_other_dims)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 2, GB_DIMS(2, 3));
    gb_input(g, "b", F32, 2, GB_DIMS(2, 5));
    gb_input(g, "c", F32, 2, GB_DIMS(3, 5));
    int32_t n = gb_node(g, "cat", "Concat", GB_IN("a", "b"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "axis", -1), CP_OK);
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 2, GB_DIMS(2, 8));
    n = gb_node(g, "badcat", "Concat", GB_IN("a", "c"), GB_IN("z"));
    cr_assert_eq(cp_node_set_int(g, n, "axis", 1), CP_OK);
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'badcat'") && strstr(msg, "'a'") && strstr(msg, "'c'"), "%s", msg);
    cr_assert(strstr(msg, "2 vs 3"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_concat_without_axis_is_an_error)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 1, GB_DIMS(2));
    gb_node(g, "cat", "Concat", GB_IN("a", "a"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'cat'") && strstr(msg, "'axis'"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_split_sizes_by_opset_and_equal_parts)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 2, GB_DIMS(6, 10));
    gb_ints(g, "sizes", 2, GB_DIMS(3, 7));
    int32_t n = gb_node(g, "sp", "Split", GB_IN("x", "sizes"), GB_IN("p", "q"));
    cr_assert_eq(cp_node_set_int(g, n, "axis", 1), CP_OK);
    gb_node(g, "halves", "Split", GB_IN("x"), GB_IN("h1", "h2"));
    gb_ints(g, "v", 5, GB_DIMS(10, 11, 12, 13, 14));
    gb_ints(g, "sz", 2, GB_DIMS(2, 3));
    gb_node(g, "spv", "Split", GB_IN("v", "sz"), GB_IN("v1", "v2"));
    gb_infer_ok(g);
    gb_assert_shape(g, "p", 2, GB_DIMS(6, 3));
    gb_assert_shape(g, "q", 2, GB_DIMS(6, 7));
    gb_assert_shape(g, "h1", 2, GB_DIMS(3, 10));
    gb_assert_shape(g, "h2", 2, GB_DIMS(3, 10));
    gb_assert_value(g, "v2", 3, GB_DIMS(12, 13, 14));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_split_attribute_before_opset_13)
{
    struct cp_graph *g = gb_graph(11);
    gb_input(g, "x", F32, 2, GB_DIMS(6, 10));
    int32_t n = gb_node(g, "sp", "Split", GB_IN("x"), GB_IN("p", "q", "r"));
    cr_assert_eq(cp_node_set_ints(g, n, "split", GB_DIMS(1, 2, 3), 3), CP_OK);
    gb_infer_ok(g);
    gb_assert_shape(g, "p", 2, GB_DIMS(1, 10));
    gb_assert_shape(g, "r", 2, GB_DIMS(3, 10));
    cr_assert_eq(cp_node_set_ints(g, n, "split", GB_DIMS(1, 2, 4), 3), CP_OK);
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'sp'") && strstr(msg, "sum to 7"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_slice_clamps_and_steps)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 3, GB_DIMS(10, 20, 30));
    gb_ints(g, "st", 2, GB_DIMS(1, -10));
    gb_ints(g, "en", 2, GB_DIMS(INT64_MAX, 100));
    gb_ints(g, "ax", 2, GB_DIMS(0, 2));
    gb_ints(g, "sp", 2, GB_DIMS(2, 1));
    gb_node(g, "sl", "Slice", GB_IN("x", "st", "en", "ax", "sp"), GB_IN("y"));
    /* Reverse axis 1 entirely. */
    gb_ints(g, "rst", 1, GB_DIMS(-1));
    gb_ints(g, "ren", 1, GB_DIMS(INT64_MIN));
    gb_ints(g, "rax", 1, GB_DIMS(1));
    gb_ints(g, "rsp", 1, GB_DIMS(-1));
    gb_node(g, "rev", "Slice", GB_IN("x", "rst", "ren", "rax", "rsp"), GB_IN("r"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 3, GB_DIMS(5, 20, 10));
    gb_assert_shape(g, "r", 3, GB_DIMS(10, 20, 30));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_slice_of_shape_value_and_dynamic_dim)
{
    struct cp_graph *g = gb_graph(13);
    gb_input_sym(g, "x", F32, 4, GB_DIMS(-1, 3, 8, 9), (const char *[]){"n", NULL, NULL, NULL});
    gb_node(g, "sh", "Shape", GB_IN("x"), GB_IN("s"));
    gb_ints(g, "two", 1, GB_DIMS(2));
    gb_ints(g, "big", 1, GB_DIMS(INT64_MAX));
    gb_node(g, "hw", "Slice", GB_IN("s", "two", "big"), GB_IN("hw_dims"));
    /* Slicing the whole dynamic batch keeps it. */
    gb_ints(g, "zero", 1, GB_DIMS(0));
    gb_ints(g, "ax0", 1, GB_DIMS(0));
    gb_node(g, "all", "Slice", GB_IN("x", "zero", "big", "ax0"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_value(g, "hw_dims", 2, GB_DIMS(8, 9));
    gb_assert_shape(g, "y", 4, GB_DIMS(-1, 3, 8, 9));
    cr_assert_str_eq(gb_get(g, "y")->shape.dims[0].sym, "n");
    cp_graph_free(g);
}

Test(graph_infer, test_infer_gather_shape_and_negative_index_value)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "data", F32, 3, GB_DIMS(5, 6, 7));
    gb_input(g, "idx", I64, 2, GB_DIMS(2, 3));
    int32_t n = gb_node(g, "g1", "Gather", GB_IN("data", "idx"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "axis", 1), CP_OK);
    gb_node(g, "sh", "Shape", GB_IN("data"), GB_IN("s"));
    gb_scalar(g, "last", -1);
    gb_node(g, "g2", "Gather", GB_IN("s", "last"), GB_IN("d"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(5, 2, 3, 7));
    gb_assert_shape(g, "d", 0, NULL);
    gb_assert_value(g, "d", 1, GB_DIMS(7));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_gather_index_out_of_range_is_an_error)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(4, 3));
    gb_node(g, "sh", "Shape", GB_IN("x"), GB_IN("s"));
    gb_scalar(g, "two", 2);
    gb_node(g, "pick", "Gather", GB_IN("s", "two"), GB_IN("d"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'pick'") && strstr(msg, "out of range"), "%s", msg);
    cp_graph_free(g);
}

/* fuzz/crashes/onnx/crash-e5a03f28...: scalar indices were read at dims[-1]. */
Test(graph_infer, test_infer_gather_nd_with_scalar_indices_is_an_error)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(4, 3));
    gb_input(g, "i", CP_DTYPE_I64, 0, NULL);
    gb_node(g, "gnd", "GatherND", GB_IN("x", "i"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'gnd'") && strstr(msg, "rank >= 1"), "%s", msg);
    cp_graph_free(g);
}

/* ---- Resize, Pad, Range, ConstantOfShape, Constant --------------------------------------------
 */

Test(graph_infer, test_infer_resize_from_scales_and_sizes)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 3, 10, 10));
    gb_floats(g, "scales", 4, (const float[]){1.0f, 1.0f, 2.0f, 2.5f});
    gb_node(g, "up", "Resize", GB_IN("x", "", "scales"), GB_IN("y"));
    gb_ints(g, "sizes", 4, GB_DIMS(1, 3, 7, 9));
    gb_floats(g, "empty", 0, NULL);
    gb_node(g, "down", "Resize", GB_IN("x", "", "empty", "sizes"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 3, 20, 25));
    gb_assert_shape(g, "z", 4, GB_DIMS(1, 3, 7, 9));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_pad_adds_begin_and_end)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 3, 10, 10));
    gb_ints(g, "pads", 8, GB_DIMS(0, 0, 1, 2, 0, 0, 3, 4));
    gb_node(g, "pad", "Pad", GB_IN("x", "pads"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 3, 14, 16));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_range_length_and_values)
{
    struct cp_graph *g = gb_graph(17);
    gb_scalar(g, "start", 0);
    gb_scalar(g, "limit", 10);
    gb_scalar(g, "delta", 3);
    gb_node(g, "r", "Range", GB_IN("start", "limit", "delta"), GB_IN("y"));
    gb_init(g, "fs", F32, 0, NULL, (const float[]){0.0f});
    gb_init(g, "fl", F32, 0, NULL, (const float[]){1.0f});
    gb_init(g, "fd", F32, 0, NULL, (const float[]){0.25f});
    gb_node(g, "rf", "Range", GB_IN("fs", "fl", "fd"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 1, GB_DIMS(4));
    gb_assert_value(g, "y", 4, GB_DIMS(0, 3, 6, 9));
    gb_assert_shape(g, "z", 1, GB_DIMS(4));
    cr_assert_eq(gb_get(g, "z")->dtype, F32);
    cp_graph_free(g);
}

/* limit - start does not fit in int64, the count does. */
Test(graph_infer, test_infer_range_spanning_past_int64_counts_exactly)
{
    struct cp_graph *g = gb_graph(17);
    gb_scalar(g, "start", INT64_MIN);
    gb_scalar(g, "limit", INT64_MAX);
    gb_scalar(g, "delta", (int64_t)1 << 62);
    gb_node(g, "r", "Range", GB_IN("start", "limit", "delta"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 1, GB_DIMS(4));
    int64_t q = (int64_t)1 << 62;
    gb_assert_value(g, "y", 4, GB_DIMS(INT64_MIN, INT64_MIN + q, 0, q));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_range_of_more_elements_than_int64_is_refused)
{
    struct cp_graph *g = gb_graph(17);
    gb_scalar(g, "start", INT64_MIN);
    gb_scalar(g, "limit", INT64_MAX);
    gb_scalar(g, "delta", 1);
    gb_node(g, "r", "Range", GB_IN("start", "limit", "delta"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "node 'r' (Range)") && strstr(msg, "18446744073709551615 elements"), "%s",
              msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_resize_scale_past_int64_is_refused)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 1, 4, 4));
    gb_init(g, "scales", F32, 1, GB_DIMS(4), (const float[]){1.0f, 1.0f, 1e30f, 1.0f});
    gb_node(g, "rs", "Resize", GB_IN("x", "", "scales"), GB_IN("y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "node 'rs' (Resize)") && strstr(msg, "64 bits"), "%s", msg);
    cp_graph_free(g);
}

Test(graph_infer, test_infer_constant_of_shape_default_and_typed_value)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(2, 3));
    gb_node(g, "sh", "Shape", GB_IN("x"), GB_IN("s"));
    gb_node(g, "zeros", "ConstantOfShape", GB_IN("s"), GB_IN("z"));
    gb_ints(g, "two", 1, GB_DIMS(2));
    int32_t one = gb_init(g, "one_i64", I64, 1, GB_DIMS(1), GB_DIMS(1));
    int32_t n = gb_node(g, "ones", "ConstantOfShape", GB_IN("two"), GB_IN("o"));
    cr_assert_eq(cp_node_set_tensor(g, n, "value", one), CP_OK);
    gb_infer_ok(g);
    gb_assert_shape(g, "z", 2, GB_DIMS(2, 3));
    cr_assert_eq(gb_get(g, "z")->dtype, F32);
    cr_assert_eq(gb_get(g, "o")->dtype, I64);
    gb_assert_value(g, "o", 2, GB_DIMS(1, 1));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_constant_node_values)
{
    struct cp_graph *g = gb_graph(17);
    int32_t n = gb_node(g, "c", "Constant", NULL, GB_IN("k"));
    cr_assert_eq(cp_node_set_ints(g, n, "value_ints", GB_DIMS(4, -1), 2), CP_OK);
    gb_input(g, "x", F32, 2, GB_DIMS(2, 6));
    gb_node(g, "rs", "Reshape", GB_IN("x", "k"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_value(g, "k", 2, GB_DIMS(4, -1));
    gb_assert_shape(g, "y", 2, GB_DIMS(4, 3));
    cp_graph_free(g);
}

/* ---- graph-level behaviour --------------------------------------------------------------------
 */

Test(graph_infer, test_infer_inferred_static_dims_override_declared_shape)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 2, GB_DIMS(2, 3));
    /* value_info said 7x7 (wrong) for y and ?x3 named "n" for z. */
    gb_tensor(g, "y", F32, 2, GB_DIMS(7, 7), CP_TENSOR_INTERMEDIATE);
    gb_node(g, "relu", "Relu", GB_IN("a"), GB_IN("y"));
    gb_input(g, "u", F32, 2, GB_DIMS(-1, 3));
    int32_t z = gb_tensor(g, "z", F32, 2, GB_DIMS(-1, 3), CP_TENSOR_INTERMEDIATE);
    cp_graph_tensor(g, z)->shape.dims[0].sym = "n";
    gb_node(g, "relu2", "Relu", GB_IN("u"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 2, GB_DIMS(2, 3));
    cr_assert_str_eq(gb_get(g, "z")->shape.dims[0].sym, "n");
    cp_graph_free(g);
}

Test(graph_infer, test_infer_leaves_unknown_ops_alone)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 2, GB_DIMS(2, 3));
    gb_tensor(g, "y", F32, 1, GB_DIMS(5), CP_TENSOR_INTERMEDIATE);
    gb_node(g, "custom", "MyFancyOp", GB_IN("a"), GB_IN("y"));
    gb_node(g, "after", "Relu", GB_IN("y"), GB_IN("z"));
    gb_infer_ok(g);
    gb_assert_shape(g, "y", 1, GB_DIMS(5));
    gb_assert_shape(g, "z", 1, GB_DIMS(5));
    cp_graph_free(g);
}

Test(graph_infer, test_infer_reduce_sum_with_empty_axes_initializer_reduces_all)
{
    /* ONNX models carry an empty `axes` initializer as a tensor with no
     * bytes at all; it is a known, empty list, not an unknown value. */
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", F32, 3, GB_DIMS(2, 3, 4));
    gb_init(g, "ax", CP_DTYPE_I64, 1, GB_DIMS(0), NULL);
    gb_node(g, "sum", "ReduceSum", GB_IN("x", "ax"), GB_IN("s"));
    gb_infer_ok(g);
    gb_assert_shape(g, "s", 3, GB_DIMS(1, 1, 1));
    cp_graph_free(g);
}
