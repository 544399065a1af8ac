/* LayoutTransformPass (atc_bridge/passes/layout_transform.c): every layout
 * policy puts a TransData exactly where two layouts meet and nowhere else,
 * the tags reach the .om, and outputs stay within 1e-4 (fp32) of the
 * unconverted model, with the fast kernels and with the reference ones.
 *
 * The passes are called through their table entries with a context built
 * by hand; the example-model tests go through cp_convert, so they run
 * every pass family in the manager's order. */
#include "layout_test.h"

/* ---- LayoutTransformPass on a small CNN ------------------------------------------------- */

static void weight(struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    float *v = ramp(n, 0.02f);
    gb_init(g, name, CP_DTYPE_F32, rank, dims, v);
    free(v);
}

static void conv(struct cp_graph *g, const char *x, const char *w, const char *y, int64_t stride)
{
    int32_t n = gb_node(g, y, "Conv", GB_IN(x, w), GB_IN(y));
    cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4);
    cp_node_set_ints(g, n, "strides", GB_DIMS(stride, stride), 2);
}

/* x[1,3,16,16] -> Conv16 -> Relu -> Conv16 -> Add(Relu out) -> MaxPool ->
 * Conv`c3` -> GlobalAveragePool -> Flatten -> y: one region from the first
 * conv to the pool, read from a 3-channel input, left by a Flatten. */
static struct cp_graph *small_cnn_c3(int64_t c3)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 3, 16, 16));
    weight(g, "w1", 4, GB_DIMS(16, 3, 3, 3));
    weight(g, "w2", 4, GB_DIMS(16, 16, 3, 3));
    weight(g, "w3", 4, GB_DIMS(c3, 16, 3, 3));
    conv(g, "x", "w1", "c1", 1);
    gb_node(g, "r1", "Relu", GB_IN("c1"), GB_IN("r1"));
    conv(g, "r1", "w2", "c2", 1);
    gb_node(g, "add", "Add", GB_IN("c2", "r1"), GB_IN("a"));
    int32_t p = gb_node(g, "pool", "MaxPool", GB_IN("a"), GB_IN("p"));
    cp_node_set_ints(g, p, "kernel_shape", GB_DIMS(2, 2), 2);
    cp_node_set_ints(g, p, "strides", GB_DIMS(2, 2), 2);
    conv(g, "p", "w3", "c3", 2);
    gb_node(g, "gap", "GlobalAveragePool", GB_IN("c3"), GB_IN("gp"));
    gb_node(g, "flat", "Flatten", GB_IN("gp"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

/* The third conv has 24 channels: a multiple of 8, not of 16. */
static struct cp_graph *small_cnn(void)
{
    return small_cnn_c3(24);
}

/* Run small_cnn_c3(c3) laid out by `c` for a target of `vector_floats`
 * against the plain graph, fast and reference kernels. */
static void expect_cnn_c3_unchanged(const struct cp_convert_config *c, int64_t c3,
                                    int vector_floats)
{
    struct cp_runtime *rt = runtime();
    struct io in, a, b;
    struct cp_graph *plain_g = small_cnn_c3(c3);
    random_inputs(plain_g, &in);
    run_graph(rt, plain_g, false, &in, &a);
    for (int ref = 0; ref < 2; ref++) {
        struct cp_graph *g = small_cnn_c3(c3);
        run_pass_for(g, "LayoutTransformPass", c, vector_floats);
        run_graph(rt, g, ref, &in, &b);
        double err = rel_l2(&a, &b);
        cr_expect_leq(err, MAX_REL_L2, "%s policy, %s kernels: relative L2 %.3g",
                      cp_layout_policy_name(c->layout_policy), ref ? "reference" : "fast", err);
        io_release(&b);
    }
    io_release(&in);
    io_release(&a);
    cp_runtime_free(rt);
}

static void expect_cnn_unchanged(const struct cp_convert_config *c)
{
    expect_cnn_c3_unchanged(c, 24, 16);
}

Test(layout_pass, nchw_policy_tags_every_tensor_plain_and_adds_nothing)
{
    struct cp_graph *g = small_cnn();
    size_t nodes = cp_graph_n_live_nodes(g);
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NCHW, CP_FMT_NCHW);
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(cp_graph_n_live_nodes(g), nodes);
    cr_assert_eq(check_layouts(g, "nchw"), 0);
    cr_assert_eq(gb_get(g, "c2")->layout, CP_LAYOUT_NCHW);
    cr_assert_eq(gb_get(g, "y")->layout, CP_LAYOUT_ND);
    cr_assert_eq(count_layout(g, CP_LAYOUT_UNDEF), 0);
    cp_graph_free(g);
}

Test(layout_pass, nhwc_policy_converts_at_the_region_borders_only)
{
    struct cp_graph *g = small_cnn();
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NHWC, CP_FMT_NCHW);
    run_pass(g, "LayoutTransformPass", &c);
    /* in: the 3-channel image; out: the pooled vector before Flatten */
    cr_assert_eq(check_layouts(g, "nhwc"), 2);
    const char *inside[] = {"c1", "r1", "c2", "a", "p", "c3", "gp"};
    for (size_t i = 0; i < sizeof inside / sizeof *inside; i++)
        cr_assert_eq(gb_get(g, inside[i])->layout, CP_LAYOUT_NHWC, "'%s' is %s", inside[i],
                     cp_layout_name(gb_get(g, inside[i])->layout));
    cr_assert_eq(gb_get(g, "x")->layout, CP_LAYOUT_NCHW);
    cr_assert_eq(gb_get(g, "x_NHWC")->layout, CP_LAYOUT_NHWC);
    cr_assert_eq(gb_get(g, "gp_NCHW")->layout, CP_LAYOUT_NCHW);
    cp_graph_free(g);
    expect_cnn_unchanged(&c);
}

