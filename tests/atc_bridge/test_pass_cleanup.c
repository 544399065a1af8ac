/* IdentityEliminationPass and DeadNodeEliminationPass
 * (atc_bridge/passes/cleanup.c): Identity and inference Dropout go with
 * their consumers rewired, graph output names survive, a Dropout whose
 * mask is read stays; nodes that reach no output go. */
#include "pass_test.h"

static void out(struct cp_graph *g, const char *name)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0);
    cr_assert_eq(cp_graph_add_output(g, t), CP_OK);
}

/* ---- IdentityEliminationPass -------------------------------------------------------------- */

/* x -> Relu -> Identity -> Dropout -> Sigmoid -> y */
static struct cp_graph *build_identity_chain(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(3, 5));
    gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("r"));
    gb_node(g, "identity", "Identity", GB_IN("r"), GB_IN("i"));
    gb_node(g, "dropout", "Dropout", GB_IN("i"), GB_IN("dr"));
    gb_node(g, "sigmoid", "Sigmoid", GB_IN("dr"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_identity_chain(struct cp_graph *g)
{
    cr_assert_eq(cp_graph_n_live_nodes(g), 2);
    cr_assert_eq(pt_count_op(g, CP_OP_IDENTITY), 0);
    cr_assert_eq(pt_count_op(g, CP_OP_DROPOUT), 0);
    const struct cp_node *s = pt_node(g, "sigmoid");
    cr_assert_not_null(s);
    cr_assert_str_eq(cp_graph_tensor(g, s->inputs[0])->name, "r");
}

Test(pass_cleanup, identity_and_inference_dropout_are_removed)
{
    pt_check_pass(build_identity_chain, "IdentityEliminationPass", true, check_identity_chain, 0);
}

/* x -> Relu -> r -> Identity -> y (a graph output), r also read by Exp. */
static struct cp_graph *build_identity_output(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("r"));
    gb_node(g, "identity", "Identity", GB_IN("r"), GB_IN("y"));
    gb_node(g, "exp", "Exp", GB_IN("r"), GB_IN("z"));
    out(g, "y");
    out(g, "z");
    return g;
}

static void check_identity_output(struct cp_graph *g)
{
    cr_assert_eq(cp_graph_n_live_nodes(g), 2);
    const struct cp_node *relu = pt_producer(g, "y");
    cr_assert_not_null(relu, "the output 'y' must still be produced");
    cr_assert_str_eq(relu->name, "relu", "the Relu writes the output name directly");
    cr_assert_str_eq(cp_graph_tensor(g, pt_node(g, "exp")->inputs[0])->name, "y");
}

Test(pass_cleanup, identity_producing_a_graph_output_keeps_the_output_name)
{
    pt_check_pass(build_identity_output, "IdentityEliminationPass", true, check_identity_output, 0);
}

Test(pass_cleanup, identity_from_a_graph_input_to_a_graph_output_stays)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "identity", "Identity", GB_IN("x"), GB_IN("y"));
    out(g, "y");
    pt_prepare(g);
    cr_assert_not(pt_run_pass(g, "IdentityEliminationPass"));
    cr_assert_not_null(pt_node(g, "identity"));
    cp_graph_free(g);
}

Test(pass_cleanup, dropout_whose_mask_is_read_stays)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "dropout", "Dropout", GB_IN("x"), GB_IN("d", "mask"));
    out(g, "d");
    out(g, "mask");
    pt_prepare(g);
    cr_assert_not(pt_run_pass(g, "IdentityEliminationPass"));
    cr_assert_not_null(pt_node(g, "dropout"));
    cp_graph_free(g);
}

Test(pass_cleanup, dropout_in_training_mode_stays)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_floats(g, "ratio", 1, (const float[]){0.5f});
    bool yes = true;
    gb_init(g, "training", CP_DTYPE_BOOL, 0, NULL, &yes);
    gb_node(g, "dropout", "Dropout", GB_IN("x", "ratio", "training"), GB_IN("d"));
    gb_node(g, "relu", "Relu", GB_IN("d"), GB_IN("y"));
    out(g, "y");
    pt_prepare(g);
    cr_assert_not(pt_run_pass(g, "IdentityEliminationPass"));
    cr_assert_not_null(pt_node(g, "dropout"));
    cp_graph_free(g);
}

