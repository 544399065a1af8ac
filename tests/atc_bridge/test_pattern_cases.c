/* The findings that changed when the rule engine started running the
 * passes' matchers (graph/pattern.h), one small graph per case.
 *
 * Each case is built twice: one copy goes through its pass, the other is
 * written as the trace the runtime would record of it (pattern_test.h) and
 * goes through the rule engine, as if the run had the pass switched off.
 * The instances must agree with each other and with the case's expectation
 * (the ONNX node names of the kernels the pass replaces; none when it
 * fuses nothing). Each comment says what the rule engine reported before
 * it shared the matchers: a pattern the pass would not fuse (advice that
 * cannot take effect), or an instance it fuses that went unreported. */
#include "atc_bridge/pattern_test.h"
#include "support/cli.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(pattern_cases, .init = cp_t_scratch_setup, .fini = cp_t_scratch_close, .timeout = 120);

/* ---- building a case --------------------------------------------------------------- */

#define IN(...)   ((const char *const[]){__VA_ARGS__, NULL})
#define DIMS(...) ((const int64_t[]){__VA_ARGS__})

static struct cp_graph *graph(void)
{
    struct cp_graph *g = cp_graph_create();
    cr_assert_not_null(g);
    cp_graph_set_opset(g, 17);
    return g;
}

static int32_t tensor(struct cp_graph *g, const char *name, enum cp_dtype dt, int rank,
                      const int64_t *dims, enum cp_tensor_kind kind)
{
    struct cp_shape s;
    cp_shape_set(&s, rank, dims);
    int32_t t;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_tensor(g, name, dt, &s, kind, &t, &d), CP_OK, "%s", d.msg);
    return t;
}

/* An f32 graph input. */
static void input(struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    cr_assert_eq(cp_graph_add_input(g, tensor(g, name, CP_DTYPE_F32, rank, dims, CP_TENSOR_INPUT)),
                 CP_OK);
}

/* A constant of `dt` (f32 or i64) holding `v` in every element, or the
 * values `vals` when given. */
static void constant(struct cp_graph *g, const char *name, enum cp_dtype dt, int rank,
                     const int64_t *dims, double v, const int64_t *vals)
{
    int32_t t = tensor(g, name, dt, rank, dims, CP_TENSOR_INITIALIZER);
    int64_t n = cp_shape_numel(&cp_graph_tensor(g, t)->shape);
    size_t nbytes = (size_t)n * cp_dtype_size(dt);
    void *data = cp_graph_alloc(g, nbytes ? nbytes : 1);
    cr_assert_not_null(data);
    for (int64_t i = 0; i < n; i++)
        if (dt == CP_DTYPE_F32)
            ((float *)data)[i] = (float)v;
        else
            ((int64_t *)data)[i] = vals ? vals[i] : (int64_t)v;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_set_data(g, t, data, nbytes, CP_DATA_ARENA, &d), CP_OK, "%s", d.msg);
}

static void scalar(struct cp_graph *g, const char *name, float v)
{
    constant(g, name, CP_DTYPE_F32, 0, NULL, v, NULL);
}

/* Node `name` (its ONNX name, and the name of its one output) of op_type in
 * `domain` ("" or CP_DOMAIN) reading the tensors `ins`. Returns its index. */
static int32_t node(struct cp_graph *g, const char *name, const char *op_type, const char *domain,
                    const char *const *ins)
{
    int32_t in[8];
    size_t n = 0;
    for (; ins[n]; n++) {
        in[n] = cp_graph_find_tensor(g, ins[n]);
        cr_assert_geq(in[n], 0, "no tensor '%s'", ins[n]);
    }
    int32_t out = tensor(g, name, CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE);
    cp_shape_set_unknown(&cp_graph_tensor(g, out)->shape);
    int32_t idx;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, name, op_type, domain, in, n, &out, 1, &name, 1, &idx, &d),
                 CP_OK, "%s", d.msg);
    return idx;
}

static int32_t op(struct cp_graph *g, const char *name, const char *op_type, const char *const *ins)
{
    return node(g, name, op_type, "", ins);
}