/* small_cnn_c3(c3) under the blocked policy for a target of
 * `vector_floats`: `td` TransData, the image read plain, and every region
 * activation in `inside`; then the outputs match the plain graph's. */
static void expect_blocked_region(int64_t c3, int vector_floats, size_t td, enum cp_layout inside)
{
    struct cp_graph *g = small_cnn_c3(c3);
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_BLOCKED, CP_FMT_NCHW);
    run_pass_for(g, "LayoutTransformPass", &c, vector_floats);
    cr_assert_eq(check_layouts(g, "blocked"), td);
    cr_assert_eq(gb_get(g, "x")->layout, CP_LAYOUT_NCHW);
    const char *names[] = {"c1", "r1", "c2", "a", "p", "c3", "gp"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        cr_assert_eq(gb_get(g, names[i])->layout, inside, "'%s' is %s, not %s", names[i],
                     cp_layout_name(gb_get(g, names[i])->layout), cp_layout_name(inside));
    cp_graph_free(g);
    expect_cnn_c3_unchanged(&c, c3, vector_floats);
}

/* 3 channels cannot be blocked: the first conv reads the plain image. */
Test(layout_pass, blocked_policy_blocks_by_16_on_avx512_when_every_channel_count_allows)
{
    expect_blocked_region(32, 16, 1, CP_LAYOUT_NCHW16C);
}

/* 24 channels would be nChw8c next to nChw16c: NHWC throughout, and still
 * only the two borders convert (the image goes in as NHWC). */
Test(layout_pass, blocked_policy_on_avx512_runs_a_region_nhwc_when_a_channel_count_is_8_only)
{
    expect_blocked_region(24, 16, 2, CP_LAYOUT_NHWC);
}

Test(layout_pass, blocked_policy_on_avx2_blocks_by_8_and_never_pads)
{
    expect_blocked_region(24, 8, 1, CP_LAYOUT_NCHW8C);
}

Test(layout_pass, a_region_result_that_is_a_graph_output_keeps_its_name_and_is_plain)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weight(g, "w", 4, GB_DIMS(16, 16, 3, 3));
    conv(g, "x", "w", "c", 1);
    gb_node(g, "relu", "Relu", GB_IN("c"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_BLOCKED, CP_FMT_NCHW);
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(check_layouts(g, "output"), 2);
    const struct cp_tensor *y = cp_graph_tensor(g, cp_graph_output(g, 0));
    cr_assert_str_eq(y->name, "y");
    cr_assert_eq(cp_graph_node(g, y->producer)->op, CP_OP_TRANS_DATA);
    cr_assert_eq(gb_get(g, "y_nChw16c")->layout, CP_LAYOUT_NCHW16C);
    cp_graph_free(g);
}

