/* The reduce_index family's reference kernels and inference on what the
 * ONNX backend cases miss: tie orders, empty reductions, opset forms,
 * value propagation for shape arithmetic, data-dependent shapes, Einsum
 * forms, and bad input giving a clear error. */
#include "runner/ref_test_util.h"

#include <math.h>
#include <string.h>

static int32_t out_tensor(struct cp_graph *g, const char *name)
{
    return cp_graph_find_tensor(g, name);
}

/* ---- TopK, ArgMax ------------------------------------------------------------------------- */

Test(ref_topk, ties_keep_the_lower_index_first)
{
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "X", 1, GB_DIMS(6), F32(3, 1, 3, 2, 3, 1));
    gb_ints(g, "K", 1, I64(2));
    int32_t n = gb_node(g, "n", "TopK", GB_IN("X", "K"), GB_IN("V", "I"));
    struct kd_run r;
    kd_run(&r, g, n);
    cr_assert_eq(r.status, CP_OK);
    EXPECT_F32(&r, 0, 0, 3, 3);
    EXPECT_INTS(&r, 1, CP_DTYPE_I64, 0, 2);
    kd_release(&r);
}

Test(ref_topk, smallest_with_k_attribute_before_opset_10)
{
    struct cp_graph *g = gb_graph(9);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(5, 4, 6, 1, 1, 0));
    int32_t n = gb_node(g, "n", "TopK", GB_IN("X"), GB_IN("V", "I"));
    cp_node_set_int(g, n, "k", 2);
    cp_node_set_int(g, n, "largest", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 4, 5, 0, 1);
    EXPECT_INTS(&r, 1, CP_DTYPE_I64, 1, 0, 2, 0);
    kd_release(&r);
}

Test(ref_topk, k_past_the_axis_is_an_error_naming_the_node)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 1, GB_DIMS(3), F32(1, 2, 3));
    gb_ints(g, "K", 1, I64(4));
    gb_node(g, "topk_node", "TopK", GB_IN("X", "K"), GB_IN("V", "I"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "topk_node") && strstr(msg, "exceeds"), "%s", msg);
    cp_graph_free(g);
}

Test(ref_argmax, select_last_index_picks_the_last_tie)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(2, 7, 7, 1, 1, 0));
    int32_t n = op_node(g, "ArgMax", GB_IN("X"));
    cp_node_set_int(g, n, "axis", 1);
    cp_node_set_int(g, n, "select_last_index", 1);
    cp_node_set_int(g, n, "keepdims", 0);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 1, 2);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 2, 1);
    kd_release(&r);
}

/* ---- reductions ------------------------------------------------------------------------------ */

Test(ref_reduce_index, empty_min_is_infinity_and_empty_int_min_is_the_dtype_max)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "X", CP_DTYPE_F32, 3, GB_DIMS(2, 0, 2));
    int32_t n = op_node(g, "ReduceMin", GB_IN("X"));
    cp_node_set_ints(g, n, "axes", I64(1), 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 3, 2, 1, 2);
    const float *y = r.out_data[0];
    for (int i = 0; i < 4; i++)
        cr_assert(isinf(y[i]) && y[i] > 0);
    kd_release(&r);

    g = gb_graph(13);
    gb_input(g, "X", CP_DTYPE_I32, 2, GB_DIMS(0, 3));
    n = op_node(g, "ReduceMin", GB_IN("X"));
    cp_node_set_ints(g, n, "axes", I64(0), 1);
    cp_node_set_int(g, n, "keepdims", 0);
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I32, INT32_MAX, INT32_MAX, INT32_MAX);
    kd_release(&r);
}

Test(ref_reduce_index, axes_input_from_opset_18_and_bool_max_of_opset_20)
{
    struct cp_graph *g = gb_graph(20);
    gb_init(g, "X", CP_DTYPE_BOOL, 2, GB_DIMS(2, 2), U8(0, 1, 0, 0));
    gb_ints(g, "A", 1, I64(1));
    int32_t n = op_node(g, "ReduceMax", GB_IN("X", "A"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 1);
    EXPECT_INTS(&r, 0, CP_DTYPE_BOOL, 1, 0);
    kd_release(&r);
}

Test(ref_reduce_index, log_sum_exp_l2_and_noop_with_empty_axes)
{
    struct cp_graph *g = gb_graph(18);
    f32_init(g, "X", 2, GB_DIMS(2, 2), F32(0, 0, 3, 4));
    int32_t n = op_node(g, "ReduceL2", GB_IN("X"));
    cp_node_set_ints(g, n, "axes", I64(1), 1); /* an attribute at 18: read as given */
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, 0, 5);
    kd_release(&r);

    g = gb_graph(18);
    f32_init(g, "X", 1, GB_DIMS(2), F32(0, 0));
    n = op_node(g, "ReduceLogSumExp", GB_IN("X"));
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, logf(2.0f));
    kd_release(&r);

    g = gb_graph(18);
    f32_init(g, "X", 1, GB_DIMS(2), F32(1, 2));
    n = op_node(g, "ReduceSumSquare", GB_IN("X"));
    cp_node_set_int(g, n, "noop_with_empty_axes", 1);
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 1, 2);
    kd_release(&r);
}

