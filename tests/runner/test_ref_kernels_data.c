/* Reference kernels for data movement and generated data, driven one node
 * at a time: Concat, Split, Slice, Gather, Transpose, Expand, the reshaping
 * ops, Shape, Dropout, ConstantOfShape, Range and Pad. */
#include "runner/ref_test_util.h"

/* ---- Concat and Split ------------------------------------------------------------------ */

Test(ref_concat, joins_three_inputs_along_a_negative_axis)
{
    struct cp_graph *g = gb_graph(17);
    f32_init(g, "A", 2, GB_DIMS(2, 1), F32(1, 2));
    f32_init(g, "B", 2, GB_DIMS(2, 2), F32(3, 4, 5, 6));
    f32_init(g, "C", 2, GB_DIMS(2, 1), F32(7, 8));
    int32_t n = op_node(g, "Concat", GB_IN("A", "B", "C"));
    cp_node_set_int(g, n, "axis", -1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 4);
    EXPECT_F32(&r, 0, 0, 1, 3, 4, 7, 2, 5, 6, 8);
    kd_release(&r);
}

Test(ref_concat, joins_integers_along_axis_0)
{
    struct cp_graph *g = gb_graph(17);
    gb_ints(g, "A", 2, I64(1, 2));
    gb_ints(g, "B", 1, I64(-1));
    int32_t n = op_node(g, "Concat", GB_IN("A", "B"));
    cp_node_set_int(g, n, "axis", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 1, 2, -1);
    kd_release(&r);
}

Test(ref_split, sizes_input_from_opset_13)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    gb_ints(g, "sp", 2, I64(1, 2));
    int32_t n = gb_node(g, "n", "Split", GB_IN("X", "sp"), GB_IN("Y1", "Y2"));
    cp_node_set_int(g, n, "axis", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 1);
    EXPECT_F32(&r, 0, 0, 1, 4);
    EXPECT_SHAPE(&r, 1, 2, 2, 2);
    EXPECT_F32(&r, 1, 0, 2, 3, 5, 6);
    kd_release(&r);
}

Test(ref_split, sizes_attribute_before_opset_13_and_equal_parts)
{
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "X", 2, GB_DIMS(3, 2), F32(1, 2, 3, 4, 5, 6));
    int32_t n = gb_node(g, "n", "Split", GB_IN("X"), GB_IN("Y1", "Y2"));
    cp_node_set_ints(g, n, "split", I64(2, 1), 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 1, 2, 3, 4);
    EXPECT_F32(&r, 1, 0, 5, 6);
    kd_release(&r);

    g = gb_graph(13);
    gb_ints(g, "X", 4, I64(1, 2, 3, 4));
    n = gb_node(g, "n", "Split", GB_IN("X"), GB_IN("Y1", "Y2"));
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 1, 2);
    EXPECT_INTS(&r, 1, CP_DTYPE_I64, 3, 4);
    kd_release(&r);
}

/* ---- Slice -------------------------------------------------------------------------------- */

static struct cp_graph *slice_graph(void)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 4), F32(0, 1, 2, 3, 4, 5, 6, 7));
    return g;
}

Test(ref_slice, negative_step_reverses_an_axis)
{
    struct cp_graph *g = slice_graph();
    gb_ints(g, "st", 1, I64(-1));
    gb_ints(g, "en", 1, I64(INT64_MIN));
    gb_ints(g, "ax", 1, I64(1));
    gb_ints(g, "sp", 1, I64(-1));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Slice", GB_IN("X", "st", "en", "ax", "sp")));
    EXPECT_SHAPE(&r, 0, 2, 2, 4);
    EXPECT_F32(&r, 0, 0, 3, 2, 1, 0, 7, 6, 5, 4);
    kd_release(&r);

    g = slice_graph();
    gb_ints(g, "st", 1, I64(3));
    gb_ints(g, "en", 1, I64(0));
    gb_ints(g, "ax", 1, I64(-1));
    gb_ints(g, "sp", 1, I64(-2));
    kd_run(&r, g, op_node(g, "Slice", GB_IN("X", "st", "en", "ax", "sp")));
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 3, 1, 7, 5);
    kd_release(&r);
}