static void ints(struct cp_graph *g, int32_t n, const char *attr, size_t k, const int64_t *v)
{
    cr_assert_eq(cp_node_set_ints(g, n, attr, v, k), CP_OK);
}

/* Mark tensors as graph outputs, then verify and infer the shapes. */
static struct cp_graph *done(struct cp_graph *g, const char *const *outputs)
{
    for (size_t i = 0; outputs[i]; i++)
        cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, outputs[i])), CP_OK);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_infer(g, &d), CP_OK, "%s", d.msg);
    return g;
}

/* ---- checking a case --------------------------------------------------------------- */

/* Build the case twice: run `pass` on one copy, trace the other and find
 * its patterns; both must give `expect` (NULL-terminated texts of ONNX
 * names, "a,b,c" sorted). */
static void check(const char *name, struct cp_graph *(*build)(int), int variant, const char *pass,
                  const char *const *expect)
{
    struct cp_graph *g = build(variant);
    pt_look_through_transdata(g);
    struct pt_list fused = pt_pass_instances(g, pass, NULL);
    cp_graph_free(g);

    g = build(variant);
    char *path = cp_t_path(name);
    char *off = cp_t_fmt("%s:off", pass);
    pt_trace_of(g, path, off);
    cp_graph_free(g);
    struct cp_features *f = pt_features(path);
    json_t *keep = json_array();
    struct pt_list rules =
        pt_rule_instances(f, pass, strcmp(pass, CP_PASS_TRANSPOSE_ROUNDTRIP) == 0, keep);

    struct pt_list want = {calloc(8, sizeof(char *)), 0};
    for (; expect[want.n]; want.n++)
        want.v[want.n] = cp_strdup(expect[want.n]);
    cr_assert(pt_list_same(&rules, &fused, "the rules report", "the pass fuses", name),
              "%s: the rules and the pass disagree (see stderr)", name);
    cr_assert(pt_list_same(&rules, &want, "the rules report", "expected", name),
              "%s: not the expected instances (see stderr)", name);
    pt_list_release(&want);
    pt_list_release(&rules);
    pt_list_release(&fused);
    json_decref(keep);
    cp_features_free(f);
    free(off);
    free(path);
}

#define NONE ((const char *const[]){NULL})

/* ---- GELU ------------------------------------------------------------------------------ */

/* 0: Mul(1/sqrt2, x) -> Erf -> Add(1) -> Mul(x) -> Mul(0.5), the constant
 *    first. 1: x * 0.5 (also read by a Relu) times 1 + erf(x / sqrt2). */
static struct cp_graph *gelu(int v)
{
    struct cp_graph *g = graph();
    input(g, "x", 2, DIMS(2, 8));
    scalar(g, "c", v ? 1.41421356f : 0.70710678f);
    scalar(g, "one", 1.0f);
    scalar(g, "half", 0.5f);
    if (v == 0) {
        op(g, "scale", "Mul", IN("c", "x"));
        op(g, "erf", "Erf", IN("scale"));
        op(g, "add", "Add", IN("erf", "one"));
        op(g, "mul", "Mul", IN("x", "add"));
        op(g, "mul_half", "Mul", IN("mul", "half"));
        return done(g, IN("mul_half"));
    }
    op(g, "x_half", "Mul", IN("x", "half"));
    op(g, "scale", "Div", IN("x", "c"));
    op(g, "erf", "Erf", IN("scale"));
    op(g, "add", "Add", IN("erf", "one"));
    op(g, "mul", "Mul", IN("x_half", "add"));
    op(g, "other", "Relu", IN("x_half"));
    return done(g, IN("mul", "other"));
}

/* Before: not reported (the constant had to be the second operand). */
Test(pattern_cases, gelu_with_the_constant_first_is_reported)
{
    check("gelu_mul_c_x", gelu, 0, CP_PASS_GELU, IN("add,erf,mul,mul_half,scale"));
}

/* Before: reported, though x * 0.5 has another reader and the pass leaves
 * the GELU. */
Test(pattern_cases, gelu_whose_x_half_is_read_elsewhere_is_not_reported)
{
    check("gelu_shared_half", gelu, 1, CP_PASS_GELU, NONE);
}

