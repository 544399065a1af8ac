/* Reference kernels, driven one node at a time through the kernel interface
 * and compared with hand-computed values: elementwise ops, Cast, Where,
 * reductions, Softmax, MatMul, Gemm and the normalizations. (Data movement,
 * convolutions, pools and Resize are in test_ref_kernels_*.c.) */
#include "runner/ref_test_util.h"

#include <float.h>

/* ---- the table ------------------------------------------------------------------ */

Test(ref_table, has_one_kernel_per_op_except_unknown_and_constant)
{
    for (int op = 1; op < CP_OP_COUNT; op++) {
        int count = 0;
        for (size_t i = 0; cp_ref_kernels[i]; i++)
            count += cp_ref_kernels[i]->op == (enum cp_op)op;
        int want = op == CP_OP_CONSTANT ? 0 : 1;
        cr_expect_eq(count, want, "%s has %d reference kernels", cp_op_name((enum cp_op)op), count);
    }
    for (size_t i = 0; cp_ref_kernels[i]; i++) {
        cr_expect_not_null(cp_ref_kernels[i]->supports);
        cr_expect_not_null(cp_ref_kernels[i]->run);
    }
}

/* ---- binary ops ---------------------------------------------------------------------- */

Test(ref_binary, add_broadcasts_a_column_against_a_row)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(2, 1), F32(1, 2));
    f32_init(g, "B", 1, GB_DIMS(3), F32(10, 20, 30));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Add", GB_IN("A", "B")));
    EXPECT_SHAPE(&r, 0, 2, 2, 3);
    EXPECT_F32(&r, 0, 0, 11, 21, 31, 12, 22, 32);
    kd_release(&r);
}

Test(ref_binary, sub_and_mul_broadcast_a_scalar_on_either_side)
{
    struct cp_graph *g = gb_graph(17);
    f32_scalar(g, "s", 2.5f);
    f32_init(g, "A", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Sub", GB_IN("s", "A")));
    EXPECT_F32(&r, 0, 0, 1.5f, 0.5f, -0.5f, -1.5f);
    kd_release(&r);

    g = gb_graph(17);
    f32_scalar(g, "s", 2.5f);
    f32_init(g, "A", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    kd_run(&r, g, op_node(g, "Mul", GB_IN("A", "s")));
    EXPECT_F32(&r, 0, 0, 2.5f, 5, 7.5f, 10);
    kd_release(&r);
}

Test(ref_binary, broadcasts_middle_dims_of_rank_3)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 3, GB_DIMS(2, 1, 2), F32(1, 2, 3, 4));
    f32_init(g, "B", 3, GB_DIMS(1, 3, 1), F32(10, 20, 30));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Div", GB_IN("B", "A")));
    EXPECT_SHAPE(&r, 0, 3, 2, 3, 2);
    EXPECT_F32(&r, 0, TOL, 10, 5, 20, 10, 30, 15, 10.f / 3, 2.5f, 20.f / 3, 5, 10, 7.5f);
    kd_release(&r);
}

Test(ref_binary, integer_div_truncates_toward_zero_and_zero_divisor_gives_zero)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_I64, 1, GB_DIMS(5), I64(7, -7, 7, -7, 5));
    gb_init(g, "B", CP_DTYPE_I64, 1, GB_DIMS(5), I64(2, 2, -2, -2, 0));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Div", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 3, -3, -3, 3, 0);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_I32, 1, GB_DIMS(3), I32(9, -9, INT32_MIN));
    gb_init(g, "B", CP_DTYPE_I32, 1, GB_DIMS(3), I32(4, 4, -1));
    kd_run(&r, g, op_node(g, "Div", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 2, -2, INT32_MIN);
    kd_release(&r);
}

Test(ref_binary, integer_add_and_mul_wrap_around)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_I32, 1, GB_DIMS(2), I32(INT32_MAX, -3));
    gb_init(g, "B", CP_DTYPE_I32, 1, GB_DIMS(2), I32(1, 4));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Add", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, INT32_MIN, 1);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_I64, 1, GB_DIMS(2), I64(INT64_MAX, -3));
    gb_init(g, "B", CP_DTYPE_I64, 0, NULL, I64(2));
    kd_run(&r, g, op_node(g, "Mul", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, -2, -6);
    kd_release(&r);
}

