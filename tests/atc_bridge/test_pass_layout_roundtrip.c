/* TransposeRoundTripEliminationPass (atc_bridge/passes/layout_roundtrip.c):
 * round trips through NHWC disappear without changing what the model
 * computes; ops between the transposes are rewritten for the unpermuted
 * tensors, layout-dependent ones keep their transposes. */
#include "layout_test.h"

/* ---- TransposeRoundTripEliminationPass --------------------------------------------------- */

Test(layout_pass, roundtrip_removes_every_transpose_of_the_nhwc_example)
{
    struct cp_graph *g = import("nhwc_roundtrip");
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 6);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 0, "%zu Transposes left",
                 count_op(g, CP_OP_TRANSPOSE));
    /* the per-channel constants now broadcast over NCHW */
    const struct cp_node *mul = find_node_op(g, CP_OP_MUL);
    cr_assert_not_null(mul);
    gb_assert_shape(g, cp_graph_tensor(g, mul->inputs[1])->name, 3, GB_DIMS(16, 1, 1));
    const struct cp_node *rm = find_node_op(g, CP_OP_REDUCE_MEAN);
    cr_assert_not_null(rm);
    const struct cp_attr *axes = cp_node_attr(rm, "axes");
    cr_assert(axes && axes->n == 1 && axes->ints[0] == 1, "ReduceMean now over the channels");

    struct cp_runtime *rt = runtime();
    struct io in, want, got;
    example_io("nhwc_roundtrip", &in, &want);
    struct cp_graph *g2 = import("nhwc_roundtrip");
    run_pass(g2, "TransposeRoundTripEliminationPass", NULL);
    run_graph(rt, g, false, &in, &got);
    double fast = rel_l2(&want, &got);
    io_release(&got);
    run_graph(rt, g2, true, &in, &got);
    double ref = rel_l2(&want, &got);
    io_release(&got);
    cr_log_info("nhwc_roundtrip without round trips: rel L2 %.3g (fast), %.3g (reference)", fast,
                ref);
    cr_expect_leq(fast, MAX_REL_L2, "fast kernels: relative L2 error %.3g", fast);
    cr_expect_leq(ref, MAX_REL_L2, "reference kernels: relative L2 error %.3g", ref);
    io_release(&in);
    io_release(&want);
    cp_runtime_free(rt);
}

Test(layout_pass, roundtrip_example_converted_with_every_pass_has_no_transpose)
{
    char *dir = cp_scratch_dir();
    struct cp_runtime *rt = runtime();
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NCHW, CP_FMT_NCHW);
    snprintf(c.model, sizeof c.model, MODELS_DIR "nhwc_roundtrip.onnx");
    snprintf(c.output, sizeof c.output, "%s/rt", dir);
    struct cp_convert_result res;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert(&c, &res, &d), CP_OK, "%s", d.msg);
    struct cp_model *m;
    cr_assert_eq(cp_model_load(rt, res.om_path, &m, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(count_op(cp_model_graph(m), CP_OP_TRANSPOSE), 0);
    struct io in, want, got;
    example_io("nhwc_roundtrip", &in, &want);
    run_model(m, false, &in, &got);
    double err = rel_l2(&want, &got);
    cr_expect_leq(err, MAX_REL_L2, "relative L2 error %.3g", err);
    io_release(&in);
    io_release(&want);
    io_release(&got);
    cp_model_free(m);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(dir);
}

/* x [1,C,H,W] -> Transpose(0,2,3,1) -> body -> Transpose(0,3,1,2) -> y. */
static struct cp_graph *nhwc_sandwich_at(int64_t opset, int64_t c,
                                         void (*body)(struct cp_graph *g, int64_t c))
{
    struct cp_graph *g = gb_graph(opset);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, c, 5, 6));
    int32_t t = gb_node(g, "to_nhwc", "Transpose", GB_IN("x"), GB_IN("xt"));
    cp_node_set_ints(g, t, "perm", GB_DIMS(0, 2, 3, 1), 4);
    body(g, c);
    t = gb_node(g, "to_nchw", "Transpose", GB_IN("bt"), GB_IN("y"));
    cp_node_set_ints(g, t, "perm", GB_DIMS(0, 3, 1, 2), 4);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

static struct cp_graph *nhwc_sandwich(int64_t c, void (*body)(struct cp_graph *g, int64_t c))
{
    return nhwc_sandwich_at(17, c, body);
}

static void body_layernorm(struct cp_graph *g, int64_t c)
{
    float *s = ramp(c, 0.3f), *b = ramp(c, 0.1f);
    gb_init(g, "scale", CP_DTYPE_F32, 1, &c, s);
    gb_init(g, "bias", CP_DTYPE_F32, 1, &c, b);
    free(s);
    free(b);
    int32_t n = gb_node(g, "ln", "LayerNormalization", GB_IN("xt", "scale", "bias"), GB_IN("bt"));
    cp_node_set_int(g, n, "axis", -1);
    cp_node_set_float(g, n, "epsilon", 1e-3f);
}

