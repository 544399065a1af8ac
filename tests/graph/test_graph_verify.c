/* Structural verification, topological order and compaction. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph_build.h"

/* x -> Relu(r1) -> a -> Relu(r2) -> b, graph output b. */
static struct cp_graph *chain(void)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(2, 3));
    gb_node(g, "r1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "r2", "Relu", GB_IN("a"), GB_IN("b"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "b")), CP_OK);
    return g;
}

static enum cp_status verify(struct cp_graph *g, struct cp_diag *d)
{
    cp_diag_init(d);
    return cp_graph_verify(g, d);
}

Test(graph_verify, test_verify_accepts_well_formed_graph)
{
    struct cp_graph *g = chain();
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_reports_dangling_input_naming_node_and_tensor)
{
    struct cp_graph *g = chain();
    /* 'ghost' is an intermediate nobody produces. */
    gb_tensor(g, "ghost", CP_DTYPE_F32, 2, GB_DIMS(2, 3), CP_TENSOR_INTERMEDIATE);
    gb_node(g, "adder", "Add", GB_IN("b", "ghost"), GB_IN("c"));
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'adder'"), "message does not name the node: %s", d.msg);
    cr_assert(strstr(d.msg, "'ghost'"), "message does not name the tensor: %s", d.msg);
    cr_assert(strstr(d.msg, "dangling"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_accepts_initializer_and_absent_optional_input)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_init(g, "lo", CP_DTYPE_F32, 0, NULL, (const float[]){0.0f});
    gb_node(g, "clip", "Clip", GB_IN("x", "lo", ""), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_rejects_input_tensor_missing_from_input_list)
{
    struct cp_graph *g = chain();
    /* Kind INPUT, but never registered with cp_graph_add_input: nobody would
     * feed it at run time. */
    gb_tensor(g, "stray", CP_DTYPE_F32, 2, GB_DIMS(2, 3), CP_TENSOR_INPUT);
    gb_node(g, "use", "Add", GB_IN("b", "stray"), GB_IN("c"));
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'use'") && strstr(d.msg, "'stray'"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_and_topo_order_report_cycle)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_tensor(g, "t2", CP_DTYPE_F32, -1, NULL, CP_TENSOR_INTERMEDIATE);
    gb_node(g, "a", "Add", GB_IN("x", "t2"), GB_IN("t1"));
    gb_node(g, "b", "Relu", GB_IN("t1"), GB_IN("t2"));
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "cycle"), "%s", d.msg);

    int32_t *order = (int32_t *)1;
    size_t n = 99;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_topo_order(g, &order, &n, &d), CP_ERR_INVALID);
    cr_assert_null(order);
    cr_assert_eq(n, 0);
    cr_assert(strstr(d.msg, "'a'") || strstr(d.msg, "'b'"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_cycle_report_names_a_node_on_the_cycle_not_downstream)
{
    /* 'down' (inserted first) consumes the cycle p <-> q but is not on it. */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_tensor(g, "q_out", CP_DTYPE_F32, -1, NULL, CP_TENSOR_INTERMEDIATE);
    gb_node(g, "down", "Relu", GB_IN("q_out"), GB_IN("z"));
    gb_node(g, "p", "Add", GB_IN("x", "q_out"), GB_IN("p_out"));
    gb_node(g, "q", "Relu", GB_IN("p_out"), GB_IN("q_out"));
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'p'") || strstr(d.msg, "'q'"), "%s", d.msg);
    cr_assert_null(strstr(d.msg, "'down'"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_rejects_duplicate_node_names)
{
    struct cp_graph *g = chain();
    gb_node(g, "r1", "Sigmoid", GB_IN("b"), GB_IN("c"));
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'r1'"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_rejects_duplicate_tensor_names)
{
    struct cp_graph *g = chain();
    /* A pass that renames a tensor carelessly: 'b' becomes a second 'a'. */
    cp_graph_tensor(g, cp_graph_find_tensor(g, "b"))->name = cp_graph_strdup(g, "a");
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'a'"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_rejects_unproduced_graph_output)
{
    struct cp_graph *g = chain();
    int32_t lost = gb_tensor(g, "lost", CP_DTYPE_F32, 1, GB_DIMS(2), CP_TENSOR_INTERMEDIATE);
    cr_assert_eq(cp_graph_add_output(g, lost), CP_OK);
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'lost'"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_verify_ignores_dead_nodes_but_flags_their_orphans)
{
    struct cp_graph *g = chain();
    /* Killing r1 leaves r2 reading 'a', which nothing live produces. */
    cp_graph_node(g, 0)->dead = true;
    struct cp_diag d;
    cr_assert_eq(verify(g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'r2'") && strstr(d.msg, "'a'"), "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_topo_order_sorts_nodes_added_out_of_order)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_tensor(g, "a", CP_DTYPE_F32, -1, NULL, CP_TENSOR_INTERMEDIATE);
    gb_tensor(g, "b", CP_DTYPE_F32, -1, NULL, CP_TENSOR_INTERMEDIATE);
    gb_node(g, "third", "Add", GB_IN("a", "b"), GB_IN("c")); /* 0 */
    gb_node(g, "second", "Relu", GB_IN("a"), GB_IN("b"));    /* 1 */
    gb_node(g, "first", "Relu", GB_IN("x"), GB_IN("a"));     /* 2 */
    gb_node(g, "other", "Relu", GB_IN("x"), GB_IN("o"));     /* 3 */
    int32_t *order;
    size_t n;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_topo_order(g, &order, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 4);
    /* Ready nodes go lowest index first: first(2), then second(1) and
     * other(3) become/are ready -> second, third, other. */
    int32_t want[] = {2, 1, 0, 3};
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(order[i], want[i], "order[%zu] = %d, expected %d", i, order[i], want[i]);
    free(order);
    cp_graph_free(g);
}

Test(graph_verify, test_topo_order_keeps_sorted_graph_and_skips_dead_nodes)
{
    struct cp_graph *g = chain();
    gb_node(g, "side", "Relu", GB_IN("x"), GB_IN("s"));
    gb_node(g, "tail", "Relu", GB_IN("b"), GB_IN("t"));
    cp_graph_node(g, 2)->dead = true;
    int32_t *order;
    size_t n;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_topo_order(g, &order, &n, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(n, 3);
    cr_assert_eq(order[0], 0);
    cr_assert_eq(order[1], 1);
    cr_assert_eq(order[2], 3);
    free(order);
    cp_graph_free(g);
}

Test(graph_verify, test_compact_reorders_and_drops_dead_nodes)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_tensor(g, "a", CP_DTYPE_F32, -1, NULL, CP_TENSOR_INTERMEDIATE);
    gb_node(g, "late", "Relu", GB_IN("a"), GB_IN("b"));
    gb_node(g, "junk", "Relu", GB_IN("x"), GB_IN("j"));
    gb_node(g, "early", "Relu", GB_IN("x"), GB_IN("a"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "b")), CP_OK);
    cp_graph_node(g, 1)->dead = true;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_compact(g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_n_nodes(g), 2);
    cr_assert_str_eq(cp_graph_node(g, 0)->name, "early");
    cr_assert_str_eq(cp_graph_node(g, 1)->name, "late");
    cr_assert_eq(gb_get(g, "a")->producer, 0);
    cr_assert_eq(gb_get(g, "b")->producer, 1);
    cr_assert_eq(gb_get(g, "j")->producer, -1);
    cr_assert_eq(verify(g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
}

Test(graph_verify, test_compact_fails_on_cycle_and_leaves_graph_alone)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_tensor(g, "t2", CP_DTYPE_F32, -1, NULL, CP_TENSOR_INTERMEDIATE);
    gb_node(g, "a", "Add", GB_IN("x", "t2"), GB_IN("t1"));
    gb_node(g, "b", "Relu", GB_IN("t1"), GB_IN("t2"));
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_compact(g, &d), CP_ERR_INVALID);
    cr_assert_eq(cp_graph_n_nodes(g), 2);
    cp_graph_free(g);
}

Test(graph, add_tensor_refuses_a_duplicate_name)
{
    struct cp_graph *g = cp_graph_create();
    struct cp_diag d;
    cp_diag_init(&d);
    int32_t a, b;
    cr_assert_eq(cp_graph_add_tensor(g, "x", CP_DTYPE_F32, NULL, CP_TENSOR_INPUT, &a, &d), CP_OK);
    cr_assert_eq(cp_graph_add_tensor(g, "x", CP_DTYPE_F32, NULL, CP_TENSOR_INPUT, &b, &d),
                 CP_ERR_INVALID);
    cr_assert_eq(b, -1);
    cr_assert_not_null(strstr(d.msg, "'x'"), "%s", d.msg);
    cr_assert_eq(cp_graph_find_tensor(g, "x"), a);
    cr_assert_eq(cp_graph_find_tensor(g, "nope"), -1);
    cp_graph_free(g);
}