Test(ref_binary, pow_takes_float_and_integer_exponents)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(3), F32(2, 3, 4));
    f32_scalar(g, "E", 0.5f);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Pow", GB_IN("X", "E")));
    EXPECT_F32(&r, 0, TOL, 1.41421356f, 1.73205081f, 2);
    kd_release(&r);

    g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(2), F32(2, -3));
    gb_init(g, "E", CP_DTYPE_I64, 1, GB_DIMS(1), I64(3));
    kd_run(&r, g, op_node(g, "Pow", GB_IN("X", "E")));
    EXPECT_F32(&r, 0, 0, 8, -27);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "X", CP_DTYPE_I32, 1, GB_DIMS(2), I32(2, 3));
    gb_init(g, "E", CP_DTYPE_I32, 1, GB_DIMS(1), I32(2));
    kd_run(&r, g, op_node(g, "Pow", GB_IN("X", "E")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 4, 9);
    kd_release(&r);
}

Test(ref_binary, equal_gives_bool_with_broadcasting)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    f32_init(g, "B", 1, GB_DIMS(2), F32(1, 4));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Equal", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 1, 0, 0, 1);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_I64, 1, GB_DIMS(3), I64(5, 6, 7));
    gb_init(g, "B", CP_DTYPE_I64, 0, NULL, I64(6));
    kd_run(&r, g, op_node(g, "Equal", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 0, 1, 0);
    kd_release(&r);
}

Test(ref_binary, refuses_arithmetic_on_bools)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_BOOL, 1, GB_DIMS(2), U8(1, 0));
    gb_init(g, "B", CP_DTYPE_BOOL, 1, GB_DIMS(2), U8(1, 1));
    cr_assert_not(kd_supports(g, op_node(g, "Add", GB_IN("A", "B"))));
    cp_graph_free(g);
}

/* ---- unary ops ---------------------------------------------------------------------- */

static void expect_unary(const char *op, float alpha, const float *want)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(5), F32(-2, -0.5f, 0, 0.5f, 2));
    int32_t n = op_node(g, op, GB_IN("X"));
    if (alpha != 0.0f)
        cp_node_set_float(g, n, "alpha", alpha);
    struct kd_run r;
    kd_run(&r, g, n);
    kd_expect_f32(&r, 0, 5, want, 1e-6f);
    kd_release(&r);
}

Test(ref_unary, activations_match_their_formulas)
{
    expect_unary("Relu", 0, F32(0, 0, 0, 0.5f, 2));
    expect_unary("LeakyRelu", 0, F32(-0.02f, -0.005f, 0, 0.5f, 2));
    expect_unary("LeakyRelu", 0.1f, F32(-0.2f, -0.05f, 0, 0.5f, 2));
    expect_unary("Sigmoid", 0, F32(0.11920292f, 0.37754067f, 0.5f, 0.62245933f, 0.88079708f));
    expect_unary("Tanh", 0, F32(-0.96402758f, -0.46211716f, 0, 0.46211716f, 0.96402758f));
    expect_unary("Exp", 0, F32(0.13533528f, 0.60653066f, 1, 1.64872127f, 7.3890561f));
    expect_unary("Erf", 0, F32(-0.99532227f, -0.52049988f, 0, 0.52049988f, 0.99532227f));
}

Test(ref_unary, sqrt_of_negative_is_nan_and_sigmoid_saturates)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(4), F32(0, 0.25f, 4, -1));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Sqrt", GB_IN("X")));
    EXPECT_F32(&r, 0, 0, 0, 0.5f, 2, NAN);
    kd_release(&r);

    g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(2), F32(-200, 200));
    kd_run(&r, g, op_node(g, "Sigmoid", GB_IN("X")));
    EXPECT_F32(&r, 0, 0, 0, 1);
    kd_release(&r);
}