/* torchvision's Swin exports its attention dropout with training_mode true
 * and ratio 0: that keeps every element, so it is the identity too. */
Test(pass_cleanup, dropout_with_ratio_zero_goes_even_in_training_mode)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_floats(g, "ratio", 1, (const float[]){0.0f});
    bool yes = true;
    gb_init(g, "training", CP_DTYPE_BOOL, 0, NULL, &yes);
    gb_node(g, "dropout", "Dropout", GB_IN("x", "ratio", "training"), GB_IN("d"));
    gb_node(g, "relu", "Relu", GB_IN("d"), GB_IN("y"));
    out(g, "y");
    pt_prepare(g);
    cr_assert(pt_run_pass(g, "IdentityEliminationPass"));
    cr_assert_null(pt_node(g, "dropout"));
    cp_graph_free(g);
}

/* ---- DeadNodeEliminationPass ----------------------------------------------------------------- */

/* y = Relu(x); a side branch Exp -> Sigmoid reaches no output; a
 * two-output Split of which one half is used stays. */
static struct cp_graph *build_dead_branch(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(6));
    gb_floats(g, "w", 6, (const float[]){1, 2, 3, 4, 5, 6});
    gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("r"));
    gb_node(g, "exp", "Exp", GB_IN("r"), GB_IN("e"));
    gb_node(g, "sig", "Sigmoid", GB_IN("e"), GB_IN("s"));
    gb_node(g, "mulw", "Mul", GB_IN("s", "w"), GB_IN("unused"));
    gb_node(g, "split", "Split", GB_IN("r"), GB_IN("h0", "h1"));
    gb_node(g, "neg", "Sigmoid", GB_IN("h0"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_dead_branch(struct cp_graph *g)
{
    cr_assert_eq(cp_graph_n_live_nodes(g), 3);
    cr_assert_null(pt_node(g, "exp"));
    cr_assert_null(pt_node(g, "sig"));
    cr_assert_null(pt_node(g, "mulw"));
    cr_assert_not_null(pt_node(g, "split"));
}

Test(pass_cleanup, nodes_that_reach_no_output_are_removed)
{
    pt_check_pass(build_dead_branch, "DeadNodeEliminationPass", true, check_dead_branch, 0);
}

Test(pass_cleanup, a_graph_with_nothing_dead_is_unchanged)
{
    pt_check_pass(build_identity_chain, "DeadNodeEliminationPass", false, NULL, 0);
}

/* The manager's closing sweep also drops the tensors nothing reads, so the
 * .om does not carry them: here the weight of the dead branch. */
Test(pass_cleanup, unused_initializers_are_dropped_after_the_passes)
{
    struct cp_graph *g = build_dead_branch();
    pt_prepare(g);
    size_t before = cp_graph_n_tensors(g);
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_passes_run(g, NULL, NULL, NULL, NULL, &d), CP_OK, "%s", d.msg);
    cr_assert_lt(cp_graph_n_tensors(g), before);
    cr_assert_lt(cp_graph_find_tensor(g, "w"), 0, "the unused weight 'w' is still there");
    cr_assert_lt(cp_graph_find_tensor(g, "unused"), 0);
    cr_assert_geq(cp_graph_find_tensor(g, "x"), 0, "inputs stay");
    cr_assert_geq(cp_graph_find_tensor(g, "h1"), 0, "outputs of live nodes stay");
    cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s", d.msg);
    /* The renumbered graph still runs. */
    struct pt_outputs o;
    pt_run_ref(g, 3, &o);
    cr_assert_eq(o.n, 1);
    pt_outputs_release(&o);
}

/* Node `name` has 2-D pads `want` (begin H, W, end H, W). */
static void expect_pads(struct cp_graph *g, const char *name, const int64_t *want)
{
    const struct cp_attr *a = cp_node_attr(pt_node(g, name), "pads");
    cr_assert(a && a->n == 4, "%s has no 2-D pads", name);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(a->ints[i], want[i], "%s: pad %d is %lld, not %lld", name, i,
                     (long long)a->ints[i], (long long)want[i]);
}

/* ---- ConvDeadTapEliminationPass ---------------------------------------------------------- */

static void conv_weights(struct cp_graph *g, const char *name, const int64_t *dims)
{
    int64_t n = dims[0] * dims[1] * dims[2] * dims[3];
    float *w = malloc((size_t)n * sizeof *w);
    for (int64_t i = 0; i < n; i++)
        w[i] = (float)((i * 29) % 17 - 8) * 0.05f;
    gb_init(g, name, CP_DTYPE_F32, 4, dims, w);
    free(w);
}

/* DeepLabV3's ASPP: a 3x3 conv dilated by 12 (pads 12) over a 5x6 map;
 * only the centre tap lands inside. */
static struct cp_graph *build_aspp(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 16, 5, 6));
    conv_weights(g, "w", GB_DIMS(8, 16, 3, 3));
    gb_init(g, "b", CP_DTYPE_F32, 1, GB_DIMS(8), (const float[]){1, -1, 2, -2, 0.5f, 0, 3, -3});
    int32_t n = gb_node(g, "aspp", "Conv", GB_IN("x", "w", "b"), GB_IN("y"));
    cp_node_set_ints(g, n, "kernel_shape", GB_DIMS(3, 3), 2);
    cp_node_set_ints(g, n, "dilations", GB_DIMS(12, 12), 2);
    cp_node_set_ints(g, n, "pads", GB_DIMS(12, 12, 12, 12), 4);
    out(g, "y");
    return g;
}