/* ---- LayerNorm ----------------------------------------------------------------------- */

/* A LayerNorm over the last axis of [2, 4, 8]; v: 0 as the pass fuses it,
 * 1 the mean has another reader, 2 so has x - mean, 3 epsilon is a vector,
 * 4 gamma covers two axes, 5 the means are over axis 1. */
static struct cp_graph *layernorm(int v)
{
    struct cp_graph *g = graph();
    input(g, "x", 3, DIMS(2, 4, 8));
    scalar(g, "two", 2.0f);
    if (v == 3)
        constant(g, "eps", CP_DTYPE_F32, 1, DIMS(8), 1e-5, NULL);
    else
        scalar(g, "eps", 1e-5f);
    if (v == 4)
        constant(g, "gamma", CP_DTYPE_F32, 2, DIMS(4, 8), 1.5, NULL);
    else
        constant(g, "gamma", CP_DTYPE_F32, 1, DIMS(8), 1.5, NULL);
    constant(g, "beta", CP_DTYPE_F32, 1, DIMS(8), 0.25, NULL);
    int64_t axis = v == 5 ? 1 : -1;
    ints(g, op(g, "mean", "ReduceMean", IN("x")), "axes", 1, &axis);
    op(g, "sub", "Sub", IN("x", "mean"));
    op(g, "pow", "Pow", IN("sub", "two"));
    ints(g, op(g, "var", "ReduceMean", IN("pow")), "axes", 1, &axis);
    op(g, "add_eps", "Add", IN("var", "eps"));
    op(g, "sqrt", "Sqrt", IN("add_eps"));
    op(g, "div", "Div", IN("sub", "sqrt"));
    op(g, "gamma_mul", "Mul", IN("div", "gamma"));
    op(g, "beta_add", "Add", IN("gamma_mul", "beta"));
    if (v == 1 || v == 2) {
        op(g, "other", "Relu", IN(v == 1 ? "mean" : "sub"));
        return done(g, IN("beta_add", "other"));
    }
    return done(g, IN("beta_add"));
}

Test(pattern_cases, layernorm_as_the_pass_fuses_it)
{
    check("ln", layernorm, 0, CP_PASS_LAYERNORM,
          IN("add_eps,beta_add,div,gamma_mul,mean,pow,sqrt,sub,var"));
}

/* Before: reported (the rules allowed other readers of the mean). */
Test(pattern_cases, layernorm_whose_mean_is_read_elsewhere_is_not_reported)
{
    check("ln_shared_mean", layernorm, 1, CP_PASS_LAYERNORM, NONE);
}

/* Before: reported (and of x - mean). */
Test(pattern_cases, layernorm_whose_deviation_is_read_elsewhere_is_not_reported)
{
    check("ln_shared_dev", layernorm, 2, CP_PASS_LAYERNORM, NONE);
}

/* Before: reported (epsilon was not checked to be a scalar). */
Test(pattern_cases, layernorm_with_a_vector_epsilon_is_not_reported)
{
    check("ln_vector_eps", layernorm, 3, CP_PASS_LAYERNORM, NONE);
}

/* Before: the Mul and the Add were in the pattern; the pass takes only a
 * gamma and beta that broadcast along the last axis, so it fuses the other
 * seven and leaves them. */
Test(pattern_cases, layernorm_with_a_two_axis_gamma_leaves_the_affine_step_out)
{
    check("ln_wide_gamma", layernorm, 4, CP_PASS_LAYERNORM,
          IN("add_eps,div,mean,pow,sqrt,sub,var"));
}

/* Before: reported (the axes were not checked), as on nhwc_roundtrip once
 * the round-trip pass rewrote its LayerNorm over channels. */
Test(pattern_cases, layernorm_over_another_axis_is_not_reported)
{
    check("ln_axis1", layernorm, 5, CP_PASS_LAYERNORM, NONE);
}

/* ---- GroupNorm ------------------------------------------------------------------------- */

/* GroupNorm(2 groups) of [1, 8, 4, 4]; v: 0 without affine step, 1 with
 * one and a Relu, 2 the second Reshape does not restore x's shape. x is
 * made by a kernel: a trace gives no shape for a graph input that only a
 * view reads. */
