/* Kernel harness cases of the operator families issue 13 added: recurrent
 * and signal, elementwise, nn and quantized ops (included by
 * test_kernel_harness.c; the reduce_index family has harness_reduce_index.h). */
#ifndef CP_TESTS_HARNESS_CASES_FAMILIES_H
#define CP_TESTS_HARNESS_CASES_FAMILIES_H

/* ---- [rnn] ---- */
/* LSTM and GRU: the oneDNN projection + C recurrence against ref_rnn.c. */
static void seq_lens(struct cp_graph *g, const char *name, int64_t n, const int32_t *v)
{
    gb_init(g, name, CP_DTYPE_I32, 1, &n, v);
}
static void c_lstm_plain(struct cp_graph *g)
{
    X(g, "x", 3, D(5, 3, 8));
    W(g, "w", 3, D(1, 64, 8));
    W(g, "r", 3, D(1, 64, 16));
    int32_t n = N(g, "LSTM", I("x", "w", "r"), I("y", "yh", "yc"));
    cp_node_set_int(g, n, "hidden_size", 16);
}
static void c_lstm_bidir_full(struct cp_graph *g)
{
    static const int32_t len[4] = {6, 3, 0, 5};
    X(g, "x", 3, D(6, 4, 5));
    W(g, "w", 3, D(2, 28, 5));
    W(g, "r", 3, D(2, 28, 7));
    W(g, "b", 2, D(2, 56));
    seq_lens(g, "len", 4, len);
    X(g, "h0", 3, D(2, 4, 7));
    X(g, "c0", 3, D(2, 4, 7));
    W(g, "p", 2, D(2, 21));
    int32_t n = N(g, "LSTM", I("x", "w", "r", "b", "len", "h0", "c0", "p"), I("y", "yh", "yc"));
    cp_node_set_int(g, n, "hidden_size", 7);
    cp_node_set_string(g, n, "direction", "bidirectional");
    cp_node_set_float(g, n, "clip", 0.7f);
}
static void c_lstm_batch_first_reverse_coupled(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 9, 4));
    W(g, "w", 3, D(1, 20, 4));
    W(g, "r", 3, D(1, 20, 5));
    W(g, "b", 2, D(1, 40));
    int32_t n = N(g, "LSTM", I("x", "w", "r", "b"), I("y", "yh"));
    cp_node_set_int(g, n, "layout", 1);
    cp_node_set_int(g, n, "input_forget", 1);
    cp_node_set_string(g, n, "direction", "reverse");
}
static void c_gru_plain(struct cp_graph *g)
{
    X(g, "x", 3, D(7, 2, 6));
    W(g, "w", 3, D(1, 33, 6));
    W(g, "r", 3, D(1, 33, 11));
    W(g, "b", 2, D(1, 66));
    int32_t n = N(g, "GRU", I("x", "w", "r", "b"), I("y", "yh"));
    cp_node_set_int(g, n, "hidden_size", 11);
}
static void c_gru_bidir_lbr_lens(struct cp_graph *g)
{
    static const int32_t len[3] = {2, 4, 1};
    X(g, "x", 3, D(3, 4, 5));
    W(g, "w", 3, D(2, 24, 5));
    W(g, "r", 3, D(2, 24, 8));
    W(g, "b", 2, D(2, 48));
    seq_lens(g, "len", 3, len);
    X(g, "h0", 3, D(3, 2, 8));
    int32_t n = N(g, "GRU", I("x", "w", "r", "b", "len", "h0"), I("y", "yh"));
    cp_node_set_string(g, n, "direction", "bidirectional");
    cp_node_set_int(g, n, "linear_before_reset", 1);
    cp_node_set_int(g, n, "layout", 1);
}
static void c_rnn_bidir_clip_lens(struct cp_graph *g)
{
    static const int32_t len[3] = {5, 0, 3};
    X(g, "x", 3, D(5, 3, 6));
    W(g, "w", 3, D(2, 9, 6));
    W(g, "r", 3, D(2, 9, 9));
    W(g, "b", 2, D(2, 18));
    seq_lens(g, "len", 3, len);
    X(g, "h0", 3, D(2, 3, 9));
    int32_t n = N(g, "RNN", I("x", "w", "r", "b", "len", "h0"), I("y", "yh"));
    cp_node_set_string(g, n, "direction", "bidirectional");
    cp_node_set_float(g, n, "clip", 0.9f);
}
/* Batch 1 with R big enough (gates x hidden x hidden >= 65536) that the
 * threads share each step's dot products. */
