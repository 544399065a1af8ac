/* The constant folder computes what the runtime computes: for a set of ops
 * and dtypes, a node on constant inputs folded by ConstantFoldingPass holds
 * exactly the bytes the runtime's reference kernel writes for the same node
 * (both call graph/op_eval.h). Values include the edges where a second
 * implementation would drift: -0 and NaN through Relu, integer overflow and
 * division by zero, saturating casts, negative indices and steps. */
#include "pass_test.h"

#include <float.h>
#include <stdint.h>

struct operand {
    const char *name;
    enum cp_dtype dtype;
    int rank;
    int64_t dims[4];
    const void *data;
};

struct fcase {
    const char *op;
    int64_t opset;
    struct operand in[5];
    size_t n_in;
    /* an int attribute and an ints attribute of the node (names NULL: none) */
    const char *int_name;
    int64_t int_value;
    const char *ints_name;
    int64_t ints[4];
    size_t n_ints;
};

/* The node "n" reads the case's initializers and writes Y; an Identity
 * copies Y to the graph output Z, so Y is an intermediate the folder may
 * fold (graph outputs are never folded). */
static struct cp_graph *build(const struct fcase *c)
{
    struct cp_graph *g = gb_graph(c->opset ? c->opset : 17);
    const char *ins[6] = {NULL};
    for (size_t i = 0; i < c->n_in; i++) {
        const struct operand *o = &c->in[i];
        if (!o->name) {
            ins[i] = "";
            continue;
        }
        gb_init(g, o->name, o->dtype, o->rank, o->dims, o->data);
        ins[i] = o->name;
    }
    int32_t node = gb_node(g, "n", c->op, ins, GB_IN("Y"));
    if (c->int_name)
        cr_assert_eq(cp_node_set_int(g, node, c->int_name, c->int_value), CP_OK);
    if (c->ints_name)
        cr_assert_eq(cp_node_set_ints(g, node, c->ints_name, c->ints, c->n_ints), CP_OK);
    gb_node(g, "copy", "Identity", GB_IN("Y"), GB_IN("Z"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "Z")), CP_OK);
    return g;
}

static void check(const struct fcase *c)
{
    struct cp_graph *g = build(c);
    pt_prepare(g);
    cr_assert(pt_run_pass(g, "ConstantFoldingPass"), "%s: nothing folded", c->op);
    cr_assert_null(pt_node(g, "n"), "%s: the node stayed", c->op);
    const struct cp_tensor *y = gb_get(g, "Y");
    cr_assert_eq(y->kind, CP_TENSOR_INITIALIZER, "%s", c->op);

    struct cp_graph *g0 = build(c);
    pt_prepare(g0);
    struct pt_outputs out;
    pt_run_ref(g0, 1, &out);
    cr_assert_eq(out.n, 1);
    const struct cp_host_tensor *z = &out.t[0];
    cr_assert_eq(z->dtype, y->dtype, "%s: dtype %s, folded %s", c->op, cp_dtype_name(z->dtype),
                 cp_dtype_name(y->dtype));
    cr_assert_eq(z->nbytes, y->nbytes, "%s: %zu bytes, folded %zu", c->op, z->nbytes, y->nbytes);
    const unsigned char *a = z->data, *b = y->data;
    size_t es = cp_dtype_size(y->dtype);
    for (size_t i = 0; i < y->nbytes; i++)
        cr_assert_eq(a[i], b[i], "%s: element %zu differs (byte %zu: kernel %02x, folded %02x)",
                     c->op, i / es, i % es, a[i], b[i]);
    pt_outputs_release(&out);
    cp_graph_free(g);
}

#define OPERAND(nm, dt, rk, data, ...)                                                             \
    {                                                                                              \
        nm, dt, rk, {__VA_ARGS__}, data                                                            \
    }

/* ---- elementwise f32 ------------------------------------------------------------------ */

/* Seven values that test the edges, for each unary op. */
static const float edges[7] = {-2.5f, -0.0f, 0.0f, 0.75f, 30.0f, -INFINITY, NAN};

Test(fold_matches_kernels, unary_f32_ops_with_signed_zero_infinity_and_nan)
{
    static const char *const ops[] = {"Relu", "Sqrt", "Exp", "Erf", "Tanh", "Sigmoid"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        struct fcase c = {ops[i], 17, {OPERAND("x", CP_DTYPE_F32, 1, edges, 7)}, 1};
        check(&c);
    }
}