Test(ref_unary, relu_takes_integers)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "X", CP_DTYPE_I64, 1, GB_DIMS(3), I64(-4, 0, 9));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Relu", GB_IN("X")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 0, 0, 9);
    kd_release(&r);
}

/* ---- Clip ---------------------------------------------------------------------------- */

static struct cp_graph *clip_graph(int64_t opset)
{
    struct cp_graph *g = gb_graph(opset);
    f32_init(g, "X", 1, GB_DIMS(5), F32(-3, -1, 0, 2, 5));
    return g;
}

Test(ref_clip, bounds_are_optional_inputs_from_opset_11)
{
    struct cp_graph *g = clip_graph(13);
    f32_scalar(g, "lo", -1);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Clip", GB_IN("X", "lo")));
    EXPECT_F32(&r, 0, 0, -1, -1, 0, 2, 5);
    kd_release(&r);

    g = clip_graph(11);
    f32_scalar(g, "hi", 1);
    kd_run(&r, g, op_node(g, "Clip", GB_IN("X", "", "hi")));
    EXPECT_F32(&r, 0, 0, -3, -1, 0, 1, 1);
    kd_release(&r);

    g = clip_graph(13);
    f32_scalar(g, "lo", -1);
    f32_scalar(g, "hi", 2);
    kd_run(&r, g, op_node(g, "Clip", GB_IN("X", "lo", "hi")));
    EXPECT_F32(&r, 0, 0, -1, -1, 0, 2, 2);
    kd_release(&r);
}

Test(ref_clip, bounds_are_attributes_before_opset_11)
{
    struct cp_graph *g = clip_graph(10);
    int32_t n = op_node(g, "Clip", GB_IN("X"));
    cp_node_set_float(g, n, "min", 0);
    cp_node_set_float(g, n, "max", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 0, 0, 0, 1, 1);
    kd_release(&r);
}

Test(ref_clip, min_above_max_gives_max_and_integers_clip)
{
    struct cp_graph *g = clip_graph(13);
    f32_scalar(g, "lo", 2);
    f32_scalar(g, "hi", 1);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Clip", GB_IN("X", "lo", "hi")));
    EXPECT_F32(&r, 0, 0, 1, 1, 1, 1, 1);
    kd_release(&r);

    g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_I32, 1, GB_DIMS(3), I32(-5, 3, 10));
    gb_init(g, "lo", CP_DTYPE_I32, 0, NULL, I32(0));
    gb_init(g, "hi", CP_DTYPE_I32, 0, NULL, I32(5));
    kd_run(&r, g, op_node(g, "Clip", GB_IN("X", "lo", "hi")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 0, 3, 5);
    kd_release(&r);
}

/* ---- Where and Cast -------------------------------------------------------------------- */

Test(ref_where, broadcasts_all_three_inputs)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "C", CP_DTYPE_BOOL, 2, GB_DIMS(2, 1), U8(1, 0));
    f32_init(g, "X", 2, GB_DIMS(1, 3), F32(1, 2, 3));
    f32_scalar(g, "Y0", -1);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Where", GB_IN("C", "X", "Y0")));
    EXPECT_SHAPE(&r, 0, 2, 2, 3);
    EXPECT_F32(&r, 0, 0, 1, 2, 3, -1, -1, -1);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "C", CP_DTYPE_BOOL, 1, GB_DIMS(3), U8(0, 1, 0));
    gb_init(g, "X", CP_DTYPE_I64, 0, NULL, I64(7));
    gb_init(g, "Y0", CP_DTYPE_I64, 1, GB_DIMS(3), I64(1, 2, 3));
    kd_run(&r, g, op_node(g, "Where", GB_IN("C", "X", "Y0")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 1, 7, 3);
    kd_release(&r);
}

static void run_cast(struct kd_run *r, enum cp_dtype from, int64_t n, const void *data,
                     enum cp_dtype to)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "X", from, 1, &n, data);
    int32_t node = op_node(g, "Cast", GB_IN("X"));
    cp_node_set_int(g, node, "to", cp_dtype_to_onnx(to));
    kd_run(r, g, node);
}