static void check_aspp(struct cp_graph *g)
{
    const struct cp_node *c = pt_node(g, "aspp");
    cr_assert_not_null(c);
    const struct cp_tensor *w = cp_graph_tensor(g, c->inputs[1]);
    cr_assert_eq(w->shape.dims[2].value, 1, "kernel height %lld",
                 (long long)w->shape.dims[2].value);
    cr_assert_eq(w->shape.dims[3].value, 1);
    expect_pads(g, "aspp", GB_DIMS(0, 0, 0, 0));
    cr_assert_eq(cp_node_attr(c, "kernel_shape")->ints[0], 1);
}

Test(pass_cleanup, a_dilated_conv_whose_outer_taps_read_only_padding_becomes_1x1)
{
    pt_check_pass(build_aspp, "ConvDeadTapEliminationPass", true, check_aspp, 1e-6);
}

/* Dilation 3 over a 7-wide map with pads 4: taps 0 and 2 reach the input
 * along W for some outputs, so W keeps 3 taps; along H (height 2, pads 3,
 * dilation 3) only the centre does, with stride 2. */
static struct cp_graph *build_partial(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(2, 4, 2, 7));
    conv_weights(g, "w", GB_DIMS(6, 4, 3, 3));
    int32_t n = gb_node(g, "c", "Conv", GB_IN("x", "w"), GB_IN("y"));
    cp_node_set_ints(g, n, "dilations", GB_DIMS(3, 3), 2);
    cp_node_set_ints(g, n, "pads", GB_DIMS(3, 4, 3, 4), 4);
    cp_node_set_ints(g, n, "strides", GB_DIMS(2, 1), 2);
    out(g, "y");
    return g;
}

static void check_partial(struct cp_graph *g)
{
    const struct cp_tensor *w = cp_graph_tensor(g, pt_node(g, "c")->inputs[1]);
    cr_assert_eq(w->shape.dims[2].value, 1);
    cr_assert_eq(w->shape.dims[3].value, 3);
    expect_pads(g, "c", GB_DIMS(0, 4, 0, 4));
}

Test(pass_cleanup, only_the_axes_with_dead_taps_are_cropped)
{
    pt_check_pass(build_partial, "ConvDeadTapEliminationPass", true, check_partial, 1e-6);
}

