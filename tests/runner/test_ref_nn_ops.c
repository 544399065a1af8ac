/* Reference kernels and inference of the [nn] family, for what ONNX's
 * backend cases miss: NonMaxSuppression's data-dependent row count, LRN's
 * even window, MaxUnpool's bad indices, DepthToSpace's layout, and the
 * errors that name the node. */
#include "runner/ref_test_util.h"

#include <math.h>
#include <string.h>

/* Declare output Y's shape (as a model's value_info does). */
static void declare_y(struct cp_graph *g, int rank, const int64_t *dims)
{
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (strcmp(t->name, "Y") == 0)
            cp_shape_set(&t->shape, rank, dims);
    }
}

/* Two batches of three boxes, one class: boxes 0 and 1 overlap (IoU 0.81),
 * box 2 is apart. */
static struct cp_graph *nms_graph(int64_t max_out)
{
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "B", 3, GB_DIMS(2, 3, 4),
             F32(0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6, /* batch 0 */
                 0, 0, 1, 1, 0, 3, 1, 4, 0, 0.05f, 1, 1.05f));
    f32_init(g, "S", 3, GB_DIMS(2, 1, 3), F32(0.9f, 0.95f, 0.5f, 0.3f, 0.8f, 0.6f));
    gb_init(g, "M", CP_DTYPE_I64, 1, GB_DIMS(1), &max_out);
    f32_init(g, "T", 1, GB_DIMS(1), F32(0.5f));
    op_node(g, "NonMaxSuppression", GB_IN("B", "S", "M", "T"));
    return g;
}

Test(ref_nms, selects_per_batch_and_class_in_score_order)
{
    struct cp_graph *g = nms_graph(3);
    declare_y(g, 2, GB_DIMS(4, 3));
    struct kd_run r;
    kd_run(&r, g, 0);
    /* batch 0: box 1 (0.95) suppresses box 0, then box 2; batch 1: box 1
     * (0.8), box 2 (0.6) suppresses box 0 (0.3). */
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 0, 0, 1, 0, 0, 2, 1, 0, 1, 1, 0, 2);
    kd_release(&r);
}

Test(ref_nms, max_output_boxes_limits_each_class)
{
    struct cp_graph *g = nms_graph(1);
    declare_y(g, 2, GB_DIMS(2, 3));
    struct kd_run r;
    kd_run(&r, g, 0);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 0, 0, 1, 1, 0, 1);
    kd_release(&r);
}

Test(ref_nms, a_selection_of_another_size_than_declared_fails_without_overrun)
{
    int64_t rows[] = {3, 5};
    for (int i = 0; i < 2; i++) {
        struct cp_graph *g = nms_graph(3);
        declare_y(g, 2, GB_DIMS(rows[i], 3));
        struct kd_run r;
        kd_run_kernel(&r, g, 0, NULL); /* checks the canary past the output */
        cr_assert_eq(r.status, CP_ERR_INVALID, "rows %lld: status %d", (long long)rows[i],
                     (int)r.status);
        kd_release(&r);
    }
}

Test(ref_nms, an_undeclared_row_count_has_no_kernel)
{
    struct cp_graph *g = nms_graph(3);
    gb_infer_ok(g);
    const struct cp_tensor *y = gb_get(g, "Y");
    cr_assert_eq(y->shape.rank, 2);
    cr_assert_lt(y->shape.dims[0].value, 0, "the row count is data-dependent");
    cr_assert_eq(y->shape.dims[1].value, 3);
    cr_assert_not(kd_supports(g, 0));
    cp_graph_free(g);
}

/* Greedy NMS written plainly, every candidate against every kept box, for
 * checking the kernel's bucketed search. Boxes are (y1, x1, y2, x2). */