Test(ref_cast, float_to_int_truncates_and_saturates)
{
    struct kd_run r;
    run_cast(&r, CP_DTYPE_F32, 4, F32(1.9f, -1.9f, 0.5f, -0.5f), CP_DTYPE_I64);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 1, -1, 0, 0);
    kd_release(&r);

    run_cast(&r, CP_DTYPE_F32, 3, F32(NAN, 1e20f, -1e20f), CP_DTYPE_I32);
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 0, INT32_MAX, INT32_MIN);
    kd_release(&r);
}

Test(ref_cast, bools_and_integers)
{
    struct kd_run r;
    run_cast(&r, CP_DTYPE_I64, 3, I64(0, 3, -1), CP_DTYPE_BOOL);
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 0, 1, 1);
    kd_release(&r);

    run_cast(&r, CP_DTYPE_BOOL, 2, U8(1, 0), CP_DTYPE_F32);
    EXPECT_F32(&r, 0, 0, 1, 0);
    kd_release(&r);

    run_cast(&r, CP_DTYPE_I64, 2, I64(300, -1), CP_DTYPE_U8);
    EXPECT_INTS(&r, 0, CP_DTYPE_U8, 44, 255);
    kd_release(&r);
}

static void expect_u16(const struct kd_run *r, const uint16_t *want, int64_t n)
{
    cr_assert_eq(kd_numel(r, 0), n);
    const uint16_t *got = r->out_data[0];
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(got[i], want[i], "[%lld]: got 0x%04x, expected 0x%04x", (long long)i, got[i],
                     want[i]);
}

Test(ref_cast, to_f16_rounds_to_nearest_even)
{
    struct kd_run r;
    /* 1, 0.1, largest f16, halfway above it (ties to even: inf), below the
     * smallest subnormal's half, the smallest subnormal, -inf */
    run_cast(&r, CP_DTYPE_F32, 7, F32(1, 0.1f, 65504, 65520, 1e-8f, 5.9604645e-8f, -INFINITY),
             CP_DTYPE_F16);
    expect_u16(&r, (const uint16_t[]){0x3C00, 0x2E66, 0x7BFF, 0x7C00, 0x0000, 0x0001, 0xFC00}, 7);
    kd_release(&r);

    run_cast(&r, CP_DTYPE_F16, 4, (const uint16_t[]){0x3C00, 0x0001, 0xFC00, 0xC000}, CP_DTYPE_F32);
    EXPECT_F32(&r, 0, 0, 1, 5.9604645e-8f, -INFINITY, -2);
    kd_release(&r);
}

Test(ref_cast, to_bf16_truncates_like_onnx_reference)
{
    struct kd_run r;
    float f;
    uint32_t bits = 0x3F80FFFFu; /* 1.0039062 + a bit: rounding would give 0x3F81 */
    memcpy(&f, &bits, sizeof f);
    run_cast(&r, CP_DTYPE_F32, 3, ((const float[]){f, -2, NAN}), CP_DTYPE_BF16);
    const uint16_t *got = r.out_data[0];
    cr_assert_eq(got[0], 0x3F80);
    cr_assert_eq(got[1], 0xC000);
    cr_assert_eq(got[2] & 0x7FC0, 0x7FC0, "NaN stays NaN");
    kd_release(&r);

    run_cast(&r, CP_DTYPE_BF16, 2, (const uint16_t[]){0x3F80, 0xC040}, CP_DTYPE_F32);
    EXPECT_F32(&r, 0, 0, 1, -3);
    kd_release(&r);
}

/* ---- reductions ---------------------------------------------------------------------- */

static struct cp_graph *reduce_graph(int64_t opset)
{
    struct cp_graph *g = gb_graph(opset);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    return g;
}

Test(ref_reduce, mean_with_axes_attribute_keeps_dims)
{
    struct cp_graph *g = reduce_graph(13);
    int32_t n = op_node(g, "ReduceMean", GB_IN("X"));
    cp_node_set_ints(g, n, "axes", I64(1), 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 1);
    EXPECT_F32(&r, 0, 0, 2, 5);
    kd_release(&r);
}

