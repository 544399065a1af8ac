/* Kernel harness cases of the ops as ONNX has them: conv, matmul, pooling,
 * normalisation, elementwise, reductions and data movement (included by
 * test_kernel_harness.c; rows in its table). */
#ifndef CP_TESTS_HARNESS_CASES_OPS_H
#define CP_TESTS_HARNESS_CASES_OPS_H

/* ---- cases ---------------------------------------------------------------- */

/* Conv */
static void c_conv_3x3_bias(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 12, 12));
    W(g, "w", 4, D(24, 16, 3, 3));
    W(g, "b", 1, D(24));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "kernel_shape", 3, 3);
}
static void c_conv_stride2_asym(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 8, 11, 9));
    W(g, "w", 4, D(16, 8, 3, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    INTS(g, n, "pads", 0, 1, 1, 0);
    INTS(g, n, "strides", 2, 2);
}
static void c_conv_group_dil(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 10, 10));
    W(g, "w", 4, D(12, 2, 3, 3));
    W(g, "b", 1, D(12));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    cp_node_set_int(g, n, "group", 4);
    INTS(g, n, "dilations", 2, 2);
    INTS(g, n, "pads", 2, 2, 2, 2);
}
static void c_conv_same_upper(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 9, 9));
    W(g, "w", 4, D(8, 4, 4, 4));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    cp_node_set_string(g, n, "auto_pad", "SAME_UPPER");
    INTS(g, n, "strides", 2, 2);
}
static void c_conv_1d(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 6, 20));
    W(g, "w", 3, D(5, 6, 5));
    W(g, "b", 1, D(5));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 2, 1);
}
static void c_conv_runtime_weights(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 8, 8));
    X(g, "w", 4, D(16, 16, 3, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
}
static void c_conv_stem(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 32, 32));
    W(g, "w", 4, D(16, 3, 7, 7));
    W(g, "b", 1, D(16));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 3, 3, 3, 3);
    INTS(g, n, "strides", 2, 2);
}
static void c_conv_1x1(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 64, 8, 8));
    W(g, "w", 4, D(128, 64, 1, 1));
    N(g, "Conv", I("x", "w"), I("y"));
}

/* Depthwise (group == channels): the C kernel on plain tensors */
static void c_dwconv_1d_silero(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 34, 8));
    W(g, "w", 3, D(34, 1, 5));
    W(g, "b", 1, D(34));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    cp_node_set_int(g, n, "group", 34);
    INTS(g, n, "pads", 2, 2);
}
static void c_dwconv_2d_s2_asym(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 12, 13, 11));
    W(g, "w", 4, D(12, 1, 3, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    cp_node_set_int(g, n, "group", 12);
    INTS(g, n, "pads", 0, 1, 1, 0);
    INTS(g, n, "strides", 2, 2);
}
static void c_dwconv_dil_mult(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 6, 9, 10));
    W(g, "w", 4, D(18, 1, 3, 2));
    W(g, "b", 1, D(18));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    cp_node_set_int(g, n, "group", 6);
    INTS(g, n, "dilations", 2, 3);
    INTS(g, n, "pads", 2, 1, 3, 2);
}
static void c_dwconv_same_runtime_w(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 7, 7));
    X(g, "w", 4, D(8, 1, 5, 5));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    cp_node_set_int(g, n, "group", 8);
    cp_node_set_string(g, n, "auto_pad", "SAME_LOWER");
    INTS(g, n, "strides", 2, 2);
}
static void c_dwconv_1d_s3_wide(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 4, 100));
    W(g, "w", 3, D(4, 1, 7));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    cp_node_set_int(g, n, "group", 4);
    INTS(g, n, "pads", 3, 0);
    INTS(g, n, "strides", 3);
}

/* Few output positions (batch x spatial <= 8), group 1: the C thin kernel
 * on plain tensors */