static int64_t naive_nms(const float *b, const float *sc, int64_t n, double thr, int64_t *keep)
{
    int64_t ids[512], kept = 0;
    for (int64_t i = 0; i < n; i++)
        ids[i] = i;
    for (int64_t i = 1; i < n; i++) /* insertion sort: score down, index up */
        for (int64_t j = i; j > 0 && (sc[ids[j]] > sc[ids[j - 1]] ||
                                      (sc[ids[j]] == sc[ids[j - 1]] && ids[j] < ids[j - 1]));
             j--) {
            int64_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    for (int64_t i = 0; i < n; i++) {
        const float *c = b + 4 * ids[i];
        bool ok = true;
        for (int64_t j = 0; j < kept && ok; j++) {
            const float *q = b + 4 * keep[j];
            double iy0 = fmax(c[0], q[0]), ix0 = fmax(c[1], q[1]);
            double iy1 = fmin(c[2], q[2]), ix1 = fmin(c[3], q[3]);
            if (ix1 <= ix0 || iy1 <= iy0)
                continue;
            double inter = (ix1 - ix0) * (iy1 - iy0);
            double uni = (double)(c[2] - c[0]) * (c[3] - c[1]) +
                         (double)(q[2] - q[0]) * (q[3] - q[1]) - inter;
            ok = !(inter / uni > thr);
        }
        if (ok)
            keep[kept++] = ids[i];
    }
    return kept;
}

/* torchvision's batched NMS offsets each class into its own range and runs
 * one NMS: 400 boxes in 8 bands far apart, of very different widths, many
 * overlapping within a band. */
Test(ref_nms, bucketed_search_keeps_what_every_pair_would)
{
    enum { N = 400 };
    static float box[N * 4], score[N];
    uint64_t st = 12345;
    for (int i = 0; i < N; i++) {
        double r[5];
        for (int k = 0; k < 5; k++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            r[k] = (double)(st >> 11) / 9007199254740992.0;
        }
        float off = (float)(i % 8) * 1000.0f;
        float w = i % 17 == 0 ? 300.0f : (float)(5.0 + 40.0 * r[2]);
        float x0 = off + (float)(r[0] * 200.0), y0 = (float)(r[1] * 200.0);
        box[4 * i + 0] = y0;
        box[4 * i + 1] = x0;
        box[4 * i + 2] = y0 + (float)(5.0 + 40.0 * r[3]);
        box[4 * i + 3] = x0 + w;
        score[i] = (float)r[4];
    }
    int64_t want[N];
    int64_t nk = naive_nms(box, score, N, 0.3, want);
    cr_assert_gt(nk, 20);
    cr_assert_lt(nk, N, "some boxes must be suppressed");
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "B", 3, GB_DIMS(1, N, 4), box);
    f32_init(g, "S", 3, GB_DIMS(1, 1, N), score);
    int64_t max_out = N;
    gb_init(g, "M", CP_DTYPE_I64, 1, GB_DIMS(1), &max_out);
    f32_init(g, "T", 1, GB_DIMS(1), F32(0.3f));
    op_node(g, "NonMaxSuppression", GB_IN("B", "S", "M", "T"));
    declare_y(g, 2, GB_DIMS(nk, 3));
    struct kd_run r;
    kd_run(&r, g, 0);
    const int64_t *got = r.out_data[0];
    for (int64_t i = 0; i < nk; i++)
        cr_assert_eq(got[3 * i + 2], want[i], "row %lld: box %lld, want %lld", (long long)i,
                     (long long)got[3 * i + 2], (long long)want[i]);
    kd_release(&r);
}

Test(ref_lrn, even_size_sums_one_more_channel_after)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 2, 1, 1), F32(1, 2));
    int32_t n = op_node(g, "LRN", GB_IN("X"));
    cp_node_set_int(g, n, "size", 2);
    cp_node_set_float(g, n, "alpha", 1.0f);
    cp_node_set_float(g, n, "beta", 1.0f);
    cp_node_set_float(g, n, "bias", 1.0f);
    struct kd_run r;
    kd_run(&r, g, n);
    /* c0 sums c0..c1 (5), c1 only itself (4): x / (1 + 5/2), x / (1 + 4/2) */
    EXPECT_F32(&r, 0, TOL, 1.0f / 3.5f, 2.0f / 3.0f);
    kd_release(&r);
}