/* x[1,16,8,8] -> Conv32 -> GroupNormalization(4 groups, SiLU) -> Conv32 ->
 * y: a norm between two convs, as in every residual block of a U-Net. */
static struct cp_graph *conv_norm_conv(void)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weight(g, "w1", 4, GB_DIMS(32, 16, 3, 3));
    weight(g, "w2", 4, GB_DIMS(32, 32, 3, 3));
    weight(g, "s", 1, GB_DIMS(32));
    weight(g, "b", 1, GB_DIMS(32));
    conv(g, "x", "w1", "c1", 1);
    int32_t in[3] = {cp_graph_find_tensor(g, "c1"), cp_graph_find_tensor(g, "s"),
                     cp_graph_find_tensor(g, "b")};
    int32_t out = gb_tensor(g, "gn", CP_DTYPE_UNDEFINED, -1, NULL, CP_TENSOR_INTERMEDIATE), idx;
    const char *origin = "gn";
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_add_node(g, "gn", "GroupNormalization", CP_DOMAIN, in, 3, &out, 1,
                                   &origin, 1, &idx, &d),
                 CP_OK, "%s", d.msg);
    cp_node_set_int(g, idx, "num_groups", 4);
    cp_node_set_string(g, idx, "activation", "SiLU");
    conv(g, "gn", "w2", "y", 1);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

/* The GroupNormalization kernel reads NHWC and blocked tensors, so the
 * norm joins the region of its convs in both policies: one region, no
 * TransData around the norm, only the output's back to plain. */
Test(layout_pass, a_groupnorm_between_convs_stays_in_their_region)
{
    static const enum cp_layout_policy pols[] = {CP_LAYOUT_POLICY_NHWC, CP_LAYOUT_POLICY_BLOCKED};
    static const enum cp_layout want[] = {CP_LAYOUT_NHWC, CP_LAYOUT_NCHW16C};
    struct cp_runtime *rt = runtime();
    struct io in, a, b;
    struct cp_graph *plain_g = conv_norm_conv();
    random_inputs(plain_g, &in);
    run_graph(rt, plain_g, false, &in, &a);
    for (size_t i = 0; i < 2; i++) {
        struct cp_graph *g = conv_norm_conv();
        struct cp_convert_config c = config(pols[i], CP_FMT_NCHW);
        run_pass(g, "LayoutTransformPass", &c);
        const char *what = cp_layout_policy_name(pols[i]);
        /* the input into the region's layout and the output back: nothing
         * around the norm */
        cr_expect_eq(check_layouts(g, what), 2);
        cr_expect_eq(gb_get(g, "c1")->layout, want[i], "%s: c1 is %s", what,
                     cp_layout_name(gb_get(g, "c1")->layout));
        cr_expect_eq(gb_get(g, "gn")->layout, want[i], "%s: the norm's output is %s", what,
                     cp_layout_name(gb_get(g, "gn")->layout));
        const struct cp_node *norm = cp_graph_node(g, gb_get(g, "gn")->producer);
        cr_expect_eq(norm->inputs[0], cp_graph_find_tensor(g, "c1"),
                     "%s: the norm reads the conv's result as it is", what);
        run_graph(rt, g, false, &in, &b);
        cr_expect_leq(rel_l2(&a, &b), MAX_REL_L2, "%s: relative L2 %.3g", what, rel_l2(&a, &b));
        io_release(&b);
    }
    io_release(&in);
    io_release(&a);
    cp_runtime_free(rt);
}

