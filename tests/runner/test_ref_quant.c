/* Reference kernels of the quantization ops, by hand: rounding half to
 * even and saturation, per-tensor / per-axis / blocked (opset 21) scales,
 * int16 and uint16, per-row and per-column zero points of the integer
 * matmuls, per-channel QLinearConv; and inference refusing malformed
 * parameters with the node named. */
#include "runner/ref_test_util.h"

#define I8(...)  ((const int8_t[]){__VA_ARGS__})
#define I16(...) ((const int16_t[]){__VA_ARGS__})
#define U16(...) ((const uint16_t[]){__VA_ARGS__})

/* Integers of any width (kd_expect_ints reads 8, 32 and 64 bits). */
static void expect_elems(const struct kd_run *r, size_t i, enum cp_dtype dt, int64_t n,
                         const int64_t *want)
{
    cr_assert_eq(r->out[i]->dtype, dt, "output %zu is %s", i, cp_dtype_name(r->out[i]->dtype));
    cr_assert_eq(kd_numel(r, i), n);
    for (int64_t j = 0; j < n; j++) {
        int64_t got = cp_elem_load_i64(r->out_data[i], dt, j);
        cr_assert_eq(got, want[j], "output %zu [%lld]: got %lld, expected %lld", i, (long long)j,
                     (long long)got, (long long)want[j]);
    }
}
#define EXPECT_ELEMS(r, i, dt, ...) expect_elems(r, i, dt, NI(__VA_ARGS__), I64(__VA_ARGS__))

/* ---- QuantizeLinear -------------------------------------------------------------- */

Test(ref_quantize, rounds_half_to_even_and_saturates_to_int8)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 1, GB_DIMS(8), F32(0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 300, -300));
    f32_scalar(g, "S", 1.0f);
    gb_init(g, "Z", CP_DTYPE_I8, 0, NULL, I8(0));
    int32_t n = op_node(g, "QuantizeLinear", GB_IN("X", "S", "Z"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I8, 0, 2, 2, 0, -2, -2, 127, -128);
    kd_release(&r);
}

Test(ref_quantize, defaults_to_uint8_without_a_zero_point)
{
    struct cp_graph *g = gb_graph(10);
    f32_init(g, "X", 1, GB_DIMS(5), F32(-1, 0.8f, 1.2f, 509, 600));
    f32_scalar(g, "S", 2.0f);
    int32_t n = op_node(g, "QuantizeLinear", GB_IN("X", "S"));
    struct kd_run r;
    kd_run(&r, g, n);
    /* -0.5 -> 0 (even), 0.4 -> 0, 0.6 -> 1, 254.5 -> 254 (even), 300 -> 255 */
    EXPECT_INTS(&r, 0, CP_DTYPE_U8, 0, 0, 1, 254, 255);
    kd_release(&r);
}

Test(ref_quantize, per_axis_from_opset_13)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    f32_init(g, "S", 1, GB_DIMS(2), F32(1, 2));
    gb_init(g, "Z", CP_DTYPE_U8, 1, GB_DIMS(2), U8(0, 10));
    int32_t n = op_node(g, "QuantizeLinear", GB_IN("X", "S", "Z"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_U8, 1, 11, 3, 12);
    kd_release(&r);
}