Test(ref_reduce, sum_takes_axes_input_from_opset_13_with_negative_axis)
{
    struct cp_graph *g = reduce_graph(13);
    gb_ints(g, "axes", 1, I64(-2));
    int32_t n = op_node(g, "ReduceSum", GB_IN("X", "axes"));
    cp_node_set_int(g, n, "keepdims", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 1, 3);
    EXPECT_F32(&r, 0, 0, 5, 7, 9);
    kd_release(&r);
}

Test(ref_reduce, empty_axes_reduce_everything_unless_noop)
{
    struct cp_graph *g = reduce_graph(13);
    gb_init(g, "axes", CP_DTYPE_I64, 1, GB_DIMS(0), I64(0));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "ReduceSum", GB_IN("X", "axes")));
    EXPECT_SHAPE(&r, 0, 2, 1, 1);
    EXPECT_F32(&r, 0, 0, 21);
    kd_release(&r);

    g = reduce_graph(13);
    gb_init(g, "axes", CP_DTYPE_I64, 1, GB_DIMS(0), I64(0));
    int32_t n = op_node(g, "ReduceSum", GB_IN("X", "axes"));
    cp_node_set_int(g, n, "noop_with_empty_axes", 1);
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 3);
    EXPECT_F32(&r, 0, 0, 1, 2, 3, 4, 5, 6);
    kd_release(&r);
}

Test(ref_reduce, max_over_two_axes_as_attribute_and_as_input)
{
    const float x[] = {1, 8, 3, 4, 5, 6, 7, 2};
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 3, GB_DIMS(2, 2, 2), x);
    int32_t n = op_node(g, "ReduceMax", GB_IN("X"));
    cp_node_set_ints(g, n, "axes", I64(0, 2), 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 3, 1, 2, 1);
    EXPECT_F32(&r, 0, 0, 8, 7);
    kd_release(&r);

    g = gb_graph(18);
    f32_init(g, "X", 3, GB_DIMS(2, 2, 2), x);
    gb_ints(g, "axes", 2, I64(0, -1));
    n = op_node(g, "ReduceMax", GB_IN("X", "axes"));
    cp_node_set_int(g, n, "keepdims", 0);
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 1, 2);
    EXPECT_F32(&r, 0, 0, 8, 7);
    kd_release(&r);
}

Test(ref_reduce, sum_of_integers_stays_integer)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_I64, 2, GB_DIMS(2, 2), I64(1, 2, 3, 4));
    gb_ints(g, "axes", 1, I64(0));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "ReduceSum", GB_IN("X", "axes")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 4, 6);
    kd_release(&r);
}

/* ---- Softmax --------------------------------------------------------------------------- */

static const float softmax_x[] = {0, 1, 2, 3, 0, 0, 0, 0};

Test(ref_softmax, before_opset_13_normalizes_the_flattened_tail)
{
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "X", 3, GB_DIMS(2, 2, 2), softmax_x);
    int32_t n = op_node(g, "Softmax", GB_IN("X"));
    cp_node_set_int(g, n, "axis", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 1e-6f, 0.0320586f, 0.08714432f, 0.23688282f, 0.64391426f, 0.25f, 0.25f, 0.25f,
               0.25f);
    kd_release(&r);
}

Test(ref_softmax, from_opset_13_normalizes_one_axis)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 3, GB_DIMS(2, 2, 2), softmax_x);
    int32_t n = op_node(g, "Softmax", GB_IN("X"));
    cp_node_set_int(g, n, "axis", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 1e-6f, 0.11920292f, 0.11920292f, 0.88079708f, 0.88079708f, 0.5f, 0.5f, 0.5f,
               0.5f);
    kd_release(&r);
}

Test(ref_softmax, default_axis_is_stable_for_large_inputs)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 2, GB_DIMS(1, 3), F32(1000, 1001, 1002));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Softmax", GB_IN("X")));
    EXPECT_F32(&r, 0, 1e-6f, 0.09003057f, 0.24472847f, 0.66524096f);
    kd_release(&r);
}

/* ---- MatMul and Gemm ------------------------------------------------------------------- */