/* --input_format NHWC: the caller's bytes arrive in NHWC. */
Test(layout_pass, nhwc_input_format_is_converted_unless_a_nhwc_region_reads_it)
{
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_NCHW, CP_FMT_NHWC);
    struct cp_graph *g = small_cnn();
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(gb_get(g, "x")->layout, CP_LAYOUT_NHWC);
    cr_assert_eq(check_layouts(g, "nhwc input, nchw policy"), 1);
    cr_assert_eq(gb_get(g, "x_NCHW")->layout, CP_LAYOUT_NCHW);

    /* the same bytes, given in NHWC order, give the plain model's result */
    struct cp_runtime *rt = runtime();
    struct io in, in_nhwc, a, b;
    struct cp_graph *plain_g = small_cnn();
    random_inputs(plain_g, &in);
    random_inputs(plain_g, &in_nhwc);
    const float *src = in.t[0].data;
    float *dst = in_nhwc.t[0].data;
    for (int64_t ch = 0; ch < 3; ch++)
        for (int64_t p = 0; p < 16 * 16; p++)
            dst[p * 3 + ch] = src[ch * 256 + p];
    run_graph(rt, plain_g, false, &in, &a);
    run_graph(rt, g, false, &in_nhwc, &b);
    cr_expect_leq(rel_l2(&a, &b), MAX_REL_L2);
    io_release(&b);

    c.layout_policy = CP_LAYOUT_POLICY_NHWC;
    g = small_cnn();
    run_pass(g, "LayoutTransformPass", &c);
    cr_assert_eq(check_layouts(g, "nhwc input, nhwc policy"), 1, "only the pooled vector");
    cr_assert_eq(cp_graph_node(g, gb_get(g, "c1")->producer)->inputs[0],
                 cp_graph_find_tensor(g, "x"), "the first conv reads the input as it comes");
    /* an NHWC input also takes its data with the NHWC shape */
    in_nhwc.t[0].dims[1] = 16;
    in_nhwc.t[0].dims[2] = 16;
    in_nhwc.t[0].dims[3] = 3;
    run_graph(rt, g, false, &in_nhwc, &b);
    cr_expect_leq(rel_l2(&a, &b), MAX_REL_L2);
    io_release(&in);
    io_release(&in_nhwc);
    io_release(&a);
    io_release(&b);
    cp_runtime_free(rt);
}

/* ---- the example models through cp_convert ------------------------------------------------ */

static void convert_example(const char *name, enum cp_layout_policy pol, const char *dir, char *om,
                            size_t cap)
{
    struct cp_convert_config c = config(pol, CP_FMT_NCHW);
    snprintf(c.model, sizeof c.model, MODELS_DIR "%s.onnx", name);
    snprintf(c.output, sizeof c.output, "%s/%s_%s", dir, name, cp_layout_policy_name(pol));
    struct cp_convert_result res;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_convert(&c, &res, &d), CP_OK, "%s: %s", name, d.msg);
    snprintf(om, cap, "%s", res.om_path);
}

/* Convert `name` with each policy; check the layouts and the outputs.
 * want_td[policy]: expected TransData count, or -1 to only report it. */
static void check_example_policies(const char *name, const long *want_td, bool reference)
{
    char *dir = cp_scratch_dir();
    struct cp_runtime *rt = runtime();
    struct io in, want;
    example_io(name, &in, &want);
    for (int pol = 0; pol < CP_LAYOUT_POLICY_COUNT; pol++) {
        char om[1200], what[200];
        convert_example(name, (enum cp_layout_policy)pol, dir, om, sizeof om);
        snprintf(what, sizeof what, "%s %s", name,
                 cp_layout_policy_name((enum cp_layout_policy)pol));
        struct cp_model *m;
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_eq(cp_model_load(rt, om, &m, &d), CP_OK, "%s", d.msg);
        const struct cp_graph *g = cp_model_graph(m);
        size_t td = check_layouts(g, what);
        size_t relaid = count_layout(g, CP_LAYOUT_NHWC) + count_layout(g, CP_LAYOUT_NCHW8C) +
                        count_layout(g, CP_LAYOUT_NCHW16C);
        if (pol == CP_LAYOUT_POLICY_NCHW)
            cr_assert_eq(td + relaid, 0, "%s: %zu TransData", what, td);
        else
            cr_assert(td > 0 && relaid > 0, "%s: %zu TransData, %zu re-laid-out tensors", what, td,
                      relaid);
        if (want_td[pol] >= 0)
            cr_expect_eq((long)td, want_td[pol], "%s: %zu TransData, expected %ld", what, td,
                         want_td[pol]);
        struct io ordered = in, got;
        order_inputs(g, &ordered);
        for (int ref = 0; ref <= (reference ? 1 : 0); ref++) {
            run_model(m, ref, &ordered, &got);
            double err = rel_l2(&want, &got);
            cr_log_info("%s: %zu TransData, %zu tensors re-laid out, rel L2 %.3g (%s kernels)",
                        what, td, relaid, err, ref ? "reference" : "fast");
            cr_expect_leq(err, MAX_REL_L2, "%s (%s kernels): relative L2 error %.3g", what,
                          ref ? "reference" : "fast", err);
            io_release(&got);
        }
        cp_model_free(m);
    }
    io_release(&in);
    io_release(&want);
    cp_runtime_free(rt);
    cp_scratch_remove(dir);
    free(dir);
}