static void body_softmax_reduce(struct cp_graph *g, int64_t c)
{
    (void)c;
    int32_t n = gb_node(g, "smx", "Softmax", GB_IN("xt"), GB_IN("s"));
    cp_node_set_int(g, n, "axis", -1);
    n = gb_node(g, "rmax", "ReduceMax", GB_IN("s"), GB_IN("m"));
    cp_node_set_ints(g, n, "axes", GB_DIMS(1, 2), 2);
    gb_node(g, "sub", "Sub", GB_IN("s", "m"), GB_IN("bt"));
}

static void body_relu(struct cp_graph *g, int64_t c)
{
    (void)c;
    gb_node(g, "relu", "Relu", GB_IN("xt"), GB_IN("bt"));
}

static void body_matmul(struct cp_graph *g, int64_t c)
{
    float *w = ramp(c * c, 0.05f);
    gb_init(g, "w", CP_DTYPE_F32, 2, GB_DIMS(c, c), w);
    free(w);
    gb_node(g, "mm", "MatMul", GB_IN("xt", "w"), GB_IN("bt"));
}

/* Run the sandwich before and after the pass on the same input; the
 * results must agree within tol. */
static void expect_same_function(struct cp_graph *before, struct cp_graph *after, double tol)
{
    struct cp_runtime *rt = runtime();
    struct io in, a, b;
    random_inputs(before, &in);
    run_graph(rt, before, false, &in, &a);
    run_graph(rt, after, false, &in, &b);
    double err = rel_l2(&a, &b);
    cr_expect_leq(err, tol, "the rewrite changed the result: relative L2 %.3g", err);
    io_release(&in);
    io_release(&a);
    io_release(&b);
    cp_runtime_free(rt);
}

Test(layout_pass, roundtrip_writes_a_channel_layernorm_out_over_axis_1)
{
    struct cp_graph *g = nhwc_sandwich(8, body_layernorm);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 0);
    cr_assert_eq(count_op(g, CP_OP_LAYER_NORMALIZATION), 0);
    cr_assert_eq(count_op(g, CP_OP_REDUCE_MEAN), 2);
    const struct cp_attr *axes = cp_node_attr(find_node_op(g, CP_OP_REDUCE_MEAN), "axes");
    cr_assert(axes && axes->n == 1 && axes->ints[0] == 1);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 8, 5, 6));
    cr_assert_eq(cp_graph_tensor(g, cp_graph_output(g, 0)), gb_get(g, "y"), "output kept");
    expect_same_function(nhwc_sandwich(8, body_layernorm), g, 1e-5);
}

Test(layout_pass, roundtrip_gives_reductions_axes_inputs_from_opset_18)
{
    struct cp_graph *g = nhwc_sandwich_at(18, 8, body_layernorm);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    const struct cp_node *rm = find_node_op(g, CP_OP_REDUCE_MEAN);
    cr_assert_null(cp_node_attr(rm, "axes"));
    cr_assert_eq(rm->n_inputs, 2);
    const struct cp_tensor *axes = cp_graph_tensor(g, rm->inputs[1]);
    cr_assert(axes->dtype == CP_DTYPE_I64 && axes->nbytes == 8 &&
              *(const int64_t *)axes->data == 1);
    expect_same_function(nhwc_sandwich_at(18, 8, body_layernorm), g, 1e-5);
}

Test(layout_pass, roundtrip_maps_softmax_and_reduction_axes)
{
    struct cp_graph *g = nhwc_sandwich(4, body_softmax_reduce);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 0);
    cr_assert_eq(cp_node_attr_int(find_node_op(g, CP_OP_SOFTMAX), "axis", -1), 1);
    const struct cp_attr *axes = cp_node_attr(find_node_op(g, CP_OP_REDUCE_MAX), "axes");
    cr_assert(axes && axes->n == 2 && axes->ints[0] == 2 && axes->ints[1] == 3,
              "NHWC axes 1,2 are NCHW axes 2,3");
    expect_same_function(nhwc_sandwich(4, body_softmax_reduce), g, 1e-6);
}

Test(layout_pass, roundtrip_keeps_the_graph_output_name)
{
    struct cp_graph *g = nhwc_sandwich(3, body_relu);
    cr_assert(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    const struct cp_tensor *y = cp_graph_tensor(g, cp_graph_output(g, 0));
    cr_assert_str_eq(y->name, "y");
    cr_assert_eq(cp_graph_node(g, y->producer)->op, CP_OP_RELU);
    gb_assert_shape(g, "y", 4, GB_DIMS(1, 3, 5, 6));
    cp_graph_free(g);
}

Test(layout_pass, roundtrip_leaves_transposes_around_layout_dependent_ops)
{
    struct cp_graph *g = nhwc_sandwich(6, body_matmul);
    cr_assert_not(run_pass(g, "TransposeRoundTripEliminationPass", NULL));
    cr_assert_eq(count_op(g, CP_OP_TRANSPOSE), 2);
    cp_graph_free(g);
}