Test(ref_reduce_index, reduce_prod_of_a_shape_and_size_are_known_at_conversion)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "X", CP_DTYPE_F32, 3, GB_DIMS(2, 3, 4));
    gb_node(g, "s", "Shape", GB_IN("X"), GB_IN("S"));
    int32_t p = gb_node(g, "p", "ReduceProd", GB_IN("S"), GB_IN("P"));
    cp_node_set_int(g, p, "keepdims", 0);
    gb_node(g, "z", "Size", GB_IN("X"), GB_IN("Z"));
    gb_infer_ok(g);
    const struct cp_tensor *pt = cp_graph_tensor(g, out_tensor(g, "P"));
    const struct cp_tensor *zt = cp_graph_tensor(g, out_tensor(g, "Z"));
    cr_assert(pt->value && pt->value_len == 1 && pt->value[0] == 24);
    cr_assert(zt->value && zt->value_len == 1 && zt->value[0] == 24);
    cp_graph_free(g);
}

/* ---- data-dependent shapes
 * ----------------------------------------------------------------------- */

Test(ref_nonzero, of_a_constant_is_known_and_of_an_input_refused_without_a_shape)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 2), F32(1, 0, 0, 3));
    int32_t n = op_node(g, "NonZero", GB_IN("X"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 0, 1, 0, 1);
    const struct cp_tensor *y = cp_graph_tensor(g, out_tensor(g, "Y"));
    cr_assert(y->value && y->value_len == 4, "NonZero of a constant propagates its value");
    kd_release(&r);

    g = gb_graph(13);
    gb_input(g, "X", CP_DTYPE_F32, 2, GB_DIMS(2, 2));
    n = op_node(g, "NonZero", GB_IN("X"));
    cr_assert_not(kd_supports(g, n), "a run-time count has no static output: no kernel");
    cp_graph_free(g);
}

Test(ref_compress, with_a_constant_condition_along_an_axis)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    gb_init(g, "C", CP_DTYPE_BOOL, 1, GB_DIMS(3), U8(1, 0, 1));
    int32_t n = op_node(g, "Compress", GB_IN("X", "C"));
    cp_node_set_int(g, n, "axis", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 2);
    EXPECT_F32(&r, 0, 0, 1, 3, 4, 6);
    kd_release(&r);
}

/* ---- indexing
 * ---------------------------------------------------------------------------------------- */

Test(ref_gather_elements, negative_indices_count_from_the_end_and_out_of_range_fails)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(2, 3), F32(1, 2, 3, 4, 5, 6));
    gb_init(g, "I", CP_DTYPE_I64, 2, GB_DIMS(2, 1), I64(-1, 0));
    int32_t n = op_node(g, "GatherElements", GB_IN("X", "I"));
    cp_node_set_int(g, n, "axis", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 3, 4);
    kd_release(&r);

    g = gb_graph(13);
    f32_init(g, "X", 1, GB_DIMS(2), F32(1, 2));
    gb_init(g, "I", CP_DTYPE_I64, 1, GB_DIMS(1), I64(2));
    n = op_node(g, "GatherElements", GB_IN("X", "I"));
    kd_run_kernel(&r, g, n, NULL);
    cr_assert_eq(r.status, CP_ERR_INTERNAL, "an index past the axis must not be read");
    kd_release(&r);
}

Test(ref_scatter_nd, multiplies_with_reduction_mul)
{
    struct cp_graph *g = gb_graph(16);
    f32_init(g, "X", 1, GB_DIMS(4), F32(1, 2, 3, 4));
    gb_init(g, "I", CP_DTYPE_I64, 2, GB_DIMS(2, 1), I64(1, 1));
    f32_init(g, "U", 1, GB_DIMS(2), F32(10, 3));
    int32_t n = op_node(g, "ScatterND", GB_IN("X", "I", "U"));
    cp_node_set_string(g, n, "reduction", "mul");
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 1, 60, 3, 4);
    kd_release(&r);
}

Test(ref_cumsum, exclusive_reverse_on_integers)
{
    struct cp_graph *g = gb_graph(14);
    gb_ints(g, "X", 4, I64(1, 2, 3, 4));
    gb_scalar(g, "A", 0);
    int32_t n = op_node(g, "CumSum", GB_IN("X", "A"));
    cp_node_set_int(g, n, "exclusive", 1);
    cp_node_set_int(g, n, "reverse", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_INTS(&r, 0, CP_DTYPE_I64, 9, 7, 4, 0);
    kd_release(&r);
}

Test(ref_hardmax, before_opset_13_coerces_to_2d)
{
    struct cp_graph *g = gb_graph(11);
    f32_init(g, "X", 3, GB_DIMS(1, 2, 2), F32(1, 5, 5, 2));
    int32_t n = op_node(g, "Hardmax", GB_IN("X"));
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 0, 1, 0, 0); /* one row of 4: the first 5 wins */
    kd_release(&r);
}

