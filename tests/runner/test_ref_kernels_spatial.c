/* Reference kernels for the sliding-window and resampling ops, driven one
 * node at a time: Conv, ConvTranspose, MaxPool, AveragePool,
 * GlobalAveragePool and Resize. Values marked "PyTorch" were computed with
 * torch.nn.functional on the same inputs. */
#include "runner/ref_test_util.h"

/* ---- Conv --------------------------------------------------------------------------------- */

Test(ref_conv, pads_add_up_neighbourhoods)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 3, 3), F32(1, 2, 3, 4, 5, 6, 7, 8, 9));
    f32_init(g, "W", 4, GB_DIMS(1, 1, 3, 3), F32(1, 1, 1, 1, 1, 1, 1, 1, 1));
    int32_t n = op_node(g, "Conv", GB_IN("X", "W"));
    cp_node_set_ints(g, n, "pads", I64(1, 1, 1, 1), 4);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 3, 3);
    EXPECT_F32(&r, 0, 0, 12, 21, 16, 27, 45, 33, 24, 39, 28);
    kd_release(&r);
}

Test(ref_conv, groups_strides_dilations_pads_and_bias)
{
    float x[50];
    for (int i = 0; i < 50; i++)
        x[i] = (float)i / 10;
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 2, 5, 5), x);
    f32_init(g, "W", 4, GB_DIMS(2, 1, 2, 2), F32(1, -1, 2, 0.5f, 0.25f, 1, -2, 3));
    f32_init(g, "B", 1, GB_DIMS(2), F32(0.5f, -1));
    int32_t n = op_node(g, "Conv", GB_IN("X", "W", "B"));
    cp_node_set_int(g, n, "group", 2);
    cp_node_set_ints(g, n, "strides", I64(2, 2), 2);
    cp_node_set_ints(g, n, "dilations", I64(2, 2), 2);
    cp_node_set_ints(g, n, "pads", I64(1, 1, 1, 1), 4);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 2, 3, 3);
    /* PyTorch */
    EXPECT_F32(&r, 0, 1e-5f, 0.8f, 2.1f, 2.1f, 0.7f, 4.4f, 4.9f, -1.1f, 0.3f, 2.3f, 8.3f, 2.7f,
               -7.6f, 14.4f, 7.775f, -8.775f, 3.1f, 4.325f, 0.075f);
    kd_release(&r);
}

static void run_conv1d_same(struct kd_run *r, const char *auto_pad)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 3, GB_DIMS(1, 1, 4), F32(1, 2, 3, 4));
    f32_init(g, "W", 3, GB_DIMS(1, 1, 2), F32(1, 10));
    int32_t n = op_node(g, "Conv", GB_IN("X", "W"));
    cp_node_set_string(g, n, "auto_pad", auto_pad);
    kd_run(r, g, n);
}

Test(ref_conv, same_upper_pads_the_end_and_same_lower_the_start)
{
    struct kd_run r;
    run_conv1d_same(&r, "SAME_UPPER");
    EXPECT_F32(&r, 0, 0, 21, 32, 43, 4);
    kd_release(&r);
    run_conv1d_same(&r, "SAME_LOWER");
    EXPECT_F32(&r, 0, 0, 10, 21, 32, 43);
    kd_release(&r);
}

Test(ref_conv, three_spatial_dims)
{
    float x[27];
    for (int i = 0; i < 27; i++)
        x[i] = (float)i;
    float w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 5, GB_DIMS(1, 1, 3, 3, 3), x);
    f32_init(g, "W", 5, GB_DIMS(1, 1, 2, 2, 2), w);
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Conv", GB_IN("X", "W")));
    EXPECT_SHAPE(&r, 0, 5, 1, 1, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 52, 60, 76, 84, 124, 132, 148, 156);
    kd_release(&r);
}

/* ---- ConvTranspose -------------------------------------------------------------------------- */

Test(ref_conv_transpose, output_padding_extends_the_end)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 2), F32(1, 2, 3, 4));
    f32_init(g, "W", 4, GB_DIMS(1, 1, 2, 2), F32(1, 1, 1, 1));
    int32_t n = op_node(g, "ConvTranspose", GB_IN("X", "W"));
    cp_node_set_ints(g, n, "strides", I64(2, 2), 2);
    cp_node_set_ints(g, n, "output_padding", I64(1, 1), 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 5, 5);
    EXPECT_F32(&r, 0, 0, 1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 3, 3, 4, 4, 0, 3, 3, 4, 4, 0, 0, 0, 0, 0, 0);
    kd_release(&r);
}