Test(ref_quantize, blocked_int16_at_opset_21)
{
    struct cp_graph *g = gb_graph(21);
    f32_init(g, "X", 2, GB_DIMS(2, 4), F32(1, 2, 30, 40, -1, -2, 1e6f, -1e6f));
    f32_init(g, "S", 2, GB_DIMS(2, 2), F32(1, 10, 1, 1));
    gb_init(g, "Z", CP_DTYPE_I16, 2, GB_DIMS(2, 2), I16(0, 100, 5, 0));
    int32_t n = op_node(g, "QuantizeLinear", GB_IN("X", "S", "Z"));
    cp_node_set_int(g, n, "axis", 1);
    cp_node_set_int(g, n, "block_size", 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_ELEMS(&r, 0, CP_DTYPE_I16, 1, 2, 103, 104, 4, 3, 32767, -32768);
    kd_release(&r);
}

Test(ref_quantize, uint16_output_dtype_attribute)
{
    struct cp_graph *g = gb_graph(21);
    f32_init(g, "X", 1, GB_DIMS(3), F32(-5, 70000, 1234.5f));
    f32_scalar(g, "S", 1.0f);
    int32_t n = op_node(g, "QuantizeLinear", GB_IN("X", "S"));
    cp_node_set_int(g, n, "output_dtype", 4 /* UINT16 */);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_ELEMS(&r, 0, CP_DTYPE_U16, 0, 65535, 1234);
    kd_release(&r);
}

/* ---- DequantizeLinear ------------------------------------------------------------ */

Test(ref_dequantize, per_axis_int8_with_zero_points)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_I8, 2, GB_DIMS(2, 2), I8(-1, 2, 3, 4));
    f32_init(g, "S", 1, GB_DIMS(2), F32(0.5f, 2));
    gb_init(g, "Z", CP_DTYPE_I8, 1, GB_DIMS(2), I8(1, 0));
    int32_t n = op_node(g, "DequantizeLinear", GB_IN("X", "S", "Z"));
    cp_node_set_int(g, n, "axis", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, -1, 0.5f, 6, 8);
    kd_release(&r);
}

Test(ref_dequantize, blocked_uint16_at_opset_21)
{
    struct cp_graph *g = gb_graph(21);
    gb_init(g, "X", CP_DTYPE_U16, 1, GB_DIMS(5), U16(10, 20, 30, 65535, 0));
    f32_init(g, "S", 1, GB_DIMS(3), F32(1, 0.5f, 2));
    gb_init(g, "Z", CP_DTYPE_U16, 1, GB_DIMS(3), U16(10, 0, 1));
    int32_t n = op_node(g, "DequantizeLinear", GB_IN("X", "S", "Z"));
    cp_node_set_int(g, n, "axis", 0);
    cp_node_set_int(g, n, "block_size", 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 0, 10, 15, 32767.5f, -2);
    kd_release(&r);
}

/* ---- DynamicQuantizeLinear -------------------------------------------------------- */

Test(ref_dynamic_quantize, covers_zero_and_the_range)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 1, GB_DIMS(4), F32(1, 2, 3, 5.1f));
    gb_node(g, "n", "DynamicQuantizeLinear", GB_IN("X"), GB_IN("Y", "S", "Z"));
    struct kd_run r;
    kd_run(&r, g, 0);
    /* range [0, 5.1]: scale 0.02, zero point 0 */
    EXPECT_F32(&r, 1, 1e-7f, 0.02f);
    EXPECT_INTS(&r, 2, CP_DTYPE_U8, 0);
    EXPECT_INTS(&r, 0, CP_DTYPE_U8, 50, 100, 150, 255);
    kd_release(&r);
}

Test(ref_dynamic_quantize, all_zeros_give_zeros)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 1, GB_DIMS(3), F32(0, 0, 0));
    gb_node(g, "n", "DynamicQuantizeLinear", GB_IN("X"), GB_IN("Y", "S", "Z"));
    struct kd_run r;
    kd_run(&r, g, 0);
    EXPECT_INTS(&r, 0, CP_DTYPE_U8, 0, 0, 0);
    EXPECT_INTS(&r, 2, CP_DTYPE_U8, 0);
    kd_release(&r);
}

/* ---- integer matmuls and convolutions ------------------------------------------------ */