static struct cp_graph *groupnorm(int v)
{
    struct cp_graph *g = graph();
    input(g, "x_in", 4, DIMS(1, 8, 4, 4));
    op(g, "x", "Relu", IN("x_in"));
    constant(g, "split", CP_DTYPE_I64, 1, DIMS(3), 0, DIMS(1, 2, -1));
    if (v == 2)
        constant(g, "back", CP_DTYPE_I64, 1, DIMS(3), 0, DIMS(1, 8, 16));
    else
        constant(g, "back", CP_DTYPE_I64, 1, DIMS(4), 0, DIMS(1, 8, 4, 4));
    constant(g, "ones", CP_DTYPE_F32, 1, DIMS(2), 1, NULL);
    constant(g, "zeros", CP_DTYPE_F32, 1, DIMS(2), 0, NULL);
    const int64_t *cdims = v == 2 ? DIMS(8, 1) : DIMS(8, 1, 1);
    constant(g, "gamma", CP_DTYPE_F32, v == 2 ? 2 : 3, cdims, 1.5, NULL);
    constant(g, "beta", CP_DTYPE_F32, v == 2 ? 2 : 3, cdims, 0.25, NULL);
    op(g, "reshape", "Reshape", IN("x", "split"));
    op(g, "in", "InstanceNormalization", IN("reshape", "ones", "zeros"));
    op(g, "reshape_back", "Reshape", IN("in", "back"));
    if (v == 0) {
        /* read by a kernel: a trace does not show a view that only makes a
         * graph output */
        op(g, "after", "Exp", IN("reshape_back"));
        return done(g, IN("after"));
    }
    op(g, "mul", "Mul", IN("reshape_back", "gamma"));
    op(g, "add", "Add", IN("mul", "beta"));
    if (v == 2)
        return done(g, IN("add"));
    op(g, "relu", "Relu", IN("add"));
    return done(g, IN("relu"));
}

/* Before: not reported (the rules required the affine step). The one
 * kernel is the InstanceNormalization: the Reshapes are views. */
Test(pattern_cases, groupnorm_without_affine_step_is_reported)
{
    check("gn_bare", groupnorm, 0, CP_PASS_GROUPNORM, IN("in"));
}

/* Before: the Relu was left out (the rules looked only for SiLU); the pass
 * fuses any activation. */
Test(pattern_cases, groupnorm_takes_any_activation)
{
    check("gn_relu", groupnorm, 1, CP_PASS_GROUPNORM, IN("add,in,mul,relu"));
}

/* Before: reported (nothing checked the Reshape back). */
Test(pattern_cases, groupnorm_that_does_not_reshape_back_is_not_reported)
{
    check("gn_flat", groupnorm, 2, CP_PASS_GROUPNORM, NONE);
}

/* ---- Conv and MatMul epilogues ------------------------------------------------------------ */

/* 0: Conv (with bias) -> Add(y, y). 1: a bias-less Conv -> Add of a
 * [1, 1, 8, 8] constant; 4: of a [4, 1, 1] one. 2: Conv -> BatchNormalization -> Relu. 3: the
 * same with TransData around the BatchNormalization, as the blocked layout
 * leaves it. */