Test(ref_conv_transpose, groups_pads_and_bias)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 2, 2, 2), F32(1, 2, 3, 4, 5, 6, 7, 8));
    f32_init(g, "W", 4, GB_DIMS(2, 1, 2, 2), F32(1, 0.5f, -1, 2, 0, 1, 1, -0.5f));
    f32_init(g, "B", 1, GB_DIMS(2), F32(0.25f, -0.25f));
    int32_t n = op_node(g, "ConvTranspose", GB_IN("X", "W", "B"));
    cp_node_set_int(g, n, "group", 2);
    cp_node_set_ints(g, n, "strides", I64(2, 2), 2);
    cp_node_set_ints(g, n, "pads", I64(1, 1, 1, 1), 4);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 2, 2, 2);
    /* PyTorch */
    EXPECT_F32(&r, 0, 1e-6f, 2.25f, -1.75f, 1.75f, 4.25f, -2.75f, 5.75f, 6.75f, -0.25f);
    kd_release(&r);
}

static void run_convt1d(struct kd_run *r, const char *auto_pad, int64_t output_shape)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 3, GB_DIMS(1, 1, 3), F32(0, 1, 2));
    f32_init(g, "W", 3, GB_DIMS(1, 1, 3), F32(1, 1, 1));
    int32_t n = op_node(g, "ConvTranspose", GB_IN("X", "W"));
    cp_node_set_ints(g, n, "strides", I64(2), 1);
    if (auto_pad)
        cp_node_set_string(g, n, "auto_pad", auto_pad);
    if (output_shape > 0)
        cp_node_set_ints(g, n, "output_shape", &output_shape, 1);
    kd_run(r, g, n);
}

Test(ref_conv_transpose, same_padding_and_output_shape)
{
    /* The full result is 0 0 1 1 3 2 2 (length 7). */
    struct kd_run r;
    run_convt1d(&r, "SAME_UPPER", 0);
    EXPECT_F32(&r, 0, 0, 0, 0, 1, 1, 3, 2);
    kd_release(&r);
    run_convt1d(&r, "SAME_LOWER", 0);
    EXPECT_F32(&r, 0, 0, 0, 1, 1, 3, 2, 2);
    kd_release(&r);
    run_convt1d(&r, NULL, 8); /* larger than the full result: the tail is zero */
    EXPECT_F32(&r, 0, 0, 0, 0, 1, 1, 3, 2, 2, 0);
    kd_release(&r);
    run_convt1d(&r, NULL, 5); /* cropped by 2: one cell each side */
    EXPECT_F32(&r, 0, 0, 0, 1, 1, 3, 2);
    kd_release(&r);
}

/* ---- pools -------------------------------------------------------------------------------- */

static const float pool_x[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

static int32_t pool_node(struct cp_graph *g, const char *op, int64_t k, int64_t stride, int64_t pad,
                         bool ceil_mode)
{
    f32_init(g, "X", 4, GB_DIMS(1, 1, 4, 4), pool_x);
    int32_t n = op_node(g, op, GB_IN("X"));
    cp_node_set_ints(g, n, "kernel_shape", I64(k, k), 2);
    cp_node_set_ints(g, n, "strides", I64(stride, stride), 2);
    cp_node_set_ints(g, n, "pads", I64(pad, pad, pad, pad), 4);
    cp_node_set_int(g, n, "ceil_mode", ceil_mode);
    return n;
}

Test(ref_pool, max_pool_with_pads_and_ceil_mode)
{
    struct cp_graph *g = gb_graph(13);
    int32_t n = pool_node(g, "MaxPool", 3, 2, 1, true);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 3, 3);
    EXPECT_F32(&r, 0, 0, 5, 7, 7, 13, 15, 15, 13, 15, 15); /* PyTorch */
    kd_release(&r);
}

Test(ref_pool, max_pool_dilations)
{
    struct cp_graph *g = gb_graph(13);
    int32_t n = pool_node(g, "MaxPool", 2, 1, 0, false);
    cp_node_set_ints(g, n, "dilations", I64(2, 2), 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 10, 11, 14, 15);
    kd_release(&r);
}