static void c_thinconv_wide_pad(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 1, 100));
    W(g, "w", 3, D(20, 1, 32));
    W(g, "b", 1, D(20));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "pads", 8, 8);
    INTS(g, n, "strides", 16);
}
static void c_thinconv_1d_s2(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 24, 3));
    W(g, "w", 3, D(12, 24, 3));
    int32_t n = N(g, "Conv", I("x", "w"), I("y"));
    INTS(g, n, "pads", 1, 1);
    INTS(g, n, "strides", 2);
}
static void c_thinconv_2d_dil_batch2(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 5, 5, 5));
    W(g, "w", 4, D(7, 5, 3, 3));
    W(g, "b", 1, D(7));
    int32_t n = N(g, "Conv", I("x", "w", "b"), I("y"));
    INTS(g, n, "dilations", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "strides", 2, 2);
}
static void c_thinconv_1x1_runtime_w(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 40, 5));
    X(g, "w", 3, D(9, 40, 1));
    N(g, "Conv", I("x", "w"), I("y"));
}

/* ConvTranspose */
static void c_deconv_s2(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 5, 5));
    W(g, "w", 4, D(8, 6, 3, 3));
    W(g, "b", 1, D(6));
    int32_t n = N(g, "ConvTranspose", I("x", "w", "b"), I("y"));
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "output_padding", 1, 1);
}
static void c_deconv_group(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 4, 6, 7));
    W(g, "w", 4, D(4, 3, 2, 2));
    int32_t n = N(g, "ConvTranspose", I("x", "w"), I("y"));
    cp_node_set_int(g, n, "group", 2);
    INTS(g, n, "strides", 2, 2);
}

/* MatMul */
static void c_mm_attention(struct cp_graph *g)
{
    X(g, "a", 4, D(1, 4, 64, 16));
    X(g, "b", 4, D(1, 4, 16, 64));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_const_b(struct cp_graph *g)
{
    X(g, "a", 3, D(2, 30, 64));
    W(g, "b", 2, D(64, 48));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_bcast(struct cp_graph *g)
{
    X(g, "a", 4, D(3, 1, 4, 5));
    X(g, "b", 3, D(2, 5, 6));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_bcast_a(struct cp_graph *g)
{
    X(g, "a", 3, D(1, 4, 5));
    X(g, "b", 3, D(3, 5, 2));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_vec_mat(struct cp_graph *g)
{
    X(g, "a", 1, D(7));
    X(g, "b", 3, D(2, 7, 3));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_mat_vec(struct cp_graph *g)
{
    X(g, "a", 2, D(5, 7));
    W(g, "b", 1, D(7));
    N(g, "MatMul", I("a", "b"), I("y"));
}

static void c_mm_pv(struct cp_graph *g)
{
    X(g, "a", 4, D(1, 2, 64, 256));
    X(g, "b", 4, D(1, 2, 256, 16));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_pv_shared_b(struct cp_graph *g)
{
    X(g, "a", 3, D(2, 70, 300));
    W(g, "b", 2, D(300, 16));
    N(g, "MatMul", I("a", "b"), I("y"));
}
static void c_mm_pv_odd(struct cp_graph *g)
{
    X(g, "a", 3, D(3, 33, 257));
    X(g, "b", 3, D(3, 257, 16));
    N(g, "MatMul", I("a", "b"), I("y"));
}

/* Gemm */
static void c_gemm_linear(struct cp_graph *g)
{
    X(g, "a", 2, D(3, 64));
    W(g, "b", 2, D(10, 64));
    W(g, "c", 1, D(10));
    int32_t n = N(g, "Gemm", I("a", "b", "c"), I("y"));
    cp_node_set_int(g, n, "transB", 1);
}
static void c_gemm_alpha_beta(struct cp_graph *g)
{
    X(g, "a", 2, D(9, 5));
    X(g, "b", 2, D(9, 7));
    X(g, "c", 2, D(5, 7));
    int32_t n = N(g, "Gemm", I("a", "b", "c"), I("y"));
    cp_node_set_int(g, n, "transA", 1);
    cp_node_set_float(g, n, "alpha", 0.5f);
    cp_node_set_float(g, n, "beta", 2.0f);
}
static void c_gemm_col_c(struct cp_graph *g)
{
    X(g, "a", 2, D(6, 4));
    W(g, "b", 2, D(4, 5));
    W(g, "c", 2, D(6, 1));
    N(g, "Gemm", I("a", "b", "c"), I("y"));
}
static void c_gemm_no_c(struct cp_graph *g)
{
    X(g, "a", 2, D(4, 8));
    X(g, "b", 2, D(3, 8));
    int32_t n = N(g, "Gemm", I("a", "b"), I("y"));
    cp_node_set_int(g, n, "transB", 1);
    cp_node_set_float(g, n, "alpha", 1.5f);
}

/* Pooling */
static void c_maxpool_stem(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 16, 16));
    int32_t n = N(g, "MaxPool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
}
static void c_maxpool_ceil(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 3, 10, 9));
    int32_t n = N(g, "MaxPool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 2);
    INTS(g, n, "strides", 2, 2);
    cp_node_set_int(g, n, "ceil_mode", 1);
}
static void c_avgpool_excl(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 9, 9));
    int32_t n = N(g, "AveragePool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "strides", 2, 2);
    INTS(g, n, "pads", 1, 1, 1, 1);
}
static void c_avgpool_incl(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 8, 8));
    int32_t n = N(g, "AveragePool", I("x"), I("y"));
    INTS(g, n, "kernel_shape", 3, 3);
    INTS(g, n, "pads", 1, 1, 1, 1);
    cp_node_set_int(g, n, "count_include_pad", 1);
}
static void c_gap(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 64, 8, 8));
    N(g, "GlobalAveragePool", I("x"), I("y"));
}

