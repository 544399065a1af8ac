/* QDQFoldPass: QDQ Conv / MatMul / Gemm models (per-tensor activations,
 * per-tensor or per-channel weights, zero points) folded into integer ops
 * compute what the unfolded graph computes, on the reference kernels and
 * on the fast (oneDNN int8) ones. Quantized outputs may differ by one step
 * where the f32 QDQ product and the exact integer one round differently. */
#include "pass_test.h"

#include <stdlib.h>

/* Seeded random inputs, the same for every run of a test. */
static void run(struct cp_graph *g, bool reference_only, struct pt_outputs *out)
{
    pt_run_kernels(g, 11, reference_only, out);
}

/* u8/i8 outputs within one step (and at most 2% of them off); f32 within
 * a relative L2 error of 1e-5. */
static void assert_near(const struct pt_outputs *a, const struct pt_outputs *b, const char *what)
{
    cr_assert_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct cp_host_tensor *x = &a->t[i], *y = &b->t[i];
        cr_assert_eq(x->dtype, y->dtype);
        cr_assert_eq(x->nbytes, y->nbytes);
        if (x->dtype == CP_DTYPE_F32) {
            const float *p = x->data, *q = y->data;
            double num = 0, den = 0;
            for (size_t j = 0; j < x->nbytes / 4; j++) {
                num += ((double)p[j] - q[j]) * ((double)p[j] - q[j]);
                den += (double)p[j] * p[j];
            }
            cr_assert_leq(sqrt(num / (den > 0 ? den : 1)), 1e-5, "%s: output '%s'", what, x->name);
            continue;
        }
        size_t off = 0, n = x->nbytes;
        for (size_t j = 0; j < n; j++) {
            int64_t u = cp_elem_load_i64(x->data, x->dtype, (int64_t)j);
            int64_t v = cp_elem_load_i64(y->data, y->dtype, (int64_t)j);
            cr_assert_leq(llabs(u - v), 1, "%s: output '%s'[%zu]: %lld vs %lld", what, x->name, j,
                          (long long)u, (long long)v);
            off += u != v;
        }
        cr_assert_leq(off * 50, n, "output '%s': %zu of %zu differ", x->name, off, n);
    }
}

/* Options of the model builder. */
#ifndef X_ZP
#define X_ZP 128
#endif
static bool g_per_channel, g_u8_weights, g_trailing_q, g_f32_bias, g_reduce_range;

static void add_q(struct cp_graph *g, const char *x, const char *y, float scale, int zp)
{
    char s[64], z[64];
    snprintf(s, sizeof s, "%s_scale", y);
    snprintf(z, sizeof z, "%s_zp", y);
    gb_init(g, s, CP_DTYPE_F32, 0, NULL, &scale);
    uint8_t zz = (uint8_t)zp;
    gb_init(g, z, CP_DTYPE_U8, 0, NULL, &zz);
    gb_node(g, y, "QuantizeLinear", GB_IN(x, s, z), GB_IN(y));
}

static void add_dq(struct cp_graph *g, const char *x, const char *y, const char *s, const char *z,
                   int64_t axis)
{
    int32_t n = gb_node(g, y, "DequantizeLinear", GB_IN(x, s, z), GB_IN(y));
    if (axis != 1)
        cp_node_set_int(g, n, "axis", axis);
}

/* Weights w_q [n0, n1, ...] with per-channel (along `axis`, `nch` entries)
 * or per-tensor scale and zero point. */
static void add_weight(struct cp_graph *g, int rank, const int64_t *dims, int axis, int64_t nch)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    uint8_t *w = malloc((size_t)n);
    uint64_t s = 12345;
    for (int64_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        w[i] = (uint8_t)(s >> 56);
        if (g_reduce_range && !g_u8_weights) /* 7-bit weights, as reduce_range writes */
            w[i] = (uint8_t)(int8_t)((int)(s >> 57) - 64);
    }
    enum cp_dtype wt = g_u8_weights ? CP_DTYPE_U8 : CP_DTYPE_I8;
    gb_init(g, "w_q", wt, rank, dims, w);
    free(w);
    int64_t k = g_per_channel ? nch : 1;
    float sc[64];
    uint8_t zp[64];
    for (int64_t i = 0; i < k; i++) {
        sc[i] = 0.002f + 0.0005f * (float)i;
        zp[i] = g_u8_weights ? (uint8_t)(120 + i) : 0;
    }
    gb_init(g, "w_scale", CP_DTYPE_F32, g_per_channel ? 1 : 0, &k, sc);
    gb_init(g, "w_zp", wt, g_per_channel ? 1 : 0, &k, zp);
    add_dq(g, "w_q", "w", "w_scale", "w_zp", g_per_channel ? axis : 1);
}