Test(fold_matches_kernels, unary_relu_on_integers)
{
    static const int64_t i64[4] = {-5, 0, 7, INT64_MIN};
    static const int32_t i32[4] = {-5, 0, 7, INT32_MIN};
    static const int8_t i8[4] = {-5, 0, 7, -128};
    struct fcase a = {"Relu", 17, {OPERAND("x", CP_DTYPE_I64, 1, i64, 4)}, 1};
    struct fcase b = {"Relu", 17, {OPERAND("x", CP_DTYPE_I32, 1, i32, 4)}, 1};
    struct fcase c = {"Relu", 17, {OPERAND("x", CP_DTYPE_I8, 1, i8, 4)}, 1};
    check(&a);
    check(&b);
    check(&c);
}

/* [2, 3] op [3]: broadcasting, division by zero, infinities. */
Test(fold_matches_kernels, binary_f32_ops_broadcast)
{
    static const float a[6] = {1.5f, -2.0f, 0.0f, 3.0f, INFINITY, -0.0f};
    static const float b[3] = {0.0f, -4.0f, 2.5f};
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Pow"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        struct fcase c = {
            ops[i],
            17,
            {OPERAND("a", CP_DTYPE_F32, 2, a, 2, 3), OPERAND("b", CP_DTYPE_F32, 1, b, 3)},
            2};
        check(&c);
    }
}

/* Enough elements that inference knows no value: the evaluator runs. */
#define NBIG 80

Test(fold_matches_kernels, binary_integer_ops_wrap_and_divide_by_zero_to_zero)
{
    int64_t a[NBIG], b[NBIG];
    int32_t a32[NBIG], b32[NBIG];
    for (int i = 0; i < NBIG; i++) {
        a[i] = i % 4 == 0 ? INT64_MAX : i % 4 == 1 ? INT64_MIN : (int64_t)i * 977 - 30000;
        b[i] = i % 5 == 0 ? 0 : i % 5 == 1 ? -1 : (int64_t)i - 40;
        a32[i] = (int32_t)(i % 3 == 0 ? INT32_MAX : (int32_t)i * -91);
        b32[i] = (int32_t)(i % 7 == 0 ? 0 : i - 9);
    }
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        struct fcase c = {
            ops[i],
            17,
            {OPERAND("a", CP_DTYPE_I64, 1, a, NBIG), OPERAND("b", CP_DTYPE_I64, 1, b, NBIG)},
            2};
        check(&c);
        struct fcase d = {
            ops[i],
            17,
            {OPERAND("a", CP_DTYPE_I32, 1, a32, NBIG), OPERAND("b", CP_DTYPE_I32, 1, b32, NBIG)},
            2};
        check(&d);
    }
}

Test(fold_matches_kernels, pow_with_an_integer_exponent_and_equal)
{
    static const float x[4] = {2.0f, -3.0f, 0.5f, NAN};
    static const int64_t e[4] = {3, 2, -2, 0};
    struct fcase p = {
        "Pow", 17, {OPERAND("x", CP_DTYPE_F32, 1, x, 4), OPERAND("e", CP_DTYPE_I64, 1, e, 4)}, 2};
    check(&p);
    static const float y[4] = {2.0f, -3.0f, 0.25f, NAN};
    struct fcase eq = {
        "Equal", 17, {OPERAND("x", CP_DTYPE_F32, 1, x, 4), OPERAND("y", CP_DTYPE_F32, 1, y, 4)}, 2};
    check(&eq);
    int64_t u[NBIG], v[NBIG];
    for (int i = 0; i < NBIG; i++) {
        u[i] = i % 3;
        v[i] = i % 2;
    }
    struct fcase eqi = {
        "Equal",
        17,
        {OPERAND("u", CP_DTYPE_I64, 1, u, NBIG), OPERAND("v", CP_DTYPE_I64, 1, v, NBIG)},
        2};
    check(&eqi);
}

/* ---- casts and Where ------------------------------------------------------------------- */

Test(fold_matches_kernels, casts_saturate_truncate_and_wrap)
{
    static const float f[8] = {-1e20f, -129.7f, -0.9f, 0.5f, 200.25f, 3e9f, NAN, INFINITY};
    static const enum cp_dtype from_f32[] = {CP_DTYPE_I64, CP_DTYPE_I32, CP_DTYPE_I8, CP_DTYPE_U8,
                                             CP_DTYPE_BOOL};
    const enum cp_dtype *to = from_f32;
    for (size_t i = 0; i < sizeof from_f32 / sizeof *from_f32; i++) {
        struct fcase c = {"Cast", 17,   {OPERAND("x", CP_DTYPE_F32, 1, f, 8)},
                          1,      "to", cp_dtype_to_onnx(to[i])};
        check(&c);
    }
    int64_t big[NBIG];
    for (int i = 0; i < NBIG; i++)
        big[i] = (int64_t)i * 0x40000001LL - 7;
    static const enum cp_dtype from_i64[] = {CP_DTYPE_I32, CP_DTYPE_U8, CP_DTYPE_F32,
                                             CP_DTYPE_BOOL};
    to = from_i64;
    for (size_t i = 0; i < sizeof from_i64 / sizeof *from_i64; i++) {
        struct fcase c = {"Cast", 17,   {OPERAND("x", CP_DTYPE_I64, 1, big, NBIG)},
                          1,      "to", cp_dtype_to_onnx(to[i])};
        check(&c);
    }
}