Test(layout_pass, resnet_tiny_in_every_layout_policy, .timeout = 300)
{
    /* nhwc: the image in, the pooled features out; blocked: the image
     * (3 channels) is read plain, so only the pooled features; auto: the
     * maps of 49 pixels or fewer run NHWC, one more reorder where they
     * start */
    const long want[CP_LAYOUT_POLICY_COUNT] = {0, 2, 1, 2};
    check_example_policies("resnet_tiny", want, true);
}

Test(layout_pass, sd_unet_tiny_in_every_layout_policy, .timeout = 300)
{
    const long want[CP_LAYOUT_POLICY_COUNT] = {0, -1, -1, -1};
    check_example_policies("sd_unet_tiny", want, false);
}

/* The plan checks that a layout still fits the concrete shapes: a blocked
 * tensor whose channels are no multiple of the block would need padding
 * the memory plan does not have. */
Test(layout_pass, plan_refuses_a_blocked_layout_that_would_pad)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 12, 4, 4));
    gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("r"));
    gb_node(g, "relu2", "Relu", GB_IN("r"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    cp_graph_tensor(g, cp_graph_find_tensor(g, "r"))->layout = CP_LAYOUT_NCHW8C;
    struct cp_runtime *rt = runtime();
    struct cp_model *m;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_model_from_graph(rt, g, NULL, &m, &d), CP_OK, "%s", d.msg);
    struct cp_plan *p = NULL;
    cr_assert_eq(cp_plan_create(m, NULL, &p, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'r' is laid out nChw8c"), "%s", d.msg);
    cp_model_free(m);
    cp_runtime_free(rt);
}

/* x[1,16,8,8] -> Conv16 (a), Conv`cb` (b) -> Concat(axis 1) ->
 * BatchNormalization -> Relu -> Conv16 -> y: an Inception-style channel
 * concatenation, normalised as DenseNet does. */
static struct cp_graph *concat_cnn(int64_t cb)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weight(g, "wa", 4, GB_DIMS(16, 16, 3, 3));
    weight(g, "wb", 4, GB_DIMS(cb, 16, 3, 3));
    weight(g, "wc", 4, GB_DIMS(16, 16 + cb, 3, 3));
    conv(g, "x", "wa", "a", 1);
    conv(g, "x", "wb", "b", 1);
    int32_t n = gb_node(g, "cat", "Concat", GB_IN("a", "b"), GB_IN("ab"));
    cp_node_set_int(g, n, "axis", 1);
    int64_t c = 16 + cb;
    float *sc = ramp(c, 0.2f), *bi = ramp(c, 0.1f), *var = ramp(c, 0.0f);
    for (int64_t i = 0; i < c; i++) {
        sc[i] += 1.5f;
        var[i] = 0.5f + 0.01f * (float)i;
    }
    gb_init(g, "bn_s", CP_DTYPE_F32, 1, &c, sc);
    gb_init(g, "bn_b", CP_DTYPE_F32, 1, &c, bi);
    gb_init(g, "bn_m", CP_DTYPE_F32, 1, &c, bi);
    gb_init(g, "bn_v", CP_DTYPE_F32, 1, &c, var);
    free(sc);
    free(bi);
    free(var);
    gb_node(g, "bn", "BatchNormalization", GB_IN("ab", "bn_s", "bn_b", "bn_m", "bn_v"),
            GB_IN("nb"));
    gb_node(g, "relu", "Relu", GB_IN("nb"), GB_IN("rb"));
    conv(g, "rb", "wc", "y", 1);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

/* Under NHWC the concatenation stays in the region (only the input and the
 * output are converted); under the blocked policy too: with 16 + 16
 * channels it copies 16-blocks, and with parts of 16 and 8 channels the
 * region runs NHWC on AVX-512 and nChw8c on AVX2. Either way the result is
 * the plain graph's, with fast and reference kernels. */
Test(layout_pass, a_channel_concat_stays_in_the_region_when_its_parts_share_the_layout)
{
    struct cp_runtime *rt = runtime();
    struct io in, want, got;
    const enum cp_layout_policy pols[] = {CP_LAYOUT_POLICY_NHWC, CP_LAYOUT_POLICY_BLOCKED,
                                          CP_LAYOUT_POLICY_BLOCKED, CP_LAYOUT_POLICY_BLOCKED};
    const int64_t cbs[] = {8, 8, 16, 8};
    const int vfs[] = {16, 16, 16, 8};
    const enum cp_layout inside[] = {CP_LAYOUT_NHWC, CP_LAYOUT_NHWC, CP_LAYOUT_NCHW16C,
                                     CP_LAYOUT_NCHW8C};
    for (int p = 0; p < 4; p++) {
        struct cp_graph *plain_g = concat_cnn(cbs[p]);
        random_inputs(plain_g, &in);
        run_graph(rt, plain_g, false, &in, &want);
        for (int ref = 0; ref < 2; ref++) {
            struct cp_graph *g = concat_cnn(cbs[p]);
            struct cp_convert_config c = config(pols[p], CP_FMT_NCHW);
            run_pass_for(g, "LayoutTransformPass", &c, vfs[p]);
            size_t td = check_layouts(g, cp_layout_policy_name(pols[p]));
            cr_expect_eq(td, 2, "case %d: TransData at the input and the output only, not %zu", p,
                         td);
            const char *names[] = {"a", "b", "ab", "nb"};
            for (size_t k = 0; k < 4; k++)
                cr_expect_eq(gb_get(g, names[k])->layout, inside[p], "case %d: '%s' is %s", p,
                             names[k], cp_layout_name(gb_get(g, names[k])->layout));
            run_graph(rt, g, ref, &in, &got);
            double err = rel_l2(&want, &got);
            cr_expect_leq(err, MAX_REL_L2, "%s policy, %s kernels: relative L2 %.3g",
                          cp_layout_policy_name(pols[p]), ref ? "reference" : "fast", err);
            io_release(&got); /* the model owned g */
        }
        io_release(&in);
        io_release(&want);
    }
    cp_runtime_free(rt);
}

static bool has_origin(const struct cp_node *n, const char *origin)
{
    for (size_t i = 0; i < n->n_origins; i++)
        if (strcmp(n->origins[i], origin) == 0)
            return true;
    return false;
}

/* ShuffleNet's unit in miniature: x[1,16,8,8] -> Conv a, Conv b (16 each)
 * -> Concat -> channel shuffle of 2 groups (Reshape [1,2,16,8,8],
 * Transpose 0,2,1,3,4, Reshape back) -> its halves by Slice -> a Conv on
 * each -> Concat -> Conv -> y. */
static struct cp_graph *shuffle_cnn(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 8, 8));
    weight(g, "wa", 4, GB_DIMS(16, 16, 3, 3));
    weight(g, "wb", 4, GB_DIMS(16, 16, 3, 3));
    weight(g, "wh", 4, GB_DIMS(16, 16, 3, 3));
    weight(g, "wy", 4, GB_DIMS(16, 32, 3, 3));
    conv(g, "x", "wa", "a", 1);
    conv(g, "x", "wb", "b", 1);
    cp_node_set_int(g, gb_node(g, "cat", "Concat", GB_IN("a", "b"), GB_IN("ab")), "axis", 1);
    gb_init(g, "split_shape", CP_DTYPE_I64, 1, GB_DIMS(5), (const int64_t[]){1, 2, 16, 8, 8});
    gb_init(g, "whole_shape", CP_DTYPE_I64, 1, GB_DIMS(4), (const int64_t[]){1, 32, 8, 8});
    gb_node(g, "r1", "Reshape", GB_IN("ab", "split_shape"), GB_IN("g5"));
    cp_node_set_ints(g, gb_node(g, "tr", "Transpose", GB_IN("g5"), GB_IN("t5")), "perm",
                     GB_DIMS(0, 2, 1, 3, 4), 5);
    gb_node(g, "r2", "Reshape", GB_IN("t5", "whole_shape"), GB_IN("sh"));
    gb_init(g, "s0", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){0});
    gb_init(g, "s1", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){16});
    gb_init(g, "s2", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){32});
    gb_init(g, "ax", CP_DTYPE_I64, 1, GB_DIMS(1), (const int64_t[]){1});
    gb_node(g, "lo", "Slice", GB_IN("sh", "s0", "s1", "ax"), GB_IN("h0"));
    gb_node(g, "hi", "Slice", GB_IN("sh", "s1", "s2", "ax"), GB_IN("h1"));
    conv(g, "h0", "wh", "c0", 1);
    gb_node(g, "relu", "Relu", GB_IN("h1"), GB_IN("c1"));
    cp_node_set_int(g, gb_node(g, "cat2", "Concat", GB_IN("c0", "c1"), GB_IN("cc")), "axis", 1);
    conv(g, "cc", "wy", "y", 1);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    return g;
}

