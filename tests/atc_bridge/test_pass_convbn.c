/* ConvBatchNormFusionPass (atc_bridge/passes/cleanup_convbn.c): Conv with
 * or without bias, grouped too, followed by an inference
 * BatchNormalization becomes one Conv with folded weights, computing the
 * same (reference kernels, 1e-5 relative L2); a Conv whose output is also
 * read elsewhere keeps its BatchNormalization. */
#include "pass_test.h"

static void out(struct cp_graph *g, const char *name)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0);
    cr_assert_eq(cp_graph_add_output(g, t), CP_OK);
}

/* Deterministic values in [-1, 1) (plus `offset`). */
static int32_t weights(struct cp_graph *g, const char *name, int rank, const int64_t *dims,
                       unsigned seed, float offset)
{
    int64_t n = 1;
    for (int k = 0; k < rank; k++)
        n *= dims[k];
    float *v = cp_graph_alloc(g, (size_t)n * sizeof *v);
    cr_assert_not_null(v);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = (float)(s >> 8) / (float)(1u << 24) * 2.0f - 1.0f + offset;
    }
    return gb_init(g, name, CP_DTYPE_F32, rank, dims, v);
}

/* x [1,4,6,6] -> Conv(8 out, 3x3, pad 1, groups G, bias?) -> BN -> Relu -> y */
static struct cp_graph *build(bool bias, int64_t groups)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 6, 6));
    weights(g, "W", 4, GB_DIMS(8, 4 / groups, 3, 3), 1, 0);
    if (bias)
        weights(g, "B", 1, GB_DIMS(8), 2, 0);
    weights(g, "scale", 1, GB_DIMS(8), 3, 0);
    weights(g, "beta", 1, GB_DIMS(8), 4, 0);
    weights(g, "mean", 1, GB_DIMS(8), 5, 0);
    weights(g, "var", 1, GB_DIMS(8), 6, 1.5f); /* positive */
    int32_t c =
        gb_node(g, "conv", "Conv", bias ? GB_IN("x", "W", "B") : GB_IN("x", "W"), GB_IN("c"));
    cr_assert_eq(cp_node_set_ints(g, c, "pads", GB_DIMS(1, 1, 1, 1), 4), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, c, "kernel_shape", GB_DIMS(3, 3), 2), CP_OK);
    cr_assert_eq(cp_node_set_int(g, c, "group", groups), CP_OK);
    int32_t b = gb_node(g, "bn", "BatchNormalization", GB_IN("c", "scale", "beta", "mean", "var"),
                        GB_IN("n"));
    cr_assert_eq(cp_node_set_float(g, b, "epsilon", 1e-3f), CP_OK);
    gb_node(g, "relu", "Relu", GB_IN("n"), GB_IN("y"));
    out(g, "y");
    return g;
}

static struct cp_graph *build_bias(void)
{
    return build(true, 1);
}

static struct cp_graph *build_no_bias_grouped(void)
{
    return build(false, 2);
}

static void check_folded(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_BATCH_NORMALIZATION), 0);
    cr_assert_eq(pt_count_op(g, CP_OP_CONV), 1);
    const struct cp_node *c = pt_producer(g, "n");
    cr_assert_not_null(c);
    cr_assert_eq(c->op, CP_OP_CONV);
    cr_assert_str_eq(c->name, "conv");
    cr_assert(pt_has_origin(c, "conv") && pt_has_origin(c, "bn"), "origins must name both");
    cr_assert_eq(c->n_inputs, 3, "the folded Conv has a bias");
    for (size_t k = 1; k < 3; k++) {
        const struct cp_tensor *t = cp_graph_tensor(g, c->inputs[k]);
        cr_assert_eq(t->kind, CP_TENSOR_INITIALIZER);
        cr_assert_eq(t->owner, CP_DATA_HEAP);
    }
    cr_assert_eq(cp_node_attr_int(c, "group", 1), cp_node_attr_int(c, "group", 0),
                 "attributes are kept");
    cr_assert_not_null(cp_node_attr(c, "pads"));
}

Test(pass_convbn, conv_with_bias_and_batchnorm_fold_into_one_conv)
{
    pt_check_pass(build_bias, "ConvBatchNormFusionPass", true, check_folded, 1e-5);
}

Test(pass_convbn, grouped_conv_without_bias_folds_and_gains_a_bias)
{
    pt_check_pass(build_no_bias_grouped, "ConvBatchNormFusionPass", true, check_folded, 1e-5);
}

static struct cp_graph *build_shared(void)
{
    struct cp_graph *g = build(true, 1);
    gb_node(g, "side", "Sigmoid", GB_IN("c"), GB_IN("z"));
    out(g, "z");
    return g;
}

static void check_kept(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_BATCH_NORMALIZATION), 1);
}

Test(pass_convbn, conv_output_read_elsewhere_keeps_its_batchnorm)
{
    pt_check_pass(build_shared, "ConvBatchNormFusionPass", false, check_kept, 0);
}

Test(pass_convbn, the_folded_model_drops_the_original_weights)
{
    struct cp_graph *g = build_bias();
    pt_prepare(g);
    struct cp_diag d;
    cp_diag_init(&d);
    struct cp_convert_config c;
    cp_convert_config_init(&c);
    /* Only the cleanup passes: fusion would change the Conv further. */
    snprintf(c.fusion_switches, sizeof c.fusion_switches,
             "ConvBiasActivationFusionPass:off;MatMulBiasActivationFusionPass:off");
    cr_assert_eq(cp_passes_run(g, &c, NULL, NULL, NULL, &d), CP_OK, "%s", d.msg);
    static const char *const gone[] = {"W", "B", "scale", "beta", "mean", "var"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
        cr_assert_lt(cp_graph_find_tensor(g, gone[i]), 0, "'%s' is still in the graph", gone[i]);
    cp_graph_free(g);
}