static struct cp_graph *build_conv(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 8, 12, 12));
    add_q(g, "x", "x_q", 2.0f / 255.0f, X_ZP);
    add_dq(g, "x_q", "x_dq", "x_q_scale", "x_q_zp", 1);
    add_weight(g, 4, GB_DIMS(16, 8, 3, 3), 0, 16);
    float bias[16];
    for (int i = 0; i < 16; i++)
        bias[i] = 0.01f * (float)(i - 8);
    if (g_f32_bias) {
        gb_floats(g, "b", 16, bias);
    } else {
        /* ONNX Runtime's form: int32 bias with scale x_scale * w_scale. */
        int32_t bq[16];
        float bs[16];
        int64_t k = 16;
        for (int i = 0; i < 16; i++) {
            float ws = 0.002f + (g_per_channel ? 0.0005f * (float)i : 0.0f);
            bs[i] = (2.0f / 255.0f) * ws;
            bq[i] = (int32_t)lrintf(bias[i] / bs[i]);
        }
        gb_init(g, "b_q", CP_DTYPE_I32, 1, &k, bq);
        gb_init(g, "b_scale", CP_DTYPE_F32, 1, &k, bs);
        gb_node(g, "b", "DequantizeLinear", GB_IN("b_q", "b_scale"), GB_IN("b"));
        cp_node_set_int(g, cp_graph_n_nodes(g) - 1, "axis", 0);
    }
    int32_t c = gb_node(g, "conv", "Conv", GB_IN("x_dq", "w", "b"), GB_IN("y"));
    cp_node_set_ints(g, c, "pads", (const int64_t[]){1, 1, 1, 1}, 4);
    const char *out = "y";
    if (g_trailing_q) {
        add_q(g, "y", "y_q", 0.05f, 100);
        out = "y_q";
    }
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, out)), CP_OK);
    return g;
}

static struct cp_graph *build_matmul(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(6, 32));
    add_q(g, "x", "x_q", 2.0f / 255.0f, X_ZP);
    add_dq(g, "x_q", "x_dq", "x_q_scale", "x_q_zp", 1);
    add_weight(g, 2, GB_DIMS(32, 24), 1, 24);
    gb_node(g, "mm", "MatMul", GB_IN("x_dq", "w"), GB_IN("y"));
    const char *out = "y";
    if (g_trailing_q) {
        add_q(g, "y", "y_q", 0.02f, 128);
        out = "y_q";
    }
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, out)), CP_OK);
    return g;
}

static void check(struct cp_graph *(*build)(void), enum cp_op folded_op)
{
    struct cp_graph *g = build();
    pt_prepare(g);
    cr_assert(pt_run_pass(g, "QDQFoldPass"), "the pass did not fold");
    cr_assert_eq(pt_count_op(g, folded_op), 1, "no %s", cp_op_name(folded_op));
    cr_assert_eq(pt_count_op(g, CP_OP_CONV) + pt_count_op(g, CP_OP_MATMUL), 0);
    struct cp_graph *g2 = build();
    pt_prepare(g2);
    cr_assert(pt_run_pass(g2, "QDQFoldPass"));
    struct cp_graph *g0 = build();
    pt_prepare(g0);
    struct pt_outputs before, after_ref, after_fast;
    run(g0, true, &before);
    run(g, true, &after_ref);
    run(g2, false, &after_fast);
    assert_near(&before, &after_ref, "reference");
    assert_near(&before, &after_fast, "fast");
    pt_outputs_release(&before);
    pt_outputs_release(&after_ref);
    pt_outputs_release(&after_fast);
}

static void set(bool per_channel, bool u8_weights, bool trailing_q, bool f32_bias)
{
    g_per_channel = per_channel;
    g_u8_weights = u8_weights;
    g_trailing_q = trailing_q;
    g_f32_bias = f32_bias;
    g_reduce_range = false;
}

Test(pass_qdq, conv_per_tensor_s8_to_qlinear_conv)
{
    set(false, false, true, false);
    check(build_conv, CP_OP_QLINEAR_CONV);
}

Test(pass_qdq, conv_per_channel_s8_to_qlinear_conv)
{
    set(true, false, true, false);
    check(build_conv, CP_OP_QLINEAR_CONV);
}

Test(pass_qdq, conv_per_channel_u8_weights_with_zero_points)
{
    set(true, true, true, true);
    check(build_conv, CP_OP_QLINEAR_CONV);
}