Test(fold_matches_kernels, where_broadcasts_condition_and_branches)
{
    static const uint8_t cond[3] = {1, 0, 1};
    static const float x[6] = {1, 2, 3, 4, 5, 6};
    static const float y[1] = {-1};
    struct fcase c = {"Where",
                      17,
                      {OPERAND("c", CP_DTYPE_BOOL, 1, cond, 3),
                       OPERAND("x", CP_DTYPE_F32, 2, x, 2, 3), OPERAND("y", CP_DTYPE_F32, 0, y, 0)},
                      3};
    check(&c);
}

/* ---- data movement ------------------------------------------------------------------------ */

/* 2 x 3 x 4 distinct values. */
static const float seq[24] = {-3.0f, -2.5f, -2.0f, -1.5f, -1.0f, -0.5f, 0.0f, 0.5f,
                              1.0f,  1.5f,  2.0f,  2.5f,  3.0f,  3.5f,  4.0f, 4.5f,
                              5.0f,  5.5f,  6.0f,  6.5f,  7.0f,  7.5f,  8.0f, 8.5f};

Test(fold_matches_kernels, transpose_with_and_without_perm)
{
    const float *x = seq;
    struct fcase a = {"Transpose", 17,        {OPERAND("x", CP_DTYPE_F32, 3, x, 2, 3, 4)},
                      1,           NULL,      0,
                      "perm",      {2, 0, 1}, 3};
    struct fcase b = {"Transpose", 17, {OPERAND("x", CP_DTYPE_F32, 3, x, 2, 3, 4)}, 1};
    check(&a);
    check(&b);
}

/* A negative step from a start before the front: ONNX clamps the start to
 * 0, so one element comes out. */
Test(fold_matches_kernels, slice_with_negative_steps_and_clamped_bounds)
{
    const float *x = seq;
    static const int64_t starts[2] = {-1, 10}, ends[2] = {-100, 0}, axes[2] = {2, 1},
                         steps[2] = {-2, -1};
    struct fcase a = {
        "Slice",
        13,
        {OPERAND("x", CP_DTYPE_F32, 3, x, 2, 3, 4), OPERAND("starts", CP_DTYPE_I64, 1, starts, 2),
         OPERAND("ends", CP_DTYPE_I64, 1, ends, 2), OPERAND("axes", CP_DTYPE_I64, 1, axes, 2),
         OPERAND("steps", CP_DTYPE_I64, 1, steps, 2)},
        5};
    check(&a);
    static const int64_t s1[1] = {-100}, e1[1] = {-100}, ax1[1] = {0}, st1[1] = {-1};
    struct fcase b = {"Slice",
                      13,
                      {OPERAND("x", CP_DTYPE_F32, 3, x, 2, 3, 4),
                       OPERAND("s", CP_DTYPE_I64, 1, s1, 1), OPERAND("e", CP_DTYPE_I64, 1, e1, 1),
                       OPERAND("ax", CP_DTYPE_I64, 1, ax1, 1),
                       OPERAND("st", CP_DTYPE_I64, 1, st1, 1)},
                      5};
    check(&b);
}

Test(fold_matches_kernels, gather_concat_and_expand)
{
    const float *x = seq;
    static const int32_t idx[3] = {-1, 0, 2};
    struct fcase g = {
        "Gather",
        17,
        {OPERAND("x", CP_DTYPE_F32, 3, x, 2, 3, 4), OPERAND("i", CP_DTYPE_I32, 1, idx, 3)},
        2,
        "axis",
        1};
    check(&g);
    static const int64_t a[4] = {1, 2, 3, 4}, b[2] = {-5, -6};
    struct fcase c = {
        "Concat",
        17,
        {OPERAND("a", CP_DTYPE_I64, 2, a, 2, 2), OPERAND("b", CP_DTYPE_I64, 2, b, 2, 1)},
        2,
        "axis",
        -1};
    check(&c);
    static const float col[3] = {1.0f, -2.0f, 3.5f};
    static const int64_t shape[3] = {2, 3, 4};
    struct fcase e = {
        "Expand",
        17,
        {OPERAND("x", CP_DTYPE_F32, 2, col, 3, 1), OPERAND("s", CP_DTYPE_I64, 1, shape, 3)},
        2};
    check(&e);
}