/* TransposeOptimizationPass makes the shuffle and each half one channel
 * Gather of the concatenation (output channel 2a + b is input channel
 * 16b + a); LayoutTransformPass keeps them in the conv region, which then
 * runs NHWC on AVX-512 under the blocked and auto policies: TransData at
 * the input and the output only. On AVX2 they stay plain, with TransData
 * around them (the blocked kernels have no channel gather). The result is
 * the plain graph's either way. */
Test(layout_pass, a_channel_shuffle_and_its_halves_stay_in_an_nhwc_region)
{
    struct cp_graph *g = shuffle_cnn();
    struct cp_convert_config c = config(CP_LAYOUT_POLICY_AUTO, CP_FMT_NCHW);
    cr_assert(run_pass(g, "TransposeOptimizationPass", &c));
    cr_assert_eq(
        count_op(g, CP_OP_TRANSPOSE) + count_op(g, CP_OP_RESHAPE) + count_op(g, CP_OP_SLICE), 0);
    cr_assert_eq(count_op(g, CP_OP_GATHER), 2, "the halves' Gathers only, not the shuffle's");
    const struct cp_node *lo = cp_graph_node(g, gb_get(g, "h0")->producer);
    cr_assert_eq(lo->op, CP_OP_GATHER);
    cr_assert_str_eq(cp_graph_tensor(g, lo->inputs[0])->name, "ab");
    const int64_t *idx = cp_graph_tensor(g, lo->inputs[1])->data;
    cr_assert_eq(idx[0], 0);
    cr_assert_eq(idx[1], 16);
    cr_assert_eq(idx[2], 1);
    cr_assert_eq(idx[15], 23);
    cr_assert(has_origin(lo, "lo") && has_origin(lo, "r2") && has_origin(lo, "tr"));
    cp_graph_free(g);

    struct cp_runtime *rt = runtime();
    struct io in, want, got;
    struct cp_graph *plain_g = shuffle_cnn();
    random_inputs(plain_g, &in);
    run_graph(rt, plain_g, false, &in, &want);
    const enum cp_layout_policy pols[] = {CP_LAYOUT_POLICY_AUTO, CP_LAYOUT_POLICY_BLOCKED,
                                          CP_LAYOUT_POLICY_NHWC, CP_LAYOUT_POLICY_BLOCKED};
    const int vfs[] = {16, 16, 16, 8};
    const size_t tds[] = {2, 2, 2, 5};
    for (int p = 0; p < 4; p++)
        for (int ref = 0; ref < 2; ref++) {
            struct cp_graph *h = shuffle_cnn();
            struct cp_convert_config cp = config(pols[p], CP_FMT_NCHW);
            run_pass_for(h, "TransposeOptimizationPass", &cp, vfs[p]);
            run_pass_for(h, "LayoutTransformPass", &cp, vfs[p]);
            size_t td = check_layouts(h, cp_layout_policy_name(pols[p]));
            cr_expect_eq(td, tds[p], "case %d: %zu TransData, not %zu", p, td, tds[p]);
            if (vfs[p] == 16)
                cr_expect_eq(gb_get(h, "h1")->layout, CP_LAYOUT_NHWC, "case %d: h1 is %s", p,
                             cp_layout_name(gb_get(h, "h1")->layout));
            run_graph(rt, h, ref, &in, &got);
            double err = rel_l2(&want, &got);
            cr_expect_leq(err, MAX_REL_L2, "case %d, %s kernels: relative L2 %.3g", p,
                          ref ? "reference" : "fast", err);
            io_release(&got);
        }
    io_release(&in);
    io_release(&want);
    cp_runtime_free(rt);
}