Test(ref_slice, clamps_out_of_range_ends_with_int32_params_and_negative_axes)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(3, 2), F32(0, 1, 2, 3, 4, 5));
    gb_init(g, "st", CP_DTYPE_I32, 1, GB_DIMS(1), I32(1));
    gb_init(g, "en", CP_DTYPE_I32, 1, GB_DIMS(1), I32(1000));
    gb_init(g, "ax", CP_DTYPE_I32, 1, GB_DIMS(1), I32(-2));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Slice", GB_IN("X", "st", "en", "ax")));
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 2, 3, 4, 5);
    kd_release(&r);
}

Test(ref_slice, steps_on_two_axes_with_default_axes)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(3, 4), F32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    gb_ints(g, "st", 2, I64(0, 1));
    gb_ints(g, "en", 2, I64(3, 4));
    gb_ints(g, "sp", 2, I64(2, 2));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Slice", GB_IN("X", "st", "en", "", "sp")));
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 1, 3, 9, 11);
    kd_release(&r);
}

/* ---- Gather -------------------------------------------------------------------------------- */

Test(ref_gather, negative_indices_count_from_the_end)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "D", 2, GB_DIMS(3, 2), F32(1, 2, 3, 4, 5, 6));
    gb_ints(g, "I", 2, I64(-1, 0));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Gather", GB_IN("D", "I")));
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 5, 6, 1, 2);
    kd_release(&r);
}

Test(ref_gather, axis_1_with_2d_int32_indices)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "D", CP_DTYPE_I64, 2, GB_DIMS(2, 3), I64(1, 2, 3, 4, 5, 6));
    gb_init(g, "I", CP_DTYPE_I32, 2, GB_DIMS(2, 2), I32(0, 2, -1, 1));
    int32_t n = op_node(g, "Gather", GB_IN("D", "I"));
    cp_node_set_int(g, n, "axis", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 3, 2, 2, 2);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 1, 3, 3, 2, 4, 6, 6, 5);
    kd_release(&r);
}

Test(ref_gather, scalar_index_drops_the_axis)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "D", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    gb_scalar(g, "I", -2);
    int32_t n = op_node(g, "Gather", GB_IN("D", "I"));
    cp_node_set_int(g, n, "axis", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 1, 2);
    EXPECT_F32(&r, 0, 0, 2, 5);
    kd_release(&r);
}

Test(ref_gather, refuses_an_index_out_of_range_at_run_time)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "D", 1, GB_DIMS(3), F32(1, 2, 3));
    int32_t it = gb_ints(g, "I", 1, I64(0));
    int32_t n = op_node(g, "Gather", GB_IN("D", "I"));
    /* Inference checks known indices; change the data once it has seen a
     * valid one, as a run-time input would. */
    gb_infer_ok(g);
    *(int64_t *)(uintptr_t)cp_graph_tensor(g, it)->data = 3;
    struct kd_run r;
    kd_run_kernel(&r, g, n, NULL);
    cr_assert_eq(r.status, CP_ERR_INTERNAL);
    kd_release(&r);
}

/* ---- Transpose and Expand -------------------------------------------------------------------- */

Test(ref_transpose, default_perm_reverses_dims)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Transpose", GB_IN("X")));
    EXPECT_SHAPE(&r, 0, 2, 3, 2);
    EXPECT_F32(&r, 0, 0, 1, 4, 2, 5, 3, 6);
    kd_release(&r);
}

Test(ref_transpose, rotates_three_dims)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_I64, 3, GB_DIMS(2, 2, 2), I64(0, 1, 2, 3, 4, 5, 6, 7));
    int32_t n = op_node(g, "Transpose", GB_IN("X"));
    cp_node_set_ints(g, n, "perm", I64(1, 2, 0), 3);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 0, 4, 1, 5, 2, 6, 3, 7);
    kd_release(&r);
}

