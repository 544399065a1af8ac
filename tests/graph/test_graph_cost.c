/* FLOP and byte estimates, and graph totals. */
#include <criterion/criterion.h>

#include "graph/graph_build.h"

#define F32 CP_DTYPE_F32

static struct cp_node_cost cost_of(struct cp_graph *g, int32_t node)
{
    return cp_node_cost(g, cp_graph_node(g, node));
}

Test(graph_cost, test_cost_matmul_flops_are_2mnk_times_batch)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 3, GB_DIMS(4, 8, 16));    /* batch 4, M 8, K 16 */
    gb_init(g, "b", F32, 2, GB_DIMS(16, 32), NULL); /* N 32 */
    int32_t n = gb_node(g, "mm", "MatMul", GB_IN("a", "b"), GB_IN("y"));
    gb_infer_ok(g);
    struct cp_node_cost c = cost_of(g, n);
    cr_assert_float_eq(c.flops, 2.0 * 4 * 8 * 32 * 16, 1e-6);
    /* a + b + y, f32. */
    cr_assert_float_eq(c.bytes, 4.0 * (4 * 8 * 16 + 16 * 32 + 4 * 8 * 32), 1e-6);
    cp_graph_free(g);
}

Test(graph_cost, test_cost_gemm_counts_bias_add)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 2, GB_DIMS(8, 16));
    gb_init(g, "b", F32, 2, GB_DIMS(32, 16), NULL);
    gb_init(g, "c", F32, 1, GB_DIMS(32), NULL);
    int32_t n = gb_node(g, "fc", "Gemm", GB_IN("a", "b", "c"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "transB", 1), CP_OK);
    gb_infer_ok(g);
    cr_assert_float_eq(cost_of(g, n).flops, 2.0 * 8 * 32 * 16 + 8 * 32, 1e-6);
    cp_graph_free(g);
}

Test(graph_cost, test_cost_conv_flops_with_group_and_bias)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(2, 32, 16, 16));
    gb_init(g, "w", F32, 4, GB_DIMS(64, 16, 3, 3), NULL);
    gb_init(g, "b", F32, 1, GB_DIMS(64), NULL);
    int32_t n = gb_node(g, "conv", "Conv", GB_IN("x", "w", "b"), GB_IN("y"));
    cr_assert_eq(cp_node_set_int(g, n, "group", 2), CP_OK);
    cr_assert_eq(cp_node_set_ints(g, n, "pads", GB_DIMS(1, 1, 1, 1), 4), CP_OK);
    gb_infer_ok(g);
    double out = 2.0 * 64 * 16 * 16;
    /* 2 * N * Cout * H * W * (Cin / group) * kh * kw + bias. */
    cr_assert_float_eq(cost_of(g, n).flops, 2.0 * out * 16 * 3 * 3 + out, 1e-6);
    cp_graph_free(g);
}

Test(graph_cost, test_cost_conv_transpose_scatters_from_input)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 4, GB_DIMS(1, 16, 8, 8));
    gb_init(g, "w", F32, 4, GB_DIMS(16, 4, 2, 2), NULL);
    int32_t n = gb_node(g, "up", "ConvTranspose", GB_IN("x", "w"), GB_IN("y"));
    cr_assert_eq(cp_node_set_ints(g, n, "strides", GB_DIMS(2, 2), 2), CP_OK);
    gb_infer_ok(g);
    cr_assert_float_eq(cost_of(g, n).flops, 2.0 * (16 * 8 * 8) * 4 * 2 * 2, 1e-6);
    cp_graph_free(g);
}

Test(graph_cost, test_cost_elementwise_softmax_and_data_movement)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(4, 10));
    int32_t add = gb_node(g, "add", "Add", GB_IN("x", "x"), GB_IN("a"));
    int32_t sm = gb_node(g, "sm", "Softmax", GB_IN("a"), GB_IN("s"));
    int32_t tp = gb_node(g, "tp", "Transpose", GB_IN("s"), GB_IN("t"));
    gb_infer_ok(g);
    cr_assert_float_eq(cost_of(g, add).flops, 40.0, 1e-9);
    cr_assert_float_eq(cost_of(g, sm).flops, 200.0, 1e-9);
    cr_assert_float_eq(cost_of(g, tp).flops, 0.0, 1e-9);
    cr_assert_float_eq(cost_of(g, tp).bytes, 2.0 * 40 * 4, 1e-9);
    cp_graph_free(g);
}

Test(graph_cost, test_cost_dynamic_dims_count_as_one)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", F32, 2, GB_DIMS(-1, 10));
    int32_t n = gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("y"));
    gb_infer_ok(g);
    cr_assert_float_eq(cost_of(g, n).flops, 10.0, 1e-9);
    cr_assert_float_eq(cost_of(g, n).bytes, 80.0, 1e-9);
    cp_graph_free(g);
}

Test(graph_cost, test_graph_stats_totals_live_nodes_and_used_params)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "a", F32, 2, GB_DIMS(2, 8));
    gb_init(g, "w", F32, 2, GB_DIMS(8, 4), NULL);
    gb_init(g, "orphan", F32, 1, GB_DIMS(100), NULL);
    int32_t mm = gb_node(g, "mm", "MatMul", GB_IN("a", "w"), GB_IN("y"));
    int32_t relu = gb_node(g, "relu", "Relu", GB_IN("y"), GB_IN("z"));
    int32_t dead = gb_node(g, "dead", "Relu", GB_IN("z"), GB_IN("d"));
    cp_graph_node(g, dead)->dead = true;
    gb_infer_ok(g);
    struct cp_graph_stats st;
    cp_graph_stats(g, &st);
    cr_assert_eq(st.n_nodes, 2);
    cr_assert_eq(st.n_params, 32);
    cr_assert_eq(st.param_bytes, 128);
    cr_assert_eq(st.op_count[CP_OP_MATMUL], 1);
    cr_assert_eq(st.op_count[CP_OP_RELU], 1);
    double want = cost_of(g, mm).flops + cost_of(g, relu).flops;
    cr_assert_float_eq(st.flops, want, 1e-9);
    cr_assert_float_eq(st.flops, 2.0 * 2 * 4 * 8 + 8, 1e-9);
    cp_graph_free(g);
}
