/* The elementwise family's reference kernels and inference: what the ONNX
 * backend cases leave out (integer Mod signs and zero divisors, NaN in
 * Max/Min, BitShift past the width, every dtype of Cast and of the
 * arithmetic ops, seeded generators) and bad input. */
#include "runner/ref_test_util.h"

#include <criterion/criterion.h>
#include <math.h>

static const void *out_data(const struct kd_run *r)
{
    return r->out_data[0];
}

/* Output 0 read through cp_elem_load_i64, for dtypes kd_expect_ints does
 * not read (i16, u16, u32). */
static void expect_ints(const struct kd_run *r, const int64_t *want, int64_t n)
{
    cr_assert_eq(kd_numel(r, 0), n);
    for (int64_t j = 0; j < n; j++)
        cr_expect_eq(cp_elem_load_i64(r->out_data[0], r->out[0]->dtype, j), want[j],
                     "[%lld]: got %lld, expected %lld", (long long)j,
                     (long long)cp_elem_load_i64(r->out_data[0], r->out[0]->dtype, j),
                     (long long)want[j]);
}

/* ---- unary ------------------------------------------------------------------------ */

Test(ref_ew_unary, round_is_half_to_even_and_sign_keeps_nan)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(6), F32(0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Round", GB_IN("X")));
    EXPECT_F32(&r, 0, 0, 0, 2, 2, -0.0f, -2, 2);
    kd_release(&r);

    g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(4), F32(-3, 0, 2, NAN));
    kd_run(&r, g, op_node(g, "Sign", GB_IN("X")));
    EXPECT_F32(&r, 0, 0, -1, 0, 1, NAN);
    kd_release(&r);
}

Test(ref_ew_unary, integer_abs_neg_and_bitwise_not)
{
    struct cp_graph *g = gb_graph(18);
    gb_init(g, "X", CP_DTYPE_I8, 1, GB_DIMS(3), (const int8_t[]){-128, -5, 7});
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Abs", GB_IN("X")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I8, -128, 5, 7); /* wraps, as two's complement does */
    kd_release(&r);

    g = gb_graph(18);
    gb_init(g, "X", CP_DTYPE_U16, 1, GB_DIMS(2), (const uint16_t[]){0, 0x00ff});
    kd_run(&r, g, op_node(g, "BitwiseNot", GB_IN("X")));
    const uint16_t *y = out_data(&r);
    cr_expect_eq(y[0], 0xffff);
    cr_expect_eq(y[1], 0xff00);
    kd_release(&r);
}

Test(ref_ew_unary, activations_follow_their_defaults)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(3), F32(-4, 0, 1));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "HardSigmoid", GB_IN("X"))); /* alpha 0.2, beta 0.5 */
    EXPECT_F32(&r, 0, TOL, 0, 0.5f, 0.7f);
    kd_release(&r);

    g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(3), F32(-4, 0, 1));
    kd_run(&r, g, op_node(g, "Selu", GB_IN("X")));
    EXPECT_F32(&r, 0, 1e-5f, 1.0507010f * 1.6732632f * (expf(-4) - 1), 0, 1.0507010f);
    kd_release(&r);

    g = gb_graph(18);
    f32_init(g, "X", 1, GB_DIMS(2), F32(-1, 2));
    kd_run(&r, g, op_node(g, "Mish", GB_IN("X")));
    EXPECT_F32(&r, 0, 1e-5f, -0.30340147f, 1.9439590f);
    kd_release(&r);
}

Test(ref_ew_unary, isinf_detects_only_the_asked_sign)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 1, GB_DIMS(3), F32(-INFINITY, INFINITY, 1));
    int32_t n = op_node(g, "IsInf", GB_IN("X"));
    cp_node_set_int(g, n, "detect_positive", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 1, 0, 0);
    kd_release(&r);
}

/* ---- binary ------------------------------------------------------------------------- */

Test(ref_ew_binary, integer_mod_takes_the_divisors_sign_unless_fmod)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_I32, 1, GB_DIMS(5), I32(7, -7, 7, -7, 5));
    gb_init(g, "B", CP_DTYPE_I32, 1, GB_DIMS(5), I32(3, 3, -3, -3, 0));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Mod", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 1, 2, -2, -1, 0);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_I64, 1, GB_DIMS(4), I64(7, -7, 7, INT64_MIN));
    gb_init(g, "B", CP_DTYPE_I64, 1, GB_DIMS(4), I64(3, 3, -3, -1));
    int32_t n = op_node(g, "Mod", GB_IN("A", "B"));
    cp_node_set_int(g, n, "fmod", 1);
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 1, -1, 1, 0);
    kd_release(&r);
}