Test(ref_expand, broadcasts_both_ways)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(3, 1), F32(1, 2, 3));
    gb_ints(g, "S", 3, I64(2, 1, 4));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Expand", GB_IN("X", "S")));
    EXPECT_SHAPE(&r, 0, 3, 2, 3, 4);
    EXPECT_F32(&r, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    kd_release(&r);

    g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_BOOL, 1, GB_DIMS(2), U8(1, 0));
    gb_ints(g, "S", 2, I64(2, 1));
    kd_run(&r, g, op_node(g, "Expand", GB_IN("X", "S")));
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 1, 0, 1, 0);
    kd_release(&r);
}

/* ---- reshaping ops, Identity, Dropout, Shape ------------------------------------------------- */

Test(ref_views, reshaping_ops_copy_the_data)
{
    static const char *const ops[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        struct cp_graph *g = gb_graph(13);
        gb_init(g, "X", CP_DTYPE_I32, 3, GB_DIMS(1, 2, 2), I32(1, 2, 3, 4));
        gb_ints(g, "shape", 2, I64(4, -1));
        gb_ints(g, "axes", 1, I64(0));
        const char *const x_only[] = {"X", NULL}, *const x_shape[] = {"X", "shape", NULL},
                          *const x_axes[] = {"X", "axes", NULL};
        const char *const *ins = i == 0 ? x_shape : i == 2 || i == 3 ? x_axes : x_only;
        struct kd_run r;
        kd_run(&r, g, op_node(g, ops[i], ins));
        EXPECT_INTS(&r, 0, CP_DTYPE_I32, 1, 2, 3, 4);
        kd_release(&r);
    }
}

Test(ref_views, unsqueeze_axes_attribute_before_opset_13)
{
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "X", 1, GB_DIMS(2), F32(1, 2));
    int32_t n = op_node(g, "Unsqueeze", GB_IN("X"));
    cp_node_set_ints(g, n, "axes", I64(0, -1), 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 3, 1, 2, 1);
    EXPECT_F32(&r, 0, 0, 1, 2);
    kd_release(&r);
}

Test(ref_views, dropout_copies_and_its_mask_is_all_true)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 1, GB_DIMS(3), F32(1, 2, 3));
    f32_scalar(g, "ratio", 0.5f);
    int32_t n = gb_node(g, "n", "Dropout", GB_IN("X", "ratio"), GB_IN("Y", "mask"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 1, 2, 3);
    EXPECT_INTS(&r, 1, CP_DTYPE_BOOL, 1, 1, 1);
    kd_release(&r);
}

Test(ref_views, dropout_in_training_mode_is_not_supported)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 1, GB_DIMS(3), F32(1, 2, 3));
    f32_scalar(g, "ratio", 0.5f);
    gb_init(g, "train", CP_DTYPE_BOOL, 0, NULL, U8(1));
    cr_assert_not(kd_supports(g, op_node(g, "Dropout", GB_IN("X", "ratio", "train"))));
    cp_graph_free(g);
}

Test(ref_shape, start_and_end_select_dims)
{
    struct cp_graph *g = gb_graph(15);
    f32_init(g, "X", 4, GB_DIMS(2, 3, 4, 5), NULL);
    struct kd_run r;
    int32_t n = op_node(g, "Shape", GB_IN("X"));
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 2, 3, 4, 5);
    kd_release(&r);

    g = gb_graph(15);
    f32_init(g, "X", 4, GB_DIMS(2, 3, 4, 5), NULL);
    n = op_node(g, "Shape", GB_IN("X"));
    cp_node_set_int(g, n, "start", 1);
    cp_node_set_int(g, n, "end", -1);
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 3, 4);
    kd_release(&r);
}

/* ---- ConstantOfShape and Range ------------------------------------------------------------ */

Test(ref_generate, constant_of_shape_fills_the_value_or_zero)
{
    struct cp_graph *g = gb_graph(13);
    gb_ints(g, "S", 2, I64(2, 3));
    int32_t v = gb_tensor(g, "value", CP_DTYPE_I64, 1, GB_DIMS(1), CP_TENSOR_INITIALIZER);
    int64_t *p = cp_graph_alloc(g, sizeof *p);
    *p = 7;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_set_data(g, v, p, sizeof *p, CP_DATA_ARENA, &d), CP_OK);
    int32_t n = op_node(g, "ConstantOfShape", GB_IN("S"));
    cr_assert_eq(cp_node_set_tensor(g, n, "value", v), CP_OK);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 3);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 7, 7, 7, 7, 7, 7);
    kd_release(&r);

    g = gb_graph(13);
    gb_ints(g, "S", 1, I64(3));
    kd_run(&r, g, op_node(g, "ConstantOfShape", GB_IN("S")));
    EXPECT_F32(&r, 0, 0, 0, 0, 0);
    kd_release(&r);
}