Test(ref_matmul_integer, per_row_and_per_column_zero_points)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "A", CP_DTYPE_U8, 2, GB_DIMS(2, 2), U8(1, 2, 3, 4));
    gb_init(g, "B", CP_DTYPE_U8, 2, GB_DIMS(2, 2), U8(5, 6, 7, 8));
    gb_init(g, "AZ", CP_DTYPE_U8, 1, GB_DIMS(2), U8(1, 2));
    gb_init(g, "BZ", CP_DTYPE_U8, 1, GB_DIMS(2), U8(5, 6));
    int32_t n = op_node(g, "MatMulInteger", GB_IN("A", "B", "AZ", "BZ"));
    struct kd_run r;
    kd_run(&r, g, n);
    /* [[0,1],[1,2]] @ [[0,0],[2,2]] */
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 2, 2, 4, 4);
    kd_release(&r);
}

Test(ref_qlinear_matmul, requantizes_and_saturates)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "A", CP_DTYPE_I8, 2, GB_DIMS(1, 2), I8(100, 100));
    f32_scalar(g, "AS", 1.0f);
    gb_init(g, "AZ", CP_DTYPE_I8, 0, NULL, I8(0));
    gb_init(g, "B", CP_DTYPE_I8, 2, GB_DIMS(2, 3), I8(1, -1, 0, 1, -1, 0));
    f32_init(g, "BS", 1, GB_DIMS(3), F32(1, 1, 0.0025f));
    gb_init(g, "BZ", CP_DTYPE_I8, 1, GB_DIMS(3), I8(0, 0, 1));
    f32_scalar(g, "YS", 1.0f);
    gb_init(g, "YZ", CP_DTYPE_I8, 0, NULL, I8(0));
    int32_t n = op_node(g, "QLinearMatMul", GB_IN("A", "AS", "AZ", "B", "BS", "BZ", "YS", "YZ"));
    struct kd_run r;
    kd_run(&r, g, n);
    /* 200 -> 127; -200 -> -128; -200 * 0.0025 = -0.5 -> -0 (even) */
    EXPECT_INTS(&r, 0, CP_DTYPE_I8, 127, -128, 0);
    kd_release(&r);
}

Test(ref_qlinear_conv, per_channel_weights_bias_and_padding)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_U8, 4, GB_DIMS(1, 1, 2, 2), U8(12, 14, 16, 18));
    f32_scalar(g, "XS", 0.5f);
    gb_init(g, "XZ", CP_DTYPE_U8, 0, NULL, U8(10));
    /* two 1x1... 3x3 kernels of ones, per-channel scales */
    uint8_t w[18];
    for (int i = 0; i < 18; i++)
        w[i] = i < 9 ? 1 : 3;
    gb_init(g, "W", CP_DTYPE_U8, 4, GB_DIMS(2, 1, 3, 3), w);
    f32_init(g, "WS", 1, GB_DIMS(2), F32(1, 2));
    gb_init(g, "WZ", CP_DTYPE_U8, 1, GB_DIMS(2), U8(0, 2));
    f32_scalar(g, "YS", 1.0f);
    gb_init(g, "YZ", CP_DTYPE_U8, 0, NULL, U8(5));
    gb_init(g, "B", CP_DTYPE_I32, 1, GB_DIMS(2), I32(1, -20));
    int32_t n = op_node(g, "QLinearConv", GB_IN("X", "XS", "XZ", "W", "WS", "WZ", "YS", "YZ", "B"));
    cp_node_set_ints(g, n, "pads", I64(1, 1, 1, 1), 4);
    struct kd_run r;
    kd_run(&r, g, n);
    /* x - zp = [2,4,6,8], every 3x3 window covers all four: sum 20.
     * channel 0: (20*1 + 1) * 0.5 = 10.5 -> 10 (even), + 5 = 15: rounded
     * before the zero point is added, as QuantizeLinear and ONNX Runtime do
     * channel 1: (20*1 - 20) * 1.0 = 0, + 5 = 5 */
    EXPECT_INTS(&r, 0, CP_DTYPE_U8, 15, 15, 15, 15, 5, 5, 5, 5);
    kd_release(&r);
}