Test(ref_depth_to_space, dcr_and_crd_interleave_differently)
{
    float x[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    const char *modes[2] = {"DCR", "CRD"};
    for (int m = 0; m < 2; m++) {
        struct cp_graph *g = gb_graph(13);
        f32_init(g, "X", 4, GB_DIMS(1, 4, 1, 2), x);
        int32_t n = op_node(g, "DepthToSpace", GB_IN("X"));
        cp_node_set_int(g, n, "blocksize", 2);
        cp_node_set_string(g, n, "mode", modes[m]);
        struct kd_run r;
        kd_run(&r, g, n);
        EXPECT_SHAPE(&r, 0, 4, 1, 1, 2, 4);
        /* one output channel: DCR and CRD read the same depth channel here */
        EXPECT_F32(&r, 0, 0, 0, 2, 1, 3, 4, 6, 5, 7);
        kd_release(&r);
    }
}

Test(ref_space_to_depth, inverts_depth_to_space_dcr)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 4), F32(0, 2, 1, 3, 4, 6, 5, 7));
    int32_t n = op_node(g, "SpaceToDepth", GB_IN("X"));
    cp_node_set_int(g, n, "blocksize", 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 4, 1, 2);
    EXPECT_F32(&r, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7);
    kd_release(&r);
}

Test(ref_max_unpool, an_index_outside_the_output_fails_the_run)
{
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 1), F32(5));
    int64_t idx = 4;
    gb_init(g, "I", CP_DTYPE_I64, 4, GB_DIMS(1, 1, 1, 1), &idx);
    int32_t n = op_node(g, "MaxUnpool", GB_IN("X", "I"));
    cp_node_set_ints(g, n, "kernel_shape", I64(2, 2), 2);
    struct kd_run r;
    kd_run_kernel(&r, g, n, NULL);
    cr_assert_eq(r.status, CP_ERR_INVALID);
    kd_release(&r);
}

Test(ref_nn_infer, bad_inputs_name_the_node)
{
    char msg[1024];
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 6, 2, 2), NULL);
    int32_t n = op_node(g, "DepthToSpace", GB_IN("X"));
    cp_node_set_int(g, n, "blocksize", 2);
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'n'") && strstr(msg, "blocksize"), "%s", msg);

    cp_graph_free(g);
    g = gb_graph(20);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 2), NULL);
    f32_init(g, "G", 4, GB_DIMS(1, 2, 2, 2), NULL);
    n = op_node(g, "GridSample", GB_IN("X", "G"));
    cp_node_set_string(g, n, "mode", "bilinear"); /* opset 16's name; 20 says "linear" */
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "'n'") && strstr(msg, "bilinear"), "%s", msg);

    cp_graph_free(g);
    g = gb_graph(16);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 2), NULL);
    f32_init(g, "G", 4, GB_DIMS(1, 2, 2, 3), NULL);
    op_node(g, "GridSample", GB_IN("X", "G"));
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "last dim"), "%s", msg);

    cp_graph_free(g);
    g = gb_graph(16);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 4, 4), NULL);
    f32_init(g, "R", 2, GB_DIMS(2, 5), NULL);
    gb_init(g, "I", CP_DTYPE_I64, 1, GB_DIMS(2), NULL);
    op_node(g, "RoiAlign", GB_IN("X", "R", "I"));
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "rois"), "%s", msg);
    cp_graph_free(g);
}

Test(ref_grid_sample, three_d_linear_reads_the_voxel_at_each_corner)
{
    float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct cp_graph *g = gb_graph(20);
    f32_init(g, "X", 5, GB_DIMS(1, 1, 2, 2, 2), x);
    /* (x, y, z) = (1, -1, 1) with align_corners: voxel z=1, y=0, x=1 -> 6;
     * the centre averages all eight -> 4.5 */
    f32_init(g, "G", 5, GB_DIMS(1, 1, 1, 2, 3), F32(1, -1, 1, 0, 0, 0));
    int32_t n = op_node(g, "GridSample", GB_IN("X", "G"));
    cp_node_set_int(g, n, "align_corners", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 5, 1, 1, 1, 1, 2);
    EXPECT_F32(&r, 0, TOL, 6, 4.5f);
    kd_release(&r);
}