static struct cp_graph *conv(int v)
{
    struct cp_graph *g = graph();
    input(g, "x", 4, DIMS(1, 4, 8, 8));
    constant(g, "w", CP_DTYPE_F32, 4, DIMS(4, 4, 3, 3), 0.1, NULL);
    constant(g, "b", CP_DTYPE_F32, 1, DIMS(4), 0.5, NULL);
    constant(g, "plane", CP_DTYPE_F32, 4, DIMS(1, 1, 8, 8), 0.5, NULL);
    constant(g, "channels", CP_DTYPE_F32, 3, DIMS(4, 1, 1), 0.5, NULL);
    const char *bn_in[] = {"s", "bias", "mean", "var"};
    for (int i = 0; i < 4; i++)
        constant(g, bn_in[i], CP_DTYPE_F32, 1, DIMS(4), i == 3 ? 1.0 : 0.5, NULL);
    int32_t c = op(g, "conv", "Conv", v == 1 || v == 4 ? IN("x", "w") : IN("x", "w", "b"));
    ints(g, c, "pads", 4, DIMS(1, 1, 1, 1));
    if (v == 0) {
        op(g, "twice", "Add", IN("conv", "conv"));
        return done(g, IN("twice"));
    }
    if (v == 1 || v == 4) {
        op(g, "bias_add", "Add", IN("conv", v == 1 ? "plane" : "channels"));
        return done(g, IN("bias_add"));
    }
    const char *bn_x = "conv";
    if (v == 3) {
        int32_t t = node(g, "to_nhwc", "TransData", CP_DOMAIN, IN("conv"));
        cr_assert_eq(cp_node_set_string(g, t, "src_format", "NCHW"), CP_OK);
        cr_assert_eq(cp_node_set_string(g, t, "dst_format", "NHWC"), CP_OK);
        bn_x = "to_nhwc";
    }
    op(g, "bn", "BatchNormalization", IN(bn_x, "s", "bias", "mean", "var"));
    op(g, "relu", "Relu", IN("bn"));
    return done(g, IN("relu"));
}

/* Before: reported as conv_add (Add(y, y) counted as a residual); the pass
 * needs a residual other than y itself. */
Test(pattern_cases, conv_plus_itself_is_no_residual)
{
    check("conv_twice", conv, 0, CP_PASS_CONV_BIAS_ACT, NONE);
}

/* Before: reported as conv_add (any smaller constant was a bias); the pass
 * takes only a per-channel one. */
Test(pattern_cases, conv_bias_must_be_per_channel)
{
    check("conv_plane", conv, 1, CP_PASS_CONV_BIAS_ACT, NONE);
}

/* The control: a per-channel constant after a bias-less Conv is its bias
 * (no values in a trace: the shape decides). */
Test(pattern_cases, conv_bias_add_per_channel_is_reported)
{
    check("conv_channels", conv, 4, CP_PASS_CONV_BIAS_ACT, IN("bias_add,conv"));
}

/* Before: the Relu was in the conv_bn pattern; the pass folds the
 * BatchNormalization only. */
Test(pattern_cases, conv_bn_is_the_conv_and_the_batchnorm)
{
    check("conv_bn", conv, 2, CP_PASS_CONV_BN, IN("bn,conv"));
}

/* Before: not reported (the Conv's reader was a TransData); switched on,
 * the pass folds it before LayoutTransformPass puts the TransData in. */
Test(pattern_cases, conv_bn_is_found_through_transdata)
{
    check("conv_bn_td", conv, 3, CP_PASS_CONV_BN, IN("bn,conv"));
}

/* 0: MatMul(x, W) -> Add(bias) -> Add(x), the residual a graph input. 1: a
 * FusedMatMul with nothing fused (transB) -> Relu. */
static struct cp_graph *matmul(int v)
{
    struct cp_graph *g = graph();
    input(g, "x", 2, DIMS(4, 8));
    constant(g, "w", CP_DTYPE_F32, 2, DIMS(8, 8), 0.1, NULL);
    constant(g, "bias", CP_DTYPE_F32, 1, DIMS(8), 0.5, NULL);
    if (v == 0) {
        op(g, "mm", "MatMul", IN("x", "w"));
        op(g, "bias_add", "Add", IN("mm", "bias"));
        op(g, "residual", "Add", IN("bias_add", "x"));
        return done(g, IN("residual"));
    }
    int32_t m = node(g, "fmm", "FusedMatMul", CP_DOMAIN, IN("x", "w"));
    cr_assert_eq(cp_node_set_int(g, m, "transB", 1), CP_OK);
    op(g, "relu", "Relu", IN("fmm"));
    return done(g, IN("relu"));
}

/* Before: the residual Add was left out (it had to come from a kernel). */
Test(pattern_cases, matmul_residual_may_be_a_graph_input)
{
    check("mm_input_residual", matmul, 0, CP_PASS_MATMUL_BIAS_ACT, IN("bias_add,mm,residual"));
}