Test(ref_matmul, multiplies_2d)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    f32_init(g, "B", 2, GB_DIMS(3, 2), F32(7, 8, 9, 10, 11, 12));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "MatMul", GB_IN("A", "B")));
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 58, 64, 139, 154);
    kd_release(&r);
}

Test(ref_matmul, broadcasts_batch_dims)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 3, GB_DIMS(2, 2, 2), F32(1, 2, 3, 4, 5, 6, 7, 8));
    f32_init(g, "B", 2, GB_DIMS(2, 2), F32(1, 0, 0, 2));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "MatMul", GB_IN("A", "B")));
    EXPECT_SHAPE(&r, 0, 3, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 1, 4, 3, 8, 5, 12, 7, 16);
    kd_release(&r);

    /* (2,1,1,2) x (3,2,1): batch (2,3) */
    g = gb_graph(17);
    f32_init(g, "A", 4, GB_DIMS(2, 1, 1, 2), F32(1, 2, 3, 4));
    f32_init(g, "B", 3, GB_DIMS(3, 2, 1), F32(1, 1, 1, 0, 0, 1));
    kd_run(&r, g, op_node(g, "MatMul", GB_IN("A", "B")));
    EXPECT_SHAPE(&r, 0, 4, 2, 3, 1, 1);
    EXPECT_F32(&r, 0, 0, 3, 1, 2, 7, 3, 4);
    kd_release(&r);
}

Test(ref_matmul, promotes_1d_operands)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 1, GB_DIMS(3), F32(1, 2, 3));
    f32_init(g, "B", 2, GB_DIMS(3, 2), F32(1, 2, 3, 4, 5, 6));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "MatMul", GB_IN("A", "B")));
    EXPECT_SHAPE(&r, 0, 1, 2);
    EXPECT_F32(&r, 0, 0, 22, 28);
    kd_release(&r);

    g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    f32_init(g, "B", 1, GB_DIMS(3), F32(1, 1, 1));
    kd_run(&r, g, op_node(g, "MatMul", GB_IN("A", "B")));
    EXPECT_SHAPE(&r, 0, 1, 2);
    EXPECT_F32(&r, 0, 0, 6, 15);
    kd_release(&r);
}

Test(ref_gemm, trans_b_with_a_bias_vector)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    f32_init(g, "B", 2, GB_DIMS(2, 3), F32(1, 0, 1, 0, 1, 0));
    f32_init(g, "C", 1, GB_DIMS(2), F32(0.5f, -0.5f));
    int32_t n = op_node(g, "Gemm", GB_IN("A", "B", "C"));
    cp_node_set_int(g, n, "transB", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 4.5f, 1.5f, 10.5f, 4.5f);
    kd_release(&r);
}

Test(ref_gemm, trans_a_alpha_beta_and_a_scalar_bias)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(3, 2), F32(1, 2, 3, 4, 5, 6));
    f32_init(g, "B", 2, GB_DIMS(3, 1), F32(1, 1, 1));
    f32_scalar(g, "C", 4);
    int32_t n = op_node(g, "Gemm", GB_IN("A", "B", "C"));
    cp_node_set_int(g, n, "transA", 1);
    cp_node_set_float(g, n, "alpha", 2);
    cp_node_set_float(g, n, "beta", 0.5f);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 1);
    EXPECT_F32(&r, 0, 0, 20, 26);
    kd_release(&r);
}

Test(ref_gemm, without_bias_and_with_a_column_bias)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(1, 2), F32(1, 2));
    f32_init(g, "B", 2, GB_DIMS(2, 2), F32(3, 4, 5, 6));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Gemm", GB_IN("A", "B")));
    EXPECT_F32(&r, 0, 0, 13, 16);
    kd_release(&r);

    g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(2, 1), F32(1, 2));
    f32_init(g, "B", 2, GB_DIMS(1, 2), F32(3, 4));
    f32_init(g, "C", 2, GB_DIMS(2, 1), F32(10, 20));
    kd_run(&r, g, op_node(g, "Gemm", GB_IN("A", "B", "C")));
    EXPECT_F32(&r, 0, 0, 13, 14, 26, 28);
    kd_release(&r);
}