/* Normalisation */
static void c_softmax_last(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 32, 80));
    N(g, "Softmax", I("x"), I("y"));
}
static void c_softmax_ragged(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 4, 32, 77));
    N(g, "Softmax", I("x"), I("y"));
}
static void c_softmax_axis1(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 5, 16));
    int32_t n = N(g, "Softmax", I("x"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_softmax_wide(struct cp_graph *g)
{
    X(g, "x", 2, D(8, 1024));
    N(g, "Softmax", I("x"), I("y"));
}
static void c_layernorm(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 128, 64));
    W(g, "s", 1, D(64));
    W(g, "b", 1, D(64));
    N(g, "LayerNormalization", I("x", "s", "b"), I("y"));
}
/* Rows of 96 drawn from [-12, 12) (c:layer_norm's 16-lane path) with 37
 * of them, so the threads split unevenly. */
static void c_layernorm_wide(struct cp_graph *g)
{
    X(g, "x", 2, D(37, 96));
    W(g, "s", 1, D(96));
    W(g, "b", 1, D(96));
    N(g, "LayerNormalization", I("x", "s", "b"), I("y"));
}
static void c_layernorm_axis(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 4, 5));
    W(g, "s", 2, D(4, 5));
    int32_t n = N(g, "LayerNormalization", I("x", "s"), I("y"));
    cp_node_set_int(g, n, "axis", -2);
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}
static void bn_params(struct cp_graph *g, int64_t c)
{
    W(g, "s", 1, D(c));
    W(g, "b", 1, D(c));
    W(g, "m", 1, D(c));
    int64_t n = c;
    float *v = malloc((size_t)c * sizeof *v);
    fill(v, CP_DTYPE_F32, c, 7, IN_POSITIVE);
    gb_init(g, "v", CP_DTYPE_F32, 1, &n, v);
    free(v);
}
static void c_batchnorm(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 16, 7, 7));
    bn_params(g, 16);
    N(g, "BatchNormalization", I("x", "s", "b", "m", "v"), I("y"));
}
static void c_batchnorm_2d(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 12));
    bn_params(g, 12);
    N(g, "BatchNormalization", I("x", "s", "b", "m", "v"), I("y"));
}
static void c_instnorm_group(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 8, 2048));
    W(g, "s", 1, D(8));
    W(g, "b", 1, D(8));
    N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
}
static void c_instnorm_4d(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 3, 5, 5));
    W(g, "s", 1, D(3));
    W(g, "b", 1, D(3));
    int32_t n = N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}
/* Batch of 4 and gamma/beta fed at run time: kernels cannot copy them at
 * prepare. */
static void c_instnorm_3d_runtime(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 300));
    X(g, "s", 1, D(6));
    X(g, "b", 1, D(6));
    N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
}
static void c_instnorm_4d_large(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 16, 32, 32));
    W(g, "s", 1, D(16));
    W(g, "b", 1, D(16));
    N(g, "InstanceNormalization", I("x", "s", "b"), I("y"));
}

/* Binary */
#define BINARY_CASE(fn, op, ra, da, rb, db)                                                        \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "a", ra, da);                                                                         \
        X(g, "b", rb, db);                                                                         \
        N(g, op, I("a", "b"), I("y"));                                                             \
    }