/* Before: not reported (FusedMatMul was not looked at). */
Test(pattern_cases, fused_matmul_with_nothing_fused_is_an_epilogue_start)
{
    check("fmm_relu", matmul, 1, CP_PASS_MATMUL_BIAS_ACT, IN("fmm,relu"));
}

/* ---- attention ------------------------------------------------------------------------------ */

/* 0: 3-D scores (heads folded into the batch). 1: 4-D, the scale applied
 * to Q before the MatMul. */
static struct cp_graph *attention(int v)
{
    struct cp_graph *g = graph();
    if (v == 0) {
        input(g, "q", 3, DIMS(4, 16, 8));
        input(g, "kt", 3, DIMS(4, 8, 16));
        input(g, "v", 3, DIMS(4, 16, 8));
    } else {
        input(g, "q", 4, DIMS(1, 2, 16, 8));
        input(g, "kt", 4, DIMS(1, 2, 8, 16));
        input(g, "v", 4, DIMS(1, 2, 16, 8));
    }
    scalar(g, "scale", 0.35f);
    if (v == 0) {
        op(g, "qk", "MatMul", IN("q", "kt"));
        op(g, "scaled", "Mul", IN("qk", "scale"));
    } else {
        op(g, "q_scaled", "Mul", IN("q", "scale"));
        op(g, "scaled", "MatMul", IN("q_scaled", "kt"));
    }
    op(g, "softmax", "Softmax", IN("scaled"));
    op(g, "pv", "MatMul", IN("softmax", "v"));
    return done(g, IN("pv"));
}

/* Before: reported; FusedAttention takes 4-D operands only. */
Test(pattern_cases, attention_on_3d_scores_is_not_reported)
{
    check("att_3d", attention, 0, CP_PASS_FLASH_ATTENTION, NONE);
}

/* Before: the scale on Q was left out of the pattern; the pass folds it
 * into the fused node's scale. */
Test(pattern_cases, attention_takes_the_scale_of_q)
{
    check("att_q_scale", attention, 1, CP_PASS_FLASH_ATTENTION, IN("pv,q_scaled,scaled,softmax"));
}

/* ---- Transpose round trips ---------------------------------------------------------------- */

/* Transpose(0,2,3,1) of [1, 4, 6, 6], then 0: a MatMul; 1: five unary ops;
 * then Transpose(0,3,1,2) back. */
static struct cp_graph *roundtrip(int v)
{
    struct cp_graph *g = graph();
    input(g, "x", 4, DIMS(1, 4, 6, 6));
    constant(g, "w", CP_DTYPE_F32, 2, DIMS(4, 4), 0.1, NULL);
    ints(g, op(g, "to_nhwc", "Transpose", IN("x")), "perm", 4, DIMS(0, 2, 3, 1));
    const char *last = "to_nhwc";
    if (v == 0) {
        op(g, "mm", "MatMul", IN("to_nhwc", "w"));
        last = "mm";
    } else {
        static const char *const names[] = {"u1", "u2", "u3", "u4", "u5"};
        static const char *const ops[] = {"Relu", "Sigmoid", "Tanh", "Relu", "Sigmoid"};
        for (int i = 0; i < 5; i++) {
            op(g, names[i], ops[i], IN(last));
            last = names[i];
        }
    }
    ints(g, op(g, "to_nchw", "Transpose", IN(last)), "perm", 4, DIMS(0, 3, 1, 2));
    return done(g, IN("to_nchw"));
}

/* Before: reported (any shape-restoring pair within four kernels); a MatMul
 * cannot work on the unpermuted tensor, so the pass keeps both. */
Test(pattern_cases, roundtrip_around_a_matmul_is_not_reported)
{
    check("rt_matmul", roundtrip, 0, CP_PASS_TRANSPOSE_ROUNDTRIP, NONE);
}

/* Before: not reported (more than four kernels between); the pass removes
 * it. Shapes [1,4,6,6] -> [1,6,6,4] fit two perms; the rules try both. */
Test(pattern_cases, roundtrip_around_five_unary_ops_is_reported)
{
    check("rt_long", roundtrip, 1, CP_PASS_TRANSPOSE_ROUNDTRIP, IN("to_nchw,to_nhwc"));
}