Test(ref_generate, range_counts_up_in_floats_and_down_in_integers)
{
    struct cp_graph *g = gb_graph(13);
    f32_scalar(g, "a", 1);
    f32_scalar(g, "b", 5);
    f32_scalar(g, "c", 1.5f);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Range", GB_IN("a", "b", "c")));
    EXPECT_F32(&r, 0, 0, 1, 2.5f, 4);
    kd_release(&r);

    g = gb_graph(13);
    gb_init(g, "a", CP_DTYPE_I32, 0, NULL, I32(10));
    gb_init(g, "b", CP_DTYPE_I32, 0, NULL, I32(4));
    gb_init(g, "c", CP_DTYPE_I32, 0, NULL, I32(-3));
    kd_run(&r, g, op_node(g, "Range", GB_IN("a", "b", "c")));
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, 10, 7);
    kd_release(&r);
}

/* ---- Pad ------------------------------------------------------------------------------------ */

static void run_pad(struct kd_run *r, int64_t opset, const char *mode, const int64_t *pads,
                    int64_t n_pads, const float *x, int64_t rows, int64_t cols)
{
    struct cp_graph *g = gb_graph(opset);
    f32_init(g, "X", 2, GB_DIMS(rows, cols), x);
    gb_ints(g, "P", n_pads, pads);
    int32_t n = op_node(g, "Pad", GB_IN("X", "P"));
    cp_node_set_string(g, n, "mode", mode);
    kd_run(r, g, n);
}

Test(ref_pad, constant_value_input)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    gb_ints(g, "P", 4, I64(0, 1, 1, 0));
    f32_scalar(g, "V", 9);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Pad", GB_IN("X", "P", "V")));
    EXPECT_SHAPE(&r, 0, 2, 3, 3);
    EXPECT_F32(&r, 0, 0, 9, 1, 2, 9, 3, 4, 9, 9, 9);
    kd_release(&r);
}

Test(ref_pad, reflect_and_edge)
{
    struct kd_run r;
    run_pad(&r, 13, "reflect", I64(0, 2, 0, 2), 4, F32(1, 2, 3), 1, 3);
    EXPECT_F32(&r, 0, 0, 3, 2, 1, 2, 3, 2, 1);
    kd_release(&r);

    run_pad(&r, 13, "edge", I64(1, 2, 0, 2), 4, F32(1, 2, 3), 1, 3);
    EXPECT_SHAPE(&r, 0, 2, 2, 7);
    EXPECT_F32(&r, 0, 0, 1, 1, 1, 2, 3, 3, 3, 1, 1, 1, 2, 3, 3, 3);
    kd_release(&r);

    run_pad(&r, 13, "reflect", I64(1, 0, 1, 0), 4, F32(1, 2, 3, 4), 2, 2);
    EXPECT_F32(&r, 0, 0, 3, 4, 1, 2, 3, 4, 1, 2);
    kd_release(&r);
}

Test(ref_pad, negative_pads_crop)
{
    struct kd_run r;
    run_pad(&r, 13, "constant", I64(0, -1, 0, 1), 4, F32(1, 2, 3, 4), 1, 4);
    EXPECT_SHAPE(&r, 0, 2, 1, 4);
    EXPECT_F32(&r, 0, 0, 2, 3, 4, 0);
    kd_release(&r);
}

Test(ref_pad, axes_input_from_opset_18)
{
    struct cp_graph *g = gb_graph(18);
    f32_init(g, "X", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    gb_ints(g, "P", 2, I64(1, 1));
    gb_ints(g, "A", 1, I64(-1));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Pad", GB_IN("X", "P", "", "A")));
    EXPECT_SHAPE(&r, 0, 2, 2, 4);
    EXPECT_F32(&r, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0);
    kd_release(&r);
}