static void c_lstm_batch1_wide(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 1, 16));
    W(g, "w", 3, D(2, 512, 16));
    W(g, "r", 3, D(2, 512, 128));
    W(g, "b", 2, D(2, 1024));
    int32_t n = N(g, "LSTM", I("x", "w", "r", "b"), I("y", "yh", "yc"));
    cp_node_set_string(g, n, "direction", "bidirectional");
}
static void c_gru_batch1_wide(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 1, 16));
    W(g, "w", 3, D(1, 480, 16));
    W(g, "r", 3, D(1, 480, 160));
    int32_t n = N(g, "GRU", I("x", "w", "r"), I("y", "yh"));
    cp_node_set_int(g, n, "hidden_size", 160);
}
/* Batch 1, R a runtime input: the dot products, not the transposed copy
 * of a constant R. */
static void c_lstm_runtime_r(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 1, 6));
    W(g, "w", 3, D(1, 36, 6));
    X(g, "r", 3, D(1, 36, 9));
    W(g, "b", 2, D(1, 72));
    int32_t n = N(g, "LSTM", I("x", "w", "r", "b"), I("y", "yh", "yc"));
    cp_node_set_int(g, n, "hidden_size", 9);
}
/* ---- end [rnn] ---- */
/* ---- [elementwise] ---- */
UNARY_CASE(c_hard_swish, "HardSwish", 4, D(1, 16, 33, 32))
UNARY_CASE(c_elu, "Elu", 2, D(3, 1000))
UNARY_CASE(c_softplus, "Softplus", 2, D(3, 1000))
UNARY_CASE(c_mish, "Mish", 4, D(1, 8, 64, 65))
UNARY_CASE(c_neg, "Neg", 2, D(3, 1001))
UNARY_CASE(c_reciprocal, "Reciprocal", 2, D(3, 1000))
UNARY_CASE(c_abs, "Abs", 2, D(3, 1000))
UNARY_CASE(c_floor, "Floor", 2, D(3, 1000))
UNARY_CASE(c_ceil, "Ceil", 2, D(3, 1000))
UNARY_CASE(c_log, "Log", 2, D(3, 1000))
UNARY_CASE(c_sin, "Sin", 2, D(3, 1000))
UNARY_CASE(c_cos, "Cos", 3, D(1, 77, 640))
static void c_hard_sigmoid(struct cp_graph *g)
{
    X(g, "x", 2, D(5, 300));
    int32_t n = N(g, "HardSigmoid", I("x"), I("y"));
    cp_node_set_float(g, n, "alpha", 1.0f / 6.0f);
}
static void c_elu_alpha(struct cp_graph *g)
{
    X(g, "x", 1, D(1000));
    int32_t n = N(g, "Elu", I("x"), I("y"));
    cp_node_set_float(g, n, "alpha", 0.5f);
}
static void c_prelu_channel(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 20, 20));
    W(g, "slope", 3, D(16, 1, 1));
    N(g, "PRelu", I("x", "slope"), I("y"));
}
BINARY_CASE(c_prelu_scalar, "PRelu", 3, D(2, 8, 50), 1, D(1))
BINARY_CASE(c_prelu_last, "PRelu", 3, D(2, 8, 50), 1, D(50))
BINARY_CASE(c_max2_bcast, "Max", 3, D(2, 8, 50), 1, D(50))
BINARY_CASE(c_max2_long, "Max", 1, D(100000), 1, D(100000))
BINARY_CASE(c_min2_scalar, "Min", 3, D(2, 8, 50), 0, NULL)
BINARY_CASE(c_greater_bcast, "Greater", 3, D(2, 8, 50), 3, D(2, 1, 50))
BINARY_CASE(c_less_scalar, "Less", 2, D(7, 300), 0, NULL)
BINARY_CASE(c_ge_same, "GreaterOrEqual", 2, D(7, 300), 2, D(7, 300))
BINARY_CASE(c_le_first, "LessOrEqual", 1, D(1), 2, D(7, 300))
/* ---- end [elementwise] ---- */
/* ---- [nn] ---- */
static void c_lrn5(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 13, 5, 6));
    int32_t n = N(g, "LRN", I("x"), I("y"));
    cp_node_set_int(g, n, "size", 5);
    cp_node_set_float(g, n, "alpha", 0.02f);
    cp_node_set_float(g, n, "beta", 0.7f);
    cp_node_set_float(g, n, "bias", 1.5f);
}
static void c_lrn_nhwc(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 16, 7, 7));
    int32_t n = N(g, "LRN", I("x"), I("y"));
    cp_node_set_int(g, n, "size", 3);
    L(g, "x", CP_LAYOUT_NHWC);
    L(g, "y", CP_LAYOUT_NHWC);
}
static void c_d2s_dcr(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 12, 3, 5));
    int32_t n = N(g, "DepthToSpace", I("x"), I("y"));
    cp_node_set_int(g, n, "blocksize", 2);
}
static void c_d2s_crd(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 18, 4, 3));
    int32_t n = N(g, "DepthToSpace", I("x"), I("y"));
    cp_node_set_int(g, n, "blocksize", 3);
    cp_node_set_string(g, n, "mode", "CRD");
}
static void c_s2d(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 3, 6, 4));
    int32_t n = N(g, "SpaceToDepth", I("x"), I("y"));
    cp_node_set_int(g, n, "blocksize", 2);
}
static void c_roi_align(struct cp_graph *g)
{
    X(g, "x", 4, D(2, 5, 9, 11));
    const float rois[] = {0.5f, 1, 7, 6.5f, -2, -1, 12, 10, 3, 3, 3.5f, 3.2f, 1, 2, 9.5f, 8};
    const int64_t bi[] = {0, 1, 1, 0};
    gb_init(g, "r", CP_DTYPE_F32, 2, D(4, 4), rois);
    gb_init(g, "b", CP_DTYPE_I64, 1, D(4), bi);
    int32_t n = N(g, "RoiAlign", I("x", "r", "b"), I("y"));
    cp_node_set_int(g, n, "output_height", 3);
    cp_node_set_int(g, n, "output_width", 2);
    cp_node_set_float(g, n, "spatial_scale", 0.9f);
}
static void c_roi_align_ratio(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 3, 8, 8));
    const float rois[] = {0, 0, 7, 7, 2.5f, 1, 5, 6};
    const int64_t bi[] = {0, 0};
    gb_init(g, "r", CP_DTYPE_F32, 2, D(2, 4), rois);
    gb_init(g, "b", CP_DTYPE_I64, 1, D(2), bi);
    int32_t n = N(g, "RoiAlign", I("x", "r", "b"), I("y"));
    cp_node_set_int(g, n, "output_height", 2);
    cp_node_set_int(g, n, "output_width", 2);
    cp_node_set_int(g, n, "sampling_ratio", 2);
    cp_node_set_string(g, n, "coordinate_transformation_mode", "output_half_pixel");
}
static void gs_case(struct cp_graph *g, const char *mode, const char *pad, int64_t align)
{
    X(g, "x", 4, D(2, 5, 6, 7));
    int64_t gd[] = {2, 4, 9, 2};
    float grid[2 * 4 * 9 * 2];
    for (int i = 0; i < 2 * 4 * 9 * 2; i++)
        grid[i] = -1.3f + 2.6f * (float)((i * 37) % 71) / 70.0f;
    gb_init(g, "gr", CP_DTYPE_F32, 4, gd, grid);
    int32_t n = N(g, "GridSample", I("x", "gr"), I("y"));
    cp_node_set_string(g, n, "mode", mode);
    cp_node_set_string(g, n, "padding_mode", pad);
    cp_node_set_int(g, n, "align_corners", align);
}
static void c_gs_bilinear_zeros(struct cp_graph *g)
{
    gs_case(g, "bilinear", "zeros", 0);
}
static void c_gs_bilinear_border_ac(struct cp_graph *g)
{
    gs_case(g, "bilinear", "border", 1);
}
static void c_gs_bilinear_reflection(struct cp_graph *g)
{
    gs_case(g, "bilinear", "reflection", 0);
}
static void c_gs_nearest_reflection_ac(struct cp_graph *g)
{
    gs_case(g, "nearest", "reflection", 1);
}
/* ---- end [nn] ---- */
/* ---- [quant] ---- */
/* Integer convolutions and matmuls: s8 weights of 7 bits (oneDNN's int8
 * kernels are exact without VNNI only then) and of 8 bits (they need VNNI:
 * not available on AVX2 hosts), per-tensor and per-channel scales, zero
 * points. Graph inputs are u8 (the fill's 0..127 pattern). */