Test(fold_matches_kernels, range_and_constant_of_shape)
{
    static const float fs[1] = {0.1f}, fl[1] = {2.0f}, fd[1] = {0.3f};
    struct fcase r = {"Range",
                      17,
                      {OPERAND("s", CP_DTYPE_F32, 0, fs, 0), OPERAND("l", CP_DTYPE_F32, 0, fl, 0),
                       OPERAND("d", CP_DTYPE_F32, 0, fd, 0)},
                      3};
    check(&r);
    static const int64_t shape[2] = {3, 30};
    struct fcase z = {"ConstantOfShape", 17, {OPERAND("s", CP_DTYPE_I64, 1, shape, 2)}, 1};
    check(&z);
}

/* The signal ops the folder folds (windows and MelWeightMatrix, whose
 * inputs are usually constants: a Whisper-style front end's mel matrix);
 * both sides call cp_eval_window / cp_eval_mel_weight_matrix. */
static const int64_t size10 = 10, mel = 8, dft = 16, rate = 8192;
static const float lo = 0.0f, hi = 4096.0f;

Test(fold_matches_kernels, windows_fold_to_what_the_kernels_compute)
{
    static const char *const ops[] = {"HannWindow", "HammingWindow", "BlackmanWindow"};
    for (size_t i = 0; i < 3; i++)
        for (int periodic = 0; periodic < 2; periodic++) {
            struct fcase c = {.op = ops[i],
                              .in = {{"size", CP_DTYPE_I64, 0, {0}, &size10}},
                              .n_in = 1,
                              .int_name = "periodic",
                              .int_value = periodic};
            check(&c);
        }
}

Test(fold_matches_kernels, mel_weight_matrix_folds_to_what_the_kernel_computes)
{
    struct fcase c = {.op = "MelWeightMatrix",
                      .in = {{"m", CP_DTYPE_I64, 0, {0}, &mel},
                             {"d", CP_DTYPE_I64, 0, {0}, &dft},
                             {"r", CP_DTYPE_I64, 0, {0}, &rate},
                             {"lo", CP_DTYPE_F32, 0, {0}, &lo},
                             {"hi", CP_DTYPE_F32, 0, {0}, &hi}},
                      .n_in = 5};
    check(&c);
}

/* ---- reductions ------------------------------------------------------------------------- */

/* Detectors reduce their constant image size to pick the resize scale:
 * ReduceMin/Max/Sum/Mean over [2, 3] fold to the kernels' bytes, with
 * axes as an attribute (opset 13), as an input (18), none (all axes),
 * keepdims 0, NaN and integers at their extremes. Reciprocal with them. */
Test(fold_matches_kernels, reductions_in_every_axes_form_and_reciprocal)
{
    static const float f[6] = {1.5f, -2.0f, NAN, 3.0f, INFINITY, -0.0f};
    static const float g[6] = {1.5f, -2.0f, 0.25f, 3.0f, 7.0f, -0.0f};
    static const int64_t i64[6] = {160, 160, INT64_MIN, INT64_MAX, -3, 4};
    static const int32_t i32[6] = {9, -9, INT32_MIN, INT32_MAX, 0, 1};
    static const int64_t ax1[1] = {1};
    static const char *const ops[] = {"ReduceMin", "ReduceMax", "ReduceSum", "ReduceMean"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        bool mean = strcmp(ops[i], "ReduceMean") == 0;
        bool sum = strcmp(ops[i], "ReduceSum") == 0;
        for (int data = 0; data < (mean ? 2 : 4); data++) {
            const void *x = data == 0   ? (const void *)f
                            : data == 1 ? (const void *)g
                            : data == 2 ? (const void *)i64
                                        : (const void *)i32;
            enum cp_dtype dt = data < 2 ? CP_DTYPE_F32 : data == 2 ? CP_DTYPE_I64 : CP_DTYPE_I32;
            /* all axes, keepdims 0 */
            struct fcase all = {ops[i], 13, {OPERAND("x", dt, 2, x, 2, 3)}, 1, "keepdims", 0};
            check(&all);
            /* axes attribute (ReduceSum's is an input from 13) */
            if (!sum) {
                struct fcase attr = {ops[i], 13, {OPERAND("x", dt, 2, x, 2, 3)}, 1, NULL, 0, "axes",
                                     {-1},   1};
                check(&attr);
            }
            /* axes input at opset 18 */
            struct fcase input = {
                ops[i],
                18,
                {OPERAND("x", dt, 2, x, 2, 3), OPERAND("axes", CP_DTYPE_I64, 1, ax1, 1)},
                2,
                "keepdims",
                0};
            check(&input);
        }
    }
    struct fcase r = {"Reciprocal", 17, {OPERAND("x", CP_DTYPE_F32, 1, edges, 7)}, 1};
    check(&r);
}