static void run_max_pool_indices(struct kd_run *r, int64_t storage_order)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 2, 2, 2), F32(1, 4, 3, 2, 5, 6, 8, 7));
    int32_t n = gb_node(g, "n", "MaxPool", GB_IN("X"), GB_IN("Y", "I"));
    cp_node_set_ints(g, n, "kernel_shape", I64(2, 2), 2);
    cp_node_set_int(g, n, "storage_order", storage_order);
    kd_run(r, g, n);
}

Test(ref_pool, max_pool_indices_count_across_planes_in_either_storage_order)
{
    struct kd_run r;
    run_max_pool_indices(&r, 0);
    EXPECT_F32(&r, 0, 0, 4, 8);
    EXPECT_INTS(&r, 1, CP_DTYPE_I64, 1, 6);
    kd_release(&r);
    run_max_pool_indices(&r, 1);
    EXPECT_INTS(&r, 1, CP_DTYPE_I64, 2, 5);
    kd_release(&r);
}

Test(ref_pool, average_pool_counts_padding_only_when_asked)
{
    struct cp_graph *g = gb_graph(13);
    int32_t n = pool_node(g, "AveragePool", 3, 2, 1, true);
    struct kd_run r;
    kd_run(&r, g, n);
    /* PyTorch, count_include_pad=False */
    EXPECT_F32(&r, 0, 1e-5f, 2.5f, 4, 5, 8.5f, 10, 11, 12.5f, 14, 15);
    kd_release(&r);

    g = gb_graph(13);
    n = pool_node(g, "AveragePool", 3, 2, 1, true);
    cp_node_set_int(g, n, "count_include_pad", 1);
    kd_run(&r, g, n);
    /* PyTorch, count_include_pad=True: the cells only ceil_mode adds are
     * not counted */
    EXPECT_F32(&r, 0, 1e-5f, 1.11111111f, 2.66666667f, 1.66666667f, 5.66666667f, 10, 5.5f,
               4.16666667f, 7, 3.75f);
    kd_release(&r);
}

Test(ref_pool, global_average_pool_means_each_plane)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 2, 2, 2), F32(1, 2, 3, 4, 5, 6, 7, 8));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "GlobalAveragePool", GB_IN("X")));
    EXPECT_SHAPE(&r, 0, 4, 1, 2, 1, 1);
    EXPECT_F32(&r, 0, 0, 2.5f, 6.5f);
    kd_release(&r);
}

/* ---- Resize --------------------------------------------------------------------------------- */

/* Resize(X, roi, scales, sizes) at opset 13 with the given attributes;
 * exactly one of scales / sizes is non-NULL. */
static int32_t resize_node(struct cp_graph *g, const char *mode, const char *coord,
                           const float *scales, const int64_t *sizes, int rank)
{
    int64_t r = rank;
    if (scales)
        f32_init(g, "scales", 1, &r, scales);
    else
        gb_ints(g, "sizes", rank, sizes);
    int32_t n =
        op_node(g, "Resize", scales ? GB_IN("X", "", "scales") : GB_IN("X", "", "", "sizes"));
    cp_node_set_string(g, n, "mode", mode);
    if (coord)
        cp_node_set_string(g, n, "coordinate_transformation_mode", coord);
    return n;
}

Test(ref_resize, nearest_asymmetric_floor_upsamples)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 2), F32(1, 2, 3, 4));
    int32_t n = resize_node(g, "nearest", "asymmetric", F32(1, 1, 2, 2), NULL, 4);
    cp_node_set_string(g, n, "nearest_mode", "floor");
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 4, 4);
    EXPECT_F32(&r, 0, 0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
    kd_release(&r);
}

Test(ref_resize, nearest_modes_round_half_pixel_coordinates)
{
    /* 2 -> 5 half_pixel: sources -0.3, 0.1, 0.5, 0.9, 1.3 */
    static const char *const modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const float want[4][5] = {
        {1, 1, 1, 2, 2}, {1, 1, 2, 2, 2}, {1, 1, 1, 1, 2}, {1, 2, 2, 2, 2}};
    for (int m = 0; m < 4; m++) {
        struct cp_graph *g = gb_graph(13);
        f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 2), F32(1, 2));
        int32_t n = resize_node(g, "nearest", NULL, NULL, I64(1, 1, 1, 5), 4);
        cp_node_set_string(g, n, "nearest_mode", modes[m]);
        struct kd_run r;
        kd_run(&r, g, n);
        kd_expect_f32(&r, 0, 5, want[m], 0);
        kd_release(&r);
    }
}