static void QI8(struct cp_graph *g, const char *name, int rank, const int64_t *dims, int bits)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    int8_t *v = malloc((size_t)(n ? n : 1));
    cr_assert_not_null(v);
    uint64_t s = name_seed(name) | 1;
    int range = bits == 7 ? 64 : 127;
    for (int64_t i = 0; i < n; i++)
        v[i] = (int8_t)((int)(rng_next(&s) % (uint64_t)(2 * range + 1)) - range);
    gb_init(g, name, CP_DTYPE_I8, rank, dims, v);
    free(v);
}

static void qparams(struct cp_graph *g, int64_t channels)
{
    F(g, "xs", 0.02f);
    uint8_t xz = 7, yz = 100;
    gb_init(g, "xz", CP_DTYPE_U8, 0, NULL, &xz);
    float ws[64];
    int8_t wz[64] = {0};
    for (int64_t i = 0; i < channels; i++)
        ws[i] = 0.01f + 0.001f * (float)i;
    gb_init(g, "ws", CP_DTYPE_F32, 1, &channels, ws);
    gb_init(g, "wz", CP_DTYPE_I8, 1, &channels, wz);
    F(g, "ys", 0.37f);
    gb_init(g, "yz", CP_DTYPE_U8, 0, NULL, &yz);
}