BINARY_CASE(c_add_same, "Add", 4, D(1, 64, 32, 32), 4, D(1, 64, 32, 32))
BINARY_CASE(c_mul_scalar, "Mul", 4, D(1, 4, 64, 64), 0, NULL)
BINARY_CASE(c_mul_channel, "Mul", 4, D(1, 64, 16, 16), 3, D(64, 1, 1))
BINARY_CASE(c_add_bias, "Add", 3, D(1, 1024, 64), 1, D(64))
BINARY_CASE(c_sub_outer, "Sub", 3, D(3, 1, 5), 3, D(1, 4, 1))
BINARY_CASE(c_div_abcast, "Div", 2, D(1, 5), 2, D(4, 5))
BINARY_CASE(c_add_time, "Add", 4, D(1, 64, 32, 32), 4, D(1, 64, 1, 1))
BINARY_CASE(c_div_row, "Div", 3, D(1, 128, 64), 3, D(1, 128, 1))
BINARY_CASE(c_add_small, "Add", 1, D(3), 1, D(1))
/* Rows of 7 split between threads at multiples of 16: partial rows. */
BINARY_CASE(c_add_short_rows, "Add", 3, D(3, 1037, 7), 1, D(7))
BINARY_CASE(c_sub_bcast_a_rows, "Sub", 3, D(5, 1, 16), 3, D(5, 700, 16))
BINARY_CASE(c_mul_nhwc_channel, "Mul", 4, D(1, 64, 64, 16), 1, D(16))
/* The broadcast operand first: oneDNN kernels swap Add and Mul and decline
 * Sub and Div. */
BINARY_CASE(c_add_channel_first, "Add", 4, D(1, 64, 1, 1), 4, D(1, 64, 32, 32))
BINARY_CASE(c_mul_scalar_first, "Mul", 0, NULL, 3, D(2, 8, 64))
BINARY_CASE(c_sub_channel_first, "Sub", 4, D(1, 8, 1, 1), 4, D(2, 8, 5, 5))
BINARY_CASE(c_sub_channel, "Sub", 4, D(2, 8, 5, 5), 4, D(1, 8, 1, 1))
BINARY_CASE(c_div_scalar, "Div", 3, D(2, 8, 64), 0, NULL)
BINARY_CASE(c_add_scalars, "Add", 0, NULL, 0, NULL)

static void c_where(struct cp_graph *g)
{
    gb_input(g, "c", CP_DTYPE_BOOL, 2, D(4, 1));
    X(g, "a", 2, D(4, 6));
    X(g, "b", 1, D(6));
    N(g, "Where", I("c", "a", "b"), I("y"));
}

/* Unary */
#define UNARY_CASE(fn, op, r, d)                                                                   \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "x", r, d);                                                                           \
        N(g, op, I("x"), I("y"));                                                                  \
    }
UNARY_CASE(c_relu, "Relu", 4, D(1, 16, 32, 32))
UNARY_CASE(c_sigmoid, "Sigmoid", 4, D(1, 64, 32, 32))
UNARY_CASE(c_exp, "Exp", 2, D(3, 1000))
UNARY_CASE(c_sqrt, "Sqrt", 2, D(3, 1000))
UNARY_CASE(c_erf, "Erf", 3, D(1, 1024, 256))
UNARY_CASE(c_erf_small, "Erf", 1, D(37))
UNARY_CASE(c_tanh, "Tanh", 2, D(3, 1000))

static void c_leaky(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    int32_t n = N(g, "LeakyRelu", I("x"), I("y"));
    cp_node_set_float(g, n, "alpha", 0.2f);
}
static void c_clip_both(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    F(g, "lo", -0.25f);
    F(g, "hi", 0.5f);
    N(g, "Clip", I("x", "lo", "hi"), I("y"));
}
static void c_clip_min(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    F(g, "lo", 0.0f);
    N(g, "Clip", I("x", "lo"), I("y"));
}
#define POW_CASE(fn, e)                                                                            \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "x", 3, D(1, 128, 64));                                                               \
        F(g, "e", e);                                                                              \
        N(g, "Pow", I("x", "e"), I("y"));                                                          \
    }