Test(ref_resize, nearest_moves_integers)
{
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "X", CP_DTYPE_I64, 2, GB_DIMS(1, 2), I64(5, 6));
    int32_t n = resize_node(g, "nearest", "asymmetric", F32(2, 2), NULL, 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 5, 5, 6, 6, 5, 5, 6, 6);
    kd_release(&r);
}

Test(ref_resize, linear_half_pixel_clamps_at_the_edges)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 2), F32(1, 3));
    struct kd_run r;
    kd_run(&r, g, resize_node(g, "linear", NULL, F32(1, 1, 1, 2), NULL, 4));
    EXPECT_F32(&r, 0, 0, 1, 1.5f, 2.5f, 3);
    kd_release(&r);
}

Test(ref_resize, bilinear_align_corners)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 3), F32(1, 2, 4, 3, 5, 9));
    struct kd_run r;
    kd_run(&r, g, resize_node(g, "linear", "align_corners", NULL, I64(1, 1, 3, 5), 4));
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 3, 5);
    /* PyTorch */
    EXPECT_F32(&r, 0, 1e-6f, 1, 1.5f, 2, 3, 4, 2, 2.75f, 3.5f, 5, 6.5f, 3, 4, 5, 7, 9);
    kd_release(&r);
}

Test(ref_resize, bicubic_half_pixel_matches_pytorch)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 3), F32(1, 2, 4, 3, 5, 9));
    struct kd_run r;
    kd_run(&r, g, resize_node(g, "cubic", NULL, F32(1, 1, 2, 2), NULL, 4));
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 4, 6);
    EXPECT_F32(&r, 0, 1e-5f, 0.694717f, 0.928833f, 1.29224f, 2.18327f, 3.09877f, 3.66135f, 1.32376f,
               1.64478f, 2.14307f, 3.36484f, 4.62015f, 5.39154f, 2.35983f, 2.82397f, 3.54443f,
               5.31094f, 7.12595f, 8.24127f, 2.98888f, 3.53992f, 4.39526f, 6.49251f, 8.64732f,
               9.97147f);
    kd_release(&r);
}

Test(ref_resize, pytorch_half_pixel_maps_a_single_output_to_zero)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 4), F32(1, 2, 3, 4));
    struct kd_run r;
    kd_run(&r, g, resize_node(g, "linear", "pytorch_half_pixel", NULL, I64(1, 1, 1, 1), 4));
    EXPECT_F32(&r, 0, 0, 1);
    kd_release(&r);

    g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 4), F32(1, 2, 3, 4));
    kd_run(&r, g, resize_node(g, "linear", "half_pixel", NULL, I64(1, 1, 1, 1), 4));
    EXPECT_F32(&r, 0, 0, 2.5f);
    kd_release(&r);
}

Test(ref_resize, tf_crop_and_resize_extrapolates_outside_the_roi)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 2), F32(1, 3));
    f32_init(g, "roi", 1, GB_DIMS(8), F32(0, 0, 0, 0, 1, 1, 1, 2));
    gb_ints(g, "sizes", 4, I64(1, 1, 1, 3));
    int32_t n = op_node(g, "Resize", GB_IN("X", "roi", "", "sizes"));
    cp_node_set_string(g, n, "mode", "linear");
    cp_node_set_string(g, n, "coordinate_transformation_mode", "tf_crop_and_resize");
    cp_node_set_float(g, n, "extrapolation_value", 10);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 1, 3, 10);
    kd_release(&r);
}

Test(ref_resize, refuses_antialias_and_unknown_modes)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 2), F32(1, 2, 3, 4));
    int32_t n = resize_node(g, "linear", NULL, F32(1, 1, 2, 2), NULL, 4);
    cp_node_set_int(g, n, "antialias", 1);
    cr_assert_not(kd_supports(g, n));
    cp_graph_free(g);

    g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 2), F32(1, 2, 3, 4));
    n = resize_node(g, "area", NULL, F32(1, 1, 2, 2), NULL, 4);
    cr_assert_not(kd_supports(g, n));
    cp_graph_free(g);
}