Test(ref_ew_binary, float_mod_without_fmod_is_refused_naming_the_node)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 1, GB_DIMS(2), F32(1, 2));
    f32_init(g, "B", 1, GB_DIMS(2), F32(1, 2));
    op_node(g, "Mod", GB_IN("A", "B"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_expect(strstr(msg, "node 'n' (Mod)") && strstr(msg, "fmod=1"), "%s", msg);
    cp_graph_free(g);
}

Test(ref_ew_binary, bitshift_past_the_width_gives_zero)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_U8, 1, GB_DIMS(3), U8(0x81, 1, 200));
    gb_init(g, "B", CP_DTYPE_U8, 1, GB_DIMS(3), U8(1, 8, 2));
    int32_t n = op_node(g, "BitShift", GB_IN("A", "B"));
    cp_node_set_string(g, n, "direction", "LEFT");
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_U8, 0x02, 0, 0x20);
    kd_release(&r);
}

Test(ref_ew_binary, comparisons_of_u64_are_unsigned)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_U64, 1, GB_DIMS(2), (const uint64_t[]){UINT64_MAX, 1});
    gb_init(g, "B", CP_DTYPE_U64, 1, GB_DIMS(2), (const uint64_t[]){1, 2});
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Greater", GB_IN("A", "B")));
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 1, 0);
    kd_release(&r);
}

Test(ref_ew_binary, mixed_dtypes_are_refused)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 1, GB_DIMS(2), F32(1, 2));
    gb_init(g, "B", CP_DTYPE_I64, 1, GB_DIMS(2), I64(1, 2));
    op_node(g, "Less", GB_IN("A", "B"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_expect(strstr(msg, "different types"), "%s", msg);
    cp_graph_free(g);
}

Test(ref_ew_binary, prelu_broadcasts_its_slope_per_channel)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 3, GB_DIMS(1, 2, 2), F32(-1, 2, -3, 4));
    f32_init(g, "S", 2, GB_DIMS(2, 1), F32(0.5f, 0.25f));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "PRelu", GB_IN("X", "S")));
    EXPECT_SHAPE(&r, 0, 3, 1, 2, 2);
    EXPECT_F32(&r, 0, 0, -0.5f, 2, -0.75f, 4);
    kd_release(&r);
}

Test(ref_ew_binary, prelu_refuses_a_slope_larger_than_x)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "X", 2, GB_DIMS(2, 1), F32(-1, 2));
    f32_init(g, "S", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    op_node(g, "PRelu", GB_IN("X", "S"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_expect(strstr(msg, "does not broadcast to input 'X'"), "%s", msg);
    cp_graph_free(g);
}

Test(ref_ew_binary, arithmetic_takes_f64_f16_and_unsigned_dtypes)
{
    struct cp_graph *g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_F64, 1, GB_DIMS(2), (const double[]){0.1, 1e300});
    gb_init(g, "B", CP_DTYPE_F64, 1, GB_DIMS(2), (const double[]){0.2, 1e300});
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Add", GB_IN("A", "B")));
    const double *y = out_data(&r);
    cr_expect_eq(y[0], 0.1 + 0.2);
    cr_expect_eq(y[1], 2e300);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_U16, 1, GB_DIMS(2), (const uint16_t[]){65535, 9});
    gb_init(g, "B", CP_DTYPE_U16, 1, GB_DIMS(2), (const uint16_t[]){2, 2});
    kd_run(&r, g, op_node(g, "Div", GB_IN("A", "B")));
    expect_ints(&r, I64(32767, 4), 2);
    kd_release(&r);

    g = gb_graph(17);
    gb_init(g, "A", CP_DTYPE_F16, 1, GB_DIMS(1), (const uint16_t[]){cp_f32_to_f16(1.5f)});
    gb_init(g, "B", CP_DTYPE_F16, 1, GB_DIMS(1), (const uint16_t[]){cp_f32_to_f16(2.0f)});
    kd_run(&r, g, op_node(g, "Mul", GB_IN("A", "B")));
    cr_expect_eq(cp_f16_to_f32(*(const uint16_t *)out_data(&r)), 3.0f);
    kd_release(&r);
}

/* ---- variadic ---------------------------------------------------------------------- */

Test(ref_ew_variadic, max_of_three_broadcasts_and_nan_wins)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "A", 2, GB_DIMS(2, 1), F32(1, NAN));
    f32_init(g, "B", 1, GB_DIMS(3), F32(0, 5, 2));
    f32_scalar(g, "C", 3);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Max", GB_IN("A", "B", "C")));
    EXPECT_SHAPE(&r, 0, 2, 2, 3);
    EXPECT_F32(&r, 0, 0, 3, 5, 3, NAN, NAN, NAN);
    kd_release(&r);
}