POW_CASE(c_pow2, 2.0f)
POW_CASE(c_pow3, 3.0f)
POW_CASE(c_pow_half, 0.5f)
POW_CASE(c_pow_general, 1.7f)

/* Reductions */
static void c_rmean_last(struct cp_graph *g)
{
    X(g, "x", 3, D(1, 128, 64));
    int32_t n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", -1);
}
static void c_rmean_hw(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 8, 16, 16));
    int32_t n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", 2, 3);
    cp_node_set_int(g, n, "keepdims", 0);
}
static void c_rmean_channel(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 16, 16));
    int32_t n = N(g, "ReduceMean", I("x"), I("y"));
    INTS(g, n, "axes", 1);
}
static void c_rsum_input_axes(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 5));
    gb_ints(g, "ax", 1, (const int64_t[]){1});
    N(g, "ReduceSum", I("x", "ax"), I("y"));
}
static void c_rsum_all(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 5));
    N(g, "ReduceSum", I("x"), I("y"));
}
static void c_rmax_first(struct cp_graph *g)
{
    X(g, "x", 3, D(7, 3, 5));
    int32_t n = N(g, "ReduceMax", I("x"), I("y"));
    INTS(g, n, "axes", 0);
    cp_node_set_int(g, n, "keepdims", 0);
}

/* Data movement */
static void c_transpose_heads(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 64, 4, 16));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 2, 1, 3);
}
static void c_transpose_kt(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 77, 4, 16));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 2, 3, 1);
}
static void c_transpose_default(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 4, 5));
    N(g, "Transpose", I("x"), I("y"));
}
static void c_transpose_i64(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_I64, 2, D(3, 7));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 1, 0);
}
/* Matrix transposes once dims are merged (c:transpose): NCHW -> NHWC of a
 * U-Net block (whole 16 x 16 tiles), back with a batch of 2 and edges in
 * both directions, and a plain 2-D one. */
static void c_transpose_to_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 64, 32, 32));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 2, 3, 1);
}
static void c_transpose_to_nchw_edges(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 5, 7, 40));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 0, 3, 1, 2);
}
static void c_transpose_2d(struct cp_graph *g)
{
    X(g, "x", 2, D(100, 33));
    int32_t n = N(g, "Transpose", I("x"), I("y"));
    INTS(g, n, "perm", 1, 0);
}
static void c_concat(struct cp_graph *g)
{
    X(g, "a", 4, D(1, 64, 8, 8));
    X(g, "b", 4, D(1, 32, 8, 8));
    X(g, "c", 4, D(1, 3, 8, 8));
    int32_t n = N(g, "Concat", I("a", "b", "c"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_concat_last(struct cp_graph *g)
{
    X(g, "a", 2, D(3, 2));
    X(g, "b", 2, D(3, 5));
    int32_t n = N(g, "Concat", I("a", "b"), I("y"));
    cp_node_set_int(g, n, "axis", -1);
}
static void c_split(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 6, 4));
    gb_ints(g, "s", 3, (const int64_t[]){2, 3, 1});
    int32_t n = N(g, "Split", I("x", "s"), I("y0", "y1", "y2"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_slice_step(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 10, 6));
    gb_ints(g, "st", 2, (const int64_t[]){1, -1});
    gb_ints(g, "en", 2, (const int64_t[]){9, 0});
    gb_ints(g, "ax", 2, (const int64_t[]){1, 2});
    gb_ints(g, "sp", 2, (const int64_t[]){2, -2});
    N(g, "Slice", I("x", "st", "en", "ax", "sp"), I("y"));
}
static void c_slice_simple(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 8));
    gb_ints(g, "st", 1, (const int64_t[]){2});
    gb_ints(g, "en", 1, (const int64_t[]){INT64_MAX});
    gb_ints(g, "ax", 1, (const int64_t[]){-1});
    N(g, "Slice", I("x", "st", "en", "ax"), I("y"));
}
static void c_gather0(struct cp_graph *g)
{
    X(g, "x", 2, D(10, 6));
    gb_ints(g, "i", 4, (const int64_t[]){3, -1, 0, 3});
    N(g, "Gather", I("x", "i"), I("y"));
}
static void c_gather1(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 5, 3));
    gb_init(g, "i", CP_DTYPE_I64, 2, D(2, 2), (const int64_t[]){4, 0, 1, -2});
    int32_t n = N(g, "Gather", I("x", "i"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
}
static void c_resize_2x(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 16, 16));
    gb_init(g, "sc", CP_DTYPE_F32, 1, D(4), (const float[]){1, 1, 2, 2});
    int32_t n = N(g, "Resize", I("x", "", "sc"), I("y"));
    cp_node_set_string(g, n, "mode", "nearest");
    cp_node_set_string(g, n, "coordinate_transformation_mode", "asymmetric");
    cp_node_set_string(g, n, "nearest_mode", "floor");
}
/* 2x nearest with the default half_pixel mapping (each element and each
 * row doubled), large enough for two threads, split at an odd row. */