/* ---- Einsum
 * ------------------------------------------------------------------------------------------- */

Test(ref_einsum, attention_scores_transposed_matmul)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "Q", 4, GB_DIMS(1, 1, 2, 2), F32(1, 2, 3, 4));
    f32_init(g, "K", 4, GB_DIMS(1, 1, 3, 2), F32(1, 0, 0, 1, 1, 1));
    int32_t n = op_node(g, "Einsum", GB_IN("Q", "K"));
    cp_node_set_string(g, n, "equation", "bhid,bhjd->bhij");
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 4, 1, 1, 2, 3);
    EXPECT_F32(&r, 0, 0, 1, 2, 3, 3, 4, 7);
    kd_release(&r);
}

Test(ref_einsum, implicit_output_diagonal_and_ellipsis)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "A", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    f32_init(g, "B", 2, GB_DIMS(2, 1), F32(1, 1));
    int32_t n = op_node(g, "Einsum", GB_IN("A", "B"));
    cp_node_set_string(g, n, "equation", "ij,jk");
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 2, 2, 1);
    EXPECT_F32(&r, 0, 0, 3, 7);
    kd_release(&r);

    g = gb_graph(13);
    f32_init(g, "A", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    n = op_node(g, "Einsum", GB_IN("A"));
    cp_node_set_string(g, n, "equation", "ii->i");
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, 0, 1, 4);
    kd_release(&r);

    g = gb_graph(13);
    f32_init(g, "A", 3, GB_DIMS(2, 1, 2), F32(1, 2, 3, 4));
    n = op_node(g, "Einsum", GB_IN("A"));
    cp_node_set_string(g, n, "equation", "...ij->...ji");
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 3, 2, 2, 1);
    EXPECT_F32(&r, 0, 0, 1, 2, 3, 4);
    kd_release(&r);
}

Test(ref_einsum, a_bad_equation_is_an_error_naming_the_node)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "A", 2, GB_DIMS(2, 2), F32(1, 2, 3, 4));
    int32_t n = gb_node(g, "ein", "Einsum", GB_IN("A"), GB_IN("Y"));
    cp_node_set_string(g, n, "equation", "ijk->i");
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "ein") && strstr(msg, "rank"), "%s", msg);
    cp_graph_free(g);
}

/* ---- losses
 * ------------------------------------------------------------------------------------------- */

Test(ref_nll_loss, mean_with_weights_skips_the_ignored_target)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(3, 2), F32(-1, -2, -3, -4, -5, -6));
    gb_ints(g, "T", 3, I64(0, 1, 1));
    f32_init(g, "W", 1, GB_DIMS(2), F32(2, 0.5f));
    int32_t n = op_node(g, "NegativeLogLikelihoodLoss", GB_IN("X", "T", "W"));
    cp_node_set_int(g, n, "ignore_index", 1);
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_SHAPE(&r, 0, 0, 0);
    EXPECT_F32(&r, 0, TOL, 1); /* only sample 0: (1 * 2) / 2 */
    kd_release(&r);
}

Test(ref_sce_loss, none_gives_per_sample_losses_and_log_prob)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(1, 2), F32(0, 0));
    gb_ints(g, "T", 1, I64(1));
    int32_t n = gb_node(g, "n", "SoftmaxCrossEntropyLoss", GB_IN("X", "T"), GB_IN("Y", "LP"));
    cp_node_set_string(g, n, "reduction", "none");
    struct kd_run r;
    kd_run(&r, g, n);
    EXPECT_F32(&r, 0, TOL, logf(2.0f));
    EXPECT_F32(&r, 1, TOL, -logf(2.0f), -logf(2.0f));
    kd_release(&r);
}

Test(ref_nll_loss, a_target_of_the_wrong_rank_is_an_error)
{
    struct cp_graph *g = gb_graph(13);
    f32_init(g, "X", 2, GB_DIMS(3, 2), F32(-1, -2, -3, -4, -5, -6));
    gb_init(g, "T", CP_DTYPE_I64, 2, GB_DIMS(3, 1), I64(0, 1, 1));
    gb_node(g, "loss", "NegativeLogLikelihoodLoss", GB_IN("X", "T"), GB_IN("Y"));
    char msg[1024];
    gb_infer_fails(g, msg);
    cr_assert(strstr(msg, "loss") && strstr(msg, "rank"), "%s", msg);
    cp_graph_free(g);
}