Test(ref_center_crop_pad, crops_one_axis_and_pads_another_about_the_centre)
{
    struct cp_graph *g = gb_graph(18);
    f32_init(g, "X", 2, GB_DIMS(3, 2), F32(1, 2, 3, 4, 5, 6));
    gb_init(g, "S", CP_DTYPE_I64, 1, GB_DIMS(2), I64(1, 4));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "CenterCropPad", GB_IN("X", "S")));
    EXPECT_SHAPE(&r, 0, 2, 1, 4);
    EXPECT_F32(&r, 0, 0, 0, 3, 4, 0); /* row 1 kept; one zero column each side */
    kd_release(&r);
}

Test(ref_col2im, sums_overlapping_blocks)
{
    /* 1-D image of 3 from blocks of 2 at positions 0 and 1 */
    struct cp_graph *g = gb_graph(18);
    f32_init(g, "X", 3, GB_DIMS(1, 2, 2), F32(1, 2, 10, 20));
    gb_init(g, "I", CP_DTYPE_I64, 1, GB_DIMS(1), I64(3));
    gb_init(g, "B", CP_DTYPE_I64, 1, GB_DIMS(1), I64(2));
    struct kd_run r;
    kd_run(&r, g, op_node(g, "Col2Im", GB_IN("X", "I", "B")));
    EXPECT_SHAPE(&r, 0, 3, 1, 1, 3);
    EXPECT_F32(&r, 0, 0, 1, 12, 20);
    kd_release(&r);
}

Test(ref_affine_grid, identity_theta_gives_the_base_grid)
{
    struct cp_graph *g = gb_graph(20);
    f32_init(g, "T", 3, GB_DIMS(1, 2, 3), F32(1, 0, 0, 0, 1, 0));
    gb_init(g, "S", CP_DTYPE_I64, 1, GB_DIMS(4), I64(1, 1, 1, 2));
    int32_t n = op_node(g, "AffineGrid", GB_IN("T", "S"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 2, 2);
    EXPECT_F32(&r, 0, TOL, -0.5f, 0, 0.5f, 0); /* pixel centres of a 1x2 image */
    kd_release(&r);
}

Test(ref_max_roi_pool, an_roi_outside_the_image_pools_to_zero)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 2, 2), F32(1, 2, 3, 4));
    f32_init(g, "R", 2, GB_DIMS(2, 5), F32(0, 0, 0, 1, 1, 0, 5, 5, 6, 6));
    int32_t n = op_node(g, "MaxRoiPool", GB_IN("X", "R"));
    cp_node_set_ints(g, n, "pooled_shape", I64(1, 1), 2);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 4, 0);
    kd_release(&r);
}

Test(ref_deform_conv, zero_offsets_are_a_conv_and_half_offsets_interpolate)
{
    float off[2 * 4 * 2 * 2] = {0};
    for (int pass = 0; pass < 2; pass++) {
        struct cp_graph *g = gb_graph(19);
        f32_init(g, "X", 4, GB_DIMS(1, 1, 3, 3), F32(1, 2, 3, 4, 5, 6, 7, 8, 9));
        f32_init(g, "W", 4, GB_DIMS(1, 1, 2, 2), F32(1, 1, 1, 1));
        if (pass == 1)
            for (int t = 0; t < 4; t++)
                for (int o = 0; o < 4; o++)
                    off[(t * 2) * 4 + o] = 0.5f; /* every tap half a row down */
        f32_init(g, "O", 4, GB_DIMS(1, 8, 2, 2), off);
        struct kd_run r;
        kd_run(&r, g, op_node(g, "DeformConv", GB_IN("X", "W", "O")));
        EXPECT_SHAPE(&r, 0, 4, 1, 1, 2, 2);
        if (pass == 0)
            EXPECT_F32(&r, 0, TOL, 12, 16, 24, 28);
        else /* rows 0.5 and 1.5 (rows 1.5 and 2.5: half of row 2 and nothing past) */
            EXPECT_F32(&r, 0, TOL, 18, 22, 19.5f, 22.5f);
        kd_release(&r);
    }
}