Test(ref_ew_variadic, mean_and_one_input_sum)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "A", 1, GB_DIMS(2), F32(1, 2));
    f32_init(g, "B", 1, GB_DIMS(2), F32(3, 5));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Mean", GB_IN("A", "B")));
    EXPECT_F32(&r, 0, 0, 2, 3.5f);
    kd_release(&r);

    g = gb_graph(13);
    f32_init(g, "A", 1, GB_DIMS(2), F32(1, 2));
    kd_run(&r, g, op_node(g, "Sum", GB_IN("A")));
    EXPECT_F32(&r, 0, 0, 1, 2);
    kd_release(&r);
}

Test(ref_ew_variadic, integer_min_propagates_values_for_shape_arithmetic)
{
    struct cp_graph *g = gb_graph(13);
    gb_ints(g, "A", 2, I64(5, -3));
    gb_ints(g, "B", 2, I64(4, 7));
    gb_node(g, "min", "Min", GB_IN("A", "B"), GB_IN("m"));
    gb_node(g, "neg", "Neg", GB_IN("m"), GB_IN("y"));
    gb_infer_ok(g);
    gb_assert_value(g, "y", 2, I64(-4, 3));
    cp_graph_free(g);
}

/* ---- Cast and CastLike ---------------------------------------------------------------- */

Test(ref_ew_cast, casts_between_the_new_dtypes)
{
    struct cp_graph *g = gb_graph(19);
    gb_init(g, "X", CP_DTYPE_F64, 1, GB_DIMS(3), (const double[]){-1.5, 70000.0, 3.9});
    int32_t n = op_node(g, "Cast", GB_IN("X"));
    cp_node_set_int(g, n, "to", 5); /* int16: saturates */
    struct kd_run r;
    kd_run(&r, g, n);
    expect_ints(&r, I64(-1, 32767, 3), 3);
    kd_release(&r);

    g = gb_graph(19);
    gb_init(g, "X", CP_DTYPE_I32, 1, GB_DIMS(2), I32(-1, 7));
    gb_init(g, "L", CP_DTYPE_U32, 1, GB_DIMS(1), (const uint32_t[]){0});
    kd_run(&r, g, op_node(g, "CastLike", GB_IN("X", "L")));
    cr_expect_eq(r.out[0]->dtype, CP_DTYPE_U32);
    expect_ints(&r, I64(0xffffffffLL, 7), 2);
    kd_release(&r);
}

/* ---- random generators ---------------------------------------------------------------- */

static void run_uniform(struct kd_run *r, bool seeded, float seed)
{
    struct cp_graph *g = gb_graph(17);
    int32_t n = gb_node(g, "n", "RandomUniform", GB_IN(NULL), GB_IN("Y"));
    cp_node_set_ints(g, n, "shape", I64(4, 5), 2);
    cp_node_set_float(g, n, "low", -2.0f);
    cp_node_set_float(g, n, "high", 3.0f);
    if (seeded)
        cp_node_set_float(g, n, "seed", seed);
    kd_run(r, g, n);
}

Test(ref_ew_random, generators_are_deterministic_per_seed_and_in_range)
{
    struct kd_run a, b, c, d;
    run_uniform(&a, true, 7.0f);
    run_uniform(&b, true, 7.0f);
    run_uniform(&c, true, 8.0f);
    run_uniform(&d, false, 0.0f);
    EXPECT_SHAPE(&a, 0, 2, 4, 5);
    cr_expect_eq(memcmp(a.out_data[0], b.out_data[0], 20 * sizeof(float)), 0);
    cr_expect_neq(memcmp(a.out_data[0], c.out_data[0], 20 * sizeof(float)), 0);
    const float *y = a.out_data[0];
    for (int i = 0; i < 20; i++)
        cr_expect(y[i] >= -2.0f && y[i] < 3.0f, "%g", y[i]);
    struct kd_run d2;
    run_uniform(&d2, false, 0.0f);
    cr_expect_eq(memcmp(d.out_data[0], d2.out_data[0], 20 * sizeof(float)), 0);
    kd_release(&a);
    kd_release(&b);
    kd_release(&c);
    kd_release(&d);
    kd_release(&d2);
}

Test(ref_ew_random, bernoulli_of_certain_probabilities)
{
    struct cp_graph *g = gb_graph(15);
    f32_init(g, "P", 1, GB_DIMS(4), F32(0, 1, 0, 1));
    int32_t n = op_node(g, "Bernoulli", GB_IN("P"));
    cp_node_set_int(g, n, "dtype", 9); /* bool */
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 0, 1, 0, 1);
    kd_release(&r);
}

Test(ref_ew_random, multinomial_gives_batch_by_samples_indices)
{
    struct cp_graph *g = gb_graph(17);
    /* Class 1 is certain in practice (e^-100 for the others). */
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(-100, 0, -100, -100, 0, -100));
    int32_t n = op_node(g, "Multinomial", GB_IN("X"));
    cp_node_set_int(g, n, "sample_size", 3);
    cp_node_set_int(g, n, "dtype", 7);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 3);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 1, 1, 1, 1, 1, 1);
    kd_release(&r);
}
