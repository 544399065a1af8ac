/* Reference kernels on the forms the legacy family widened: opset-19
 * Resize coordinates, binary ops in f64/f16, Clip's attribute bounds
 * before opset 11, Resize as Upsample imports it (opset 9). */
#include "runner/ref_test_util.h"
#include "graph/op_eval.h"
#include "runner/cpu/fast_kernels.h"

#include <math.h>

Test(ref_legacy, resize_half_pixel_symmetric_keeps_the_output_centred)
{
    /* 7 -> floor(7 * 1.7) = 11 and 7 -> 4 (scale 0.6), linear; values
     * from ONNX's formula: offset = 7/2 * (1 - out / (scale * 7)). */
    float x[7] = {0, 1, 2, 3, 4, 5, 6};
    static const float scales[2] = {1.7f, 0.6f};
    for (int k = 0; k < 2; k++) {
        struct cp_graph *g = gb_graph(19);
        f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 7), x);
        f32_init(g, "scales", 1, GB_DIMS(4), F32(1, 1, 1, scales[k]));
        int32_t n = op_node(g, "Resize", GB_IN("X", "", "scales"));
        cp_node_set_string(g, n, "mode", "linear");
        cp_node_set_string(g, n, "coordinate_transformation_mode", "half_pixel_symmetric");
        struct kd_run r;
        kd_run(&r, g, n);
        if (k == 0) {
            EXPECT_SHAPE(&r, 0, 4, 1, 1, 1, 11);
            EXPECT_F32(&r, 0, 1e-4f, 0.0588235f, 0.647059f, 1.23529f, 1.82353f, 2.41176f, 3,
                       3.58824f, 4.17647f, 4.76471f, 5.35294f, 5.94118f);
        } else {
            EXPECT_SHAPE(&r, 0, 4, 1, 1, 1, 4);
            EXPECT_F32(&r, 0, 1e-4f, 0.5f, 2.16667f, 3.83333f, 5.5f);
        }
        kd_release(&r);
    }
}

Test(ref_legacy, resize_half_pixel_symmetric_is_refused_before_opset_19)
{
    struct cp_graph *g = gb_graph(18);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 2), F32(1, 2));
    f32_init(g, "scales", 1, GB_DIMS(4), F32(1, 1, 1, 2));
    int32_t n = op_node(g, "Resize", GB_IN("X", "", "scales"));
    cp_node_set_string(g, n, "coordinate_transformation_mode", "half_pixel_symmetric");
    cr_assert(!kd_supports(g, n));
    cp_graph_free(g);
}

Test(ref_legacy, resize_10_is_asymmetric_nearest_flooring)
{
    /* Resize-10 (and Upsample 7-9, imported onto it): x[floor(o / scale)] */
    struct cp_graph *g = gb_graph(9);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 3), F32(1, 2, 3));
    f32_init(g, "scales", 1, GB_DIMS(4), F32(1, 1, 1, 2));
    int32_t n = op_node(g, "Resize", GB_IN("X", "scales"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 1, 1, 2, 2, 3, 3);
    kd_release(&r);
}

Test(ref_legacy, binary_ops_in_double_keep_their_fractions)
{
    static const double a[4] = {0.25, 1.5, -2.75, 1e-300}, b[2] = {0.5, 3.0};
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div"};
    for (int o = 0; o < 4; o++) {
        struct cp_graph *g = gb_graph(13);
        gb_init(g, "A", CP_DTYPE_F64, 2, GB_DIMS(2, 2), a);
        gb_init(g, "B", CP_DTYPE_F64, 1, GB_DIMS(2), b);
        int32_t n = op_node(g, ops[o], GB_IN("A", "B"));
        struct kd_run r;
        kd_run(&r, g, n);
        cr_assert_eq(r.out[0]->dtype, CP_DTYPE_F64);
        const double *y = r.out_data[0];
        for (int j = 0; j < 4; j++) {
            double x = a[j], w = b[j % 2];
            double want = o == 0 ? x + w : o == 1 ? x - w : o == 2 ? x * w : x / w;
            cr_assert_eq(y[j], want, "%s [%d]: %.17g vs %.17g", ops[o], j, y[j], want);
        }
        kd_release(&r);
    }
}