static void qconv(struct cp_graph *g, int bits)
{
    gb_input(g, "x", CP_DTYPE_U8, 4, D(1, 16, 10, 10));
    QI8(g, "w", 4, D(24, 16, 3, 3), bits);
    qparams(g, 24);
    int32_t b[24];
    for (int i = 0; i < 24; i++)
        b[i] = i * 37 - 400;
    gb_init(g, "b", CP_DTYPE_I32, 1, D(24), b);
    int32_t n = N(g, "QLinearConv", I("x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"), I("y"));
    INTS(g, n, "pads", 1, 1, 1, 1);
    INTS(g, n, "strides", 1, 2);
}
static void c_qlinear_conv_7bit(struct cp_graph *g)
{
    qconv(g, 7);
}
static void c_qlinear_conv_8bit(struct cp_graph *g)
{
    qconv(g, 8);
}
static void c_conv_integer_group_7bit(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 4, D(1, 8, 9, 9));
    QI8(g, "w", 4, D(8, 4, 3, 3), 7);
    uint8_t xz = 3;
    gb_init(g, "xz", CP_DTYPE_U8, 0, NULL, &xz);
    int32_t n = N(g, "ConvInteger", I("x", "w", "xz"), I("y"));
    cp_node_set_int(g, n, "group", 2);
    INTS(g, n, "pads", 1, 0, 1, 2);
}
static void c_qlinear_matmul_7bit(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 3, D(2, 5, 32));
    QI8(g, "w", 2, D(32, 24), 7);
    qparams(g, 24);
    N(g, "QLinearMatMul", I("x", "xs", "xz", "w", "ws", "wz", "ys", "yz"), I("y"));
}
static void c_matmul_integer_7bit(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 2, D(6, 40));
    QI8(g, "w", 2, D(40, 16), 7);
    uint8_t xz = 128;
    gb_init(g, "xz", CP_DTYPE_U8, 0, NULL, &xz);
    N(g, "MatMulInteger", I("x", "w", "xz"), I("y"));
}
static void c_quantize_per_tensor_u8(struct cp_graph *g)
{
    X(g, "x", 4, D(1, 8, 33, 17));
    F(g, "s", 0.013f);
    uint8_t z = 128;
    gb_init(g, "z", CP_DTYPE_U8, 0, NULL, &z);
    N(g, "QuantizeLinear", I("x", "s", "z"), I("y"));
}
static void c_quantize_per_axis_i8(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 6, 50));
    float s[6] = {0.01f, 0.02f, 0.05f, 0.1f, 0.003f, 1.0f};
    int8_t z[6] = {0, 3, -7, 100, -128, 1};
    gb_init(g, "s", CP_DTYPE_F32, 1, D(6), s);
    gb_init(g, "z", CP_DTYPE_I8, 1, D(6), z);
    N(g, "QuantizeLinear", I("x", "s", "z"), I("y"));
}
static void c_dequantize_per_axis_u8(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_U8, 2, D(37, 5));
    float s[5] = {0.01f, 0.02f, 0.05f, 0.1f, 3.0f};
    uint8_t z[5] = {0, 3, 7, 100, 255};
    gb_init(g, "s", CP_DTYPE_F32, 1, D(5), s);
    gb_init(g, "z", CP_DTYPE_U8, 1, D(5), z);
    int32_t n = N(g, "DequantizeLinear", I("x", "s", "z"), I("y"));
    cp_node_set_int(g, n, "axis", -1);
}
static void c_dequantize_per_tensor_i8(struct cp_graph *g)
{
    gb_input(g, "x", CP_DTYPE_I8, 1, D(300000));
    F(g, "s", 0.25f);
    N(g, "DequantizeLinear", I("x", "s"), I("y"));
}
/* ---- end [quant] ---- */

#endif