/* Every tap of a plain 3x3 conv reads the input: nothing changes. */
static struct cp_graph *build_live(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 6, 6));
    conv_weights(g, "w", GB_DIMS(4, 4, 3, 3));
    int32_t n = gb_node(g, "c", "Conv", GB_IN("x", "w"), GB_IN("y"));
    cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4);
    out(g, "y");
    return g;
}

Test(pass_cleanup, a_conv_whose_taps_all_read_the_input_is_unchanged)
{
    pt_check_pass(build_live, "ConvDeadTapEliminationPass", false, NULL, 0);
}

/* ---- PadFoldingPass ---------------------------------------------------------------------- */

/* x -> Pad(zeros: H by 1/1, W by 2/0) -> `reader` -> y; `variant` 1 pads
 * with 0.5 instead, 2 reads the Pad with MaxPool, 3 gives the AveragePool
 * padding of its own that it does not count. */
static struct cp_graph *build_pad(const char *reader, int variant)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 4, 6, 5));
    gb_ints(g, "pads", 8, (const int64_t[]){0, 0, 1, 2, 0, 0, 1, 0});
    if (variant == 1)
        gb_init(g, "v", CP_DTYPE_F32, 0, NULL, (const float[]){0.5f});
    else
        gb_init(g, "v", CP_DTYPE_F32, 0, NULL, (const float[]){0.0f});
    gb_node(g, "pad", "Pad", GB_IN("x", "pads", "v"), GB_IN("p"));
    int32_t n;
    if (strcmp(reader, "Conv") == 0) {
        conv_weights(g, "w", GB_DIMS(3, 4, 3, 3));
        n = gb_node(g, "rd", "Conv", GB_IN("p", "w"), GB_IN("y"));
        cp_node_set_ints(g, n, "pads", GB_DIMS(1, 0, 0, 1), 4);
    } else {
        n = gb_node(g, "rd", variant == 2 ? "MaxPool" : "AveragePool", GB_IN("p"), GB_IN("y"));
        cp_node_set_ints(g, n, "kernel_shape", GB_DIMS(3, 3), 2);
        if (variant == 3)
            cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4);
    }
    out(g, "y");
    return g;
}

static struct cp_graph *build_pad_pool(void)
{
    return build_pad("AveragePool", 0);
}
static struct cp_graph *build_pad_conv(void)
{
    return build_pad("Conv", 0);
}
static struct cp_graph *build_pad_value(void)
{
    return build_pad("AveragePool", 1);
}
static struct cp_graph *build_pad_maxpool(void)
{
    return build_pad("AveragePool", 2);
}
static struct cp_graph *build_pad_pool_own_pads(void)
{
    return build_pad("AveragePool", 3);
}

static void check_pad_pool(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_PAD), 0);
    const struct cp_node *p = pt_node(g, "rd");
    expect_pads(g, "rd", GB_DIMS(1, 2, 1, 0));
    cr_assert_eq(cp_node_attr_int(p, "count_include_pad", 0), 1);
    cr_assert(pt_has_origin(p, "pad"), "the Pad's name survives as an origin");
}

static void check_pad_conv(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_PAD), 0);
    expect_pads(g, "rd", GB_DIMS(2, 2, 1, 1));
}

Test(pass_cleanup, a_zero_pad_becomes_the_padding_of_the_pool_or_conv_reading_it)
{
    pt_check_pass(build_pad_pool, "PadFoldingPass", true, check_pad_pool, 1e-6);
    pt_check_pass(build_pad_conv, "PadFoldingPass", true, check_pad_conv, 1e-6);
}

Test(pass_cleanup, a_pad_the_reader_cannot_absorb_stays)
{
    pt_check_pass(build_pad_value, "PadFoldingPass", false, NULL, 0);
    pt_check_pass(build_pad_maxpool, "PadFoldingPass", false, NULL, 0);
    pt_check_pass(build_pad_pool_own_pads, "PadFoldingPass", false, NULL, 0);
}