Test(ref_conv_integer, pads_with_the_zero_point)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_U8, 4, GB_DIMS(1, 1, 1, 2), U8(3, 5));
    gb_init(g, "W", CP_DTYPE_I8, 4, GB_DIMS(1, 1, 1, 3), I8(1, 1, 1));
    gb_init(g, "XZ", CP_DTYPE_U8, 0, NULL, U8(4));
    int32_t n = op_node(g, "ConvInteger", GB_IN("X", "W", "XZ"));
    cp_node_set_ints(g, n, "pads", I64(0, 1, 0, 1), 4);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 0, 0);
    kd_release(&r);
}

/* ---- bad input ------------------------------------------------------------------------ */

static void expect_infer_error(struct cp_graph *g, const char *needle)
{
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_neq(cp_graph_infer(g, &d), CP_OK);
    cr_assert(strstr(d.msg, "'n'") && strstr(d.msg, needle), "message: %s", d.msg);
    cp_graph_free(g);
}

Test(quant_infer, per_axis_scale_before_opset_13_is_refused)
{
    struct cp_graph *g = gb_graph(10);
    f32_init(g, "X", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    f32_init(g, "S", 1, GB_DIMS(2), F32(1, 2));
    op_node(g, "QuantizeLinear", GB_IN("X", "S"));
    expect_infer_error(g, "scalar before opset 13");
}

Test(quant_infer, blocked_scale_of_the_wrong_shape_is_refused)
{
    struct cp_graph *g = gb_graph(21);
    f32_init(g, "X", 1, GB_DIMS(6), F32(1, 2, 3, 4, 5, 6));
    f32_init(g, "S", 1, GB_DIMS(2), F32(1, 2));
    int32_t n = op_node(g, "QuantizeLinear", GB_IN("X", "S"));
    cp_node_set_int(g, n, "axis", 0);
    cp_node_set_int(g, n, "block_size", 2);
    expect_infer_error(g, "block_size 2");
}

Test(quant_infer, block_size_before_opset_21_is_refused)
{
    struct cp_graph *g = gb_graph(19);
    f32_init(g, "X", 1, GB_DIMS(4), F32(1, 2, 3, 4));
    f32_init(g, "S", 1, GB_DIMS(2), F32(1, 2));
    int32_t n = op_node(g, "QuantizeLinear", GB_IN("X", "S"));
    cp_node_set_int(g, n, "axis", 0);
    cp_node_set_int(g, n, "block_size", 2);
    expect_infer_error(g, "opset 21");
}

Test(quant_infer, zero_point_dtype_must_match_the_input)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_I8, 1, GB_DIMS(2), I8(1, 2));
    f32_scalar(g, "S", 1.0f);
    gb_init(g, "Z", CP_DTYPE_U8, 0, NULL, U8(0));
    op_node(g, "DequantizeLinear", GB_IN("X", "S", "Z"));
    expect_infer_error(g, "zero point 'Z'");
}

Test(quant_infer, qlinear_conv_bias_must_be_int32)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_U8, 4, GB_DIMS(1, 1, 1, 1), U8(1));
    f32_scalar(g, "XS", 1.0f);
    gb_init(g, "XZ", CP_DTYPE_U8, 0, NULL, U8(0));
    gb_init(g, "W", CP_DTYPE_I8, 4, GB_DIMS(1, 1, 1, 1), I8(1));
    f32_scalar(g, "WS", 1.0f);
    gb_init(g, "WZ", CP_DTYPE_I8, 0, NULL, I8(0));
    f32_scalar(g, "YS", 1.0f);
    gb_init(g, "YZ", CP_DTYPE_U8, 0, NULL, U8(0));
    f32_init(g, "B", 1, GB_DIMS(1), F32(1));
    op_node(g, "QLinearConv", GB_IN("X", "XS", "XZ", "W", "WS", "WZ", "YS", "YZ", "B"));
    expect_infer_error(g, "must be i32");
}