Test(ref_legacy, binary_ops_in_half_round_like_half_arithmetic)
{
    /* 1 + 2^-11 is not an f16: the sum rounds to even (1). */
    uint16_t a[2], b[2];
    float av[2] = {1.0f, 3.0f}, bv[2] = {0.00048828125f, 0.5f};
    for (int j = 0; j < 2; j++) {
        cp_eval_store_f64(a, CP_DTYPE_F16, j, av[j]);
        cp_eval_store_f64(b, CP_DTYPE_F16, j, bv[j]);
    }
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "A", CP_DTYPE_F16, 1, GB_DIMS(2), a);
    gb_init(g, "B", CP_DTYPE_F16, 1, GB_DIMS(2), b);
    int32_t n = op_node(g, "Add", GB_IN("A", "B"));
    struct kd_run r;
    kd_run(&r, g, n);
    cr_assert_eq(r.out[0]->dtype, CP_DTYPE_F16);
    cr_assert_eq(cp_elem_load_f64(r.out_data[0], CP_DTYPE_F16, 0), 1.0);
    cr_assert_eq(cp_elem_load_f64(r.out_data[0], CP_DTYPE_F16, 1), 3.5);
    kd_release(&r);
}

Test(ref_legacy, equal_in_double_compares_the_values)
{
    static const double a[2] = {0.5, 0.25}, b[2] = {0.5, 0.75};
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "A", CP_DTYPE_F64, 1, GB_DIMS(2), a);
    gb_init(g, "B", CP_DTYPE_F64, 1, GB_DIMS(2), b);
    int32_t n = op_node(g, "Equal", GB_IN("A", "B"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 1, 0);
    kd_release(&r);
}

Test(ref_legacy, clip_bounds_are_attributes_before_opset_11)
{
    struct cp_graph *g = gb_graph(6);
    f32_init(g, "X", 1, GB_DIMS(4), F32(-2, -0.25f, 0.25f, 2));
    int32_t n = op_node(g, "Clip", GB_IN("X"));
    cp_node_set_float(g, n, "min", -0.5f);
    cp_node_set_float(g, n, "max", 0.5f);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, -0.5f, -0.25f, 0.25f, 0.5f);
    kd_release(&r);
}

/* The fast kernels read only the newer forms: they leave the old ones to
 * the reference rather than compute them wrong. */
Test(ref_legacy, fast_kernels_leave_the_old_forms_to_the_reference)
{
    struct cp_graph *g = gb_graph(6);
    f32_init(g, "X", 1, GB_DIMS(4), F32(-2, -0.25f, 0.25f, 2));
    int32_t n = op_node(g, "Clip", GB_IN("X"));
    cp_node_set_float(g, n, "min", -0.5f);
    cr_assert_eq(cp_graph_infer(g, NULL), CP_OK);
    cr_assert(!cp_fast_clip.supports(g, cp_graph_node(g, n)));
    cr_assert(!cp_dnnl_clip.supports(g, cp_graph_node(g, n)));
    cp_graph_free(g);
    g = gb_graph(9);
    f32_init(g, "X", 4, GB_DIMS(1, 1, 1, 3), F32(1, 2, 3));
    f32_init(g, "scales", 1, GB_DIMS(4), F32(1, 1, 1, 2));
    n = op_node(g, "Resize", GB_IN("X", "scales"));
    cr_assert_eq(cp_graph_infer(g, NULL), CP_OK);
    cr_assert(!cp_fast_resize.supports(g, cp_graph_node(g, n)));
    cp_graph_free(g);
}

Test(ref_legacy, matmul_in_double_accumulates_in_double)
{
    /* 1 + 1e-12 survives in double, not in f32 */
    static const double a[4] = {1, 1e-12, 2, 3}, b[4] = {1, 0, 1, 1};
    struct cp_graph *g = gb_graph(13);
    gb_init(g, "A", CP_DTYPE_F64, 2, GB_DIMS(2, 2), a);
    gb_init(g, "B", CP_DTYPE_F64, 2, GB_DIMS(2, 2), b);
    int32_t n = op_node(g, "MatMul", GB_IN("A", "B"));
    struct kd_run r;
    kd_run(&r, g, n);
    cr_assert_eq(r.out[0]->dtype, CP_DTYPE_F64);
    const double *y = r.out_data[0];
    cr_assert_eq(y[0], 1 + 1e-12);
    cr_assert_eq(y[1], 1e-12);
    cr_assert_eq(y[2], 5);
    cr_assert_eq(y[3], 3);
    kd_release(&r);
}