Test(pass_qdq, conv_without_trailing_q_to_conv_integer)
{
    set(true, false, false, true);
    check(build_conv, CP_OP_CONV_INTEGER);
}

Test(pass_qdq, matmul_per_column_to_qlinear_matmul)
{
    set(true, false, true, false);
    check(build_matmul, CP_OP_QLINEAR_MATMUL);
}

Test(pass_qdq, matmul_u8_weights_with_zero_points)
{
    set(true, true, true, false);
    check(build_matmul, CP_OP_QLINEAR_MATMUL);
}

Test(pass_qdq, matmul_without_trailing_q_to_matmul_integer)
{
    set(false, false, false, false);
    check(build_matmul, CP_OP_MATMUL_INTEGER);
}

/* 7-bit weights: the oneDNN int8 kernels run on any CPU (q_isa). */
Test(pass_qdq, conv_per_channel_7bit_on_onednn)
{
    set(true, false, true, false);
    g_reduce_range = true;
    check(build_conv, CP_OP_QLINEAR_CONV);
}

Test(pass_qdq, conv_float_output_7bit_on_onednn)
{
    set(true, false, false, true);
    g_reduce_range = true;
    check(build_conv, CP_OP_CONV_INTEGER);
}

Test(pass_qdq, matmul_per_column_7bit_on_onednn)
{
    set(true, false, true, false);
    g_reduce_range = true;
    check(build_matmul, CP_OP_QLINEAR_MATMUL);
}

Test(pass_qdq, matmul_float_output_7bit_on_onednn)
{
    set(false, false, false, false);
    g_reduce_range = true;
    check(build_matmul, CP_OP_MATMUL_INTEGER);
}

static bool g_gemm_bias;

static struct cp_graph *build_gemm(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(5, 32));
    add_q(g, "x", "x_q", 2.0f / 255.0f, 128);
    add_dq(g, "x_q", "x_dq", "x_q_scale", "x_q_zp", 1);
    add_weight(g, 2, GB_DIMS(24, 32), 0, 24); /* [N, K], transB = 1 */
    int32_t n;
    if (g_gemm_bias) {
        float c[24];
        for (int i = 0; i < 24; i++)
            c[i] = 0.05f * (float)(i - 12);
        gb_floats(g, "c", 24, c);
        n = gb_node(g, "gemm", "Gemm", GB_IN("x_dq", "w", "c"), GB_IN("y"));
    } else {
        n = gb_node(g, "gemm", "Gemm", GB_IN("x_dq", "w"), GB_IN("y"));
    }
    cp_node_set_int(g, n, "transB", 1);
    const char *out = "y";
    if (g_trailing_q) {
        add_q(g, "y", "y_q", 0.02f, 128);
        out = "y_q";
    }
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, out)), CP_OK);
    return g;
}

Test(pass_qdq, gemm_trans_b_per_channel_to_qlinear_matmul)
{
    set(true, false, true, false);
    g_reduce_range = true;
    g_gemm_bias = false;
    check(build_gemm, CP_OP_QLINEAR_MATMUL);
}

/* QLinearMatMul has no bias: a Gemm with C takes the float form even with
 * a QuantizeLinear after it. */
Test(pass_qdq, gemm_with_bias_to_matmul_integer)
{
    set(true, false, true, false);
    g_gemm_bias = true;
    check(build_gemm, CP_OP_MATMUL_INTEGER);
}

/* Not folded: a per-tensor QDQ pair whose activation is per channel. */
static struct cp_graph *build_per_channel_activation(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(4, 8));
    float s[8] = {0.01f, 0.02f, 0.01f, 0.02f, 0.01f, 0.02f, 0.01f, 0.02f};
    uint8_t z[8] = {128, 128, 128, 128, 128, 128, 128, 128};
    gb_init(g, "xs", CP_DTYPE_F32, 1, GB_DIMS(8), s);
    gb_init(g, "xz", CP_DTYPE_U8, 1, GB_DIMS(8), z);
    gb_node(g, "q", "QuantizeLinear", GB_IN("x", "xs", "xz"), GB_IN("x_q"));
    add_dq(g, "x_q", "x_dq", "xs", "xz", 1);
    g_per_channel = false;
    g_u8_weights = false;
    add_weight(g, 2, GB_DIMS(8, 6), 1, 6);
    gb_node(g, "mm", "MatMul", GB_IN("x_dq", "w"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    return g;
}

Test(pass_qdq, per_channel_activations_are_left_alone)
{
    pt_check_pass(build_per_channel_activation, "QDQFoldPass", false, NULL, 0.0);
}