/* ---- normalizations -------------------------------------------------------------------- */

Test(ref_norm, batch_norm_uses_running_statistics)
{
    struct cp_graph *g = gb_graph(15);
    f32_init(g, "X", 4, GB_DIMS(1, 2, 1, 2), F32(1, 2, 3, 4));
    f32_init(g, "s", 1, GB_DIMS(2), F32(1, 2));
    f32_init(g, "b", 1, GB_DIMS(2), F32(0, 1));
    f32_init(g, "m", 1, GB_DIMS(2), F32(1.5f, 3.5f));
    f32_init(g, "v", 1, GB_DIMS(2), F32(0.25f, 1));
    int32_t n = op_node(g, "BatchNormalization", GB_IN("X", "s", "b", "m", "v"));
    cp_node_set_float(g, n, "epsilon", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, -1, 1, 0, 2);
    kd_release(&r);
}

Test(ref_norm, batch_norm_in_training_mode_is_not_supported)
{
    struct cp_graph *g = gb_graph(15);
    f32_init(g, "X", 4, GB_DIMS(1, 2, 1, 2), F32(1, 2, 3, 4));
    f32_init(g, "s", 1, GB_DIMS(2), F32(1, 2));
    f32_init(g, "b", 1, GB_DIMS(2), F32(0, 1));
    f32_init(g, "m", 1, GB_DIMS(2), F32(1.5f, 3.5f));
    f32_init(g, "v", 1, GB_DIMS(2), F32(0.25f, 1));
    int32_t n = gb_node(g, "n", "BatchNormalization", GB_IN("X", "s", "b", "m", "v"),
                        GB_IN("Y", "rm", "rv"));
    cp_node_set_int(g, n, "training_mode", 1);
    cr_assert_not(kd_supports(g, n));
    cp_graph_free(g);
}

Test(ref_norm, instance_norm_normalizes_each_channel_of_each_sample)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 3, GB_DIMS(1, 2, 3), F32(1, 2, 3, 2, 4, 6));
    f32_init(g, "s", 1, GB_DIMS(2), F32(1, 2));
    f32_init(g, "b", 1, GB_DIMS(2), F32(0, 1));
    int32_t n = op_node(g, "InstanceNormalization", GB_IN("X", "s", "b"));
    cp_node_set_float(g, n, "epsilon", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, -1.22474487f, 0, 1.22474487f, -1.44948974f, 1, 3.44948974f);
    kd_release(&r);
}

Test(ref_norm, layer_norm_last_axis_with_bias_mean_and_inv_std_dev)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(1, 2, 3, 0, 3, 6));
    f32_init(g, "s", 1, GB_DIMS(3), F32(1, 1, 2));
    f32_init(g, "b", 1, GB_DIMS(3), F32(0, 0, 1));
    int32_t n =
        gb_node(g, "n", "LayerNormalization", GB_IN("X", "s", "b"), GB_IN("Y", "mean", "inv"));
    cp_node_set_float(g, n, "epsilon", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, -1.22474487f, 0, 3.44948974f, -1.22474487f, 0, 3.44948974f);
    EXPECT_SHAPE(&r, 1, 2, 2, 1);
    EXPECT_F32(&r, 1, TOL, 2, 3);
    EXPECT_F32(&r, 2, TOL, 1.22474487f, 0.40824829f);
    kd_release(&r);
}

Test(ref_norm, layer_norm_from_axis_1_broadcasts_a_smaller_scale)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 3, GB_DIMS(2, 2, 2), F32(1, 2, 3, 4, 0, 0, 0, 2));
    f32_init(g, "s", 2, GB_DIMS(2, 1), F32(1, 2));
    int32_t n = op_node(g, "LayerNormalization", GB_IN("X", "s"));
    cp_node_set_int(g, n, "axis", 1);
    cp_node_set_float(g, n, "epsilon", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, -1.34164079f, -0.4472136f, 0.8944272f, 2.68328157f, -0.57735027f,
               -0.57735027f, -1.15470054f, 3.46410162f);
    kd_release(&r);
}