static void c_resize_2x_threads(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 37, 33, 33));
    gb_init(g, "sc", CP_DTYPE_F32, 1, D(4), (const float[]){1, 1, 2, 2});
    int32_t n = N(g, "Resize", I("x", "", "sc"), I("y"));
    cp_node_set_string(g, n, "mode", "nearest");
}
static void c_resize_sizes(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 2, 5, 7));
    gb_ints(g, "sz", 4, (const int64_t[]){1, 2, 8, 3});
    int32_t n = N(g, "Resize", I("x", "", "", "sz"), I("y"));
    cp_node_set_string(g, n, "mode", "nearest");
}
/* Interpolation (fast_resize.c): a segmentation head's 8x bilinear
 * upsampling with PyTorch's align_corners=False, large enough for two
 * threads; align_corners with sizes; a bicubic downsampling; a linear
 * resize of a leading axis, which only the reference loop does. */
static void c_resize_bilinear_8x(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 21, 12, 13));
    gb_init(g, "sc", CP_DTYPE_F32, 1, D(4), (const float[]){1, 1, 8, 8});
    int32_t n = N(g, "Resize", I("x", "", "sc"), I("y"));
    cp_node_set_string(g, n, "mode", "linear");
    cp_node_set_string(g, n, "coordinate_transformation_mode", "pytorch_half_pixel");
}
static void c_resize_bilinear_align_sizes(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 3, 7, 5));
    gb_ints(g, "sz", 4, (const int64_t[]){2, 3, 15, 11});
    int32_t n = N(g, "Resize", I("x", "", "", "sz"), I("y"));
    cp_node_set_string(g, n, "mode", "linear");
    cp_node_set_string(g, n, "coordinate_transformation_mode", "align_corners");
}
static void c_resize_cubic_down(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 19, 23));
    gb_init(g, "sc", CP_DTYPE_F32, 1, D(3), (const float[]){1, 0.6f, 0.5f});
    int32_t n = N(g, "Resize", I("x", "", "sc"), I("y"));
    cp_node_set_string(g, n, "mode", "cubic");
    cp_node_set_int(g, n, "exclude_outside", 1);
}
/* Pad, constant mode (fast_copy.c): Inception's pooling pads, a non-zero
 * constant with negative (cropping) pads on a leading and the last axis,
 * and 2-byte elements. */
static void c_pad_pool(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 24, 17, 17));
    gb_ints(g, "p", 8, (const int64_t[]){0, 0, 1, 1, 0, 0, 1, 1});
    N(g, "Pad", I("x", "p"), I("y"));
}
static void c_pad_crop_value(struct cp_graph *g)
{
    X(g, "x", 3, D(5, 6, 9));
    gb_ints(g, "p", 6, (const int64_t[]){-1, 2, 3, 1, 0, -4});
    gb_init(g, "v", CP_DTYPE_F32, 0, NULL, (const float[]){-2.5f});
    N(g, "Pad", I("x", "p", "v"), I("y"));
}
static void c_pad_f16(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_F16, 2, D(7, 5));
    gb_ints(g, "p", 4, (const int64_t[]){2, 0, 1, 3});
    N(g, "Pad", I("x", "p"), I("y"));
}
static void c_resize_linear_leading_axis(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 4, 5));
    gb_init(g, "sc", CP_DTYPE_F32, 1, D(4), (const float[]){1, 2, 2, 1});
    int32_t n = N(g, "Resize", I("x", "", "sc"), I("y"));
    cp_node_set_string(g, n, "mode", "linear");
}

#endif
