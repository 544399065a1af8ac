/* Kernel harness cases of the reduce_index family's fast kernels, included
 * by test_kernel_harness.c: the builders here, the table rows through
 * REDUCE_INDEX_CASES. */
#ifndef CP_TESTS_HARNESS_REDUCE_INDEX_H
#define CP_TESTS_HARNESS_REDUCE_INDEX_H

static void c_ri_log_softmax(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 7, 100));
    N(g, "LogSoftmax", I("x"), I("y"));
}
static void c_ri_log_softmax_old(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 4, 5));
    N(g, "LogSoftmax", I("x"), I("y"));
}
static void c_ri_argmax(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 9, 67));
    int32_t n = N(g, "ArgMax", I("x"), I("y"));
    cp_node_set_int(g, n, "axis", -1);
}
static void c_ri_argmin_last(struct cp_graph *g)
{
    X(g, "x", 2, D(33, 40));
    int32_t n = N(g, "ArgMin", I("x"), I("y"));
    cp_node_set_int(g, n, "axis", 1);
    cp_node_set_int(g, n, "keepdims", 0);
    cp_node_set_int(g, n, "select_last_index", 1);
}
#define RI_RED(fn, op)                                                                             \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "x", 3, D(5, 6, 70));                                                                 \
        int32_t n = N(g, op, I("x"), I("y"));                                                      \
        INTS(g, n, "axes", -1);                                                                    \
    }
RI_RED(c_ri_rmin, "ReduceMin")
RI_RED(c_ri_rl1, "ReduceL1")
RI_RED(c_ri_rl2, "ReduceL2")
RI_RED(c_ri_rlse, "ReduceLogSumExp")
RI_RED(c_ri_rss, "ReduceSumSquare")
static void c_ri_rprod(struct cp_graph *g)
{
    X(g, "x", 3, D(4, 3, 8));
    int32_t n = N(g, "ReduceProd", I("x"), I("y"));
    INTS(g, n, "axes", 1, 2);
    cp_node_set_int(g, n, "keepdims", 0);
}
static void c_ri_rlogsum(struct cp_graph *g)
{
    X(g, "x", 2, D(16, 50));
    int32_t n = N(g, "ReduceLogSum", I("x"), I("y"));
    INTS(g, n, "axes", 1);
}
static void c_ri_cumsum_inner(struct cp_graph *g)
{
    X(g, "x", 3, D(3, 20, 33));
    gb_scalar(g, "ax", 1);
    N(g, "CumSum", I("x", "ax"), I("y"));
}
static void c_ri_cumsum_last_rev_excl(struct cp_graph *g)
{
    X(g, "x", 2, D(8, 50));
    gb_scalar(g, "ax", -1);
    int32_t n = N(g, "CumSum", I("x", "ax"), I("y"));
    cp_node_set_int(g, n, "exclusive", 1);
    cp_node_set_int(g, n, "reverse", 1);
}

#define RI_EINSUM(fn, eq, ra, da, rb, db)                                                          \
    static void fn(struct cp_graph *g)                                                             \
    {                                                                                              \
        X(g, "a", ra, da);                                                                         \
        X(g, "b", rb, db);                                                                         \
        int32_t n = N(g, "Einsum", I("a", "b"), I("y"));                                           \
        cp_node_set_string(g, n, "equation", eq);                                                  \
    }
RI_EINSUM(c_ri_einsum_scores, "bhid,bhjd->bhij", 4, D(2, 3, 5, 8), 4, D(2, 3, 7, 8))
RI_EINSUM(c_ri_einsum_bmm, "bij,bjk->bik", 3, D(2, 5, 6), 3, D(2, 6, 4))
RI_EINSUM(c_ri_einsum_pv_heads, "bhij,bhjd->bihd", 4, D(2, 3, 5, 7), 4, D(2, 3, 7, 4))
RI_EINSUM(c_ri_einsum_trans_a, "ki,kj->ij", 2, D(6, 5), 2, D(6, 3))
RI_EINSUM(c_ri_einsum_seq_first, "ibh,jbh->bij", 3, D(5, 2, 4), 3, D(6, 2, 4))
RI_EINSUM(c_ri_einsum_implicit, "ij,jk", 2, D(5, 6), 2, D(6, 3))

static void c_ri_topk(struct cp_graph *g)
{
    X(g, "x", 2, D(6, 300));
    gb_ints(g, "k", 1, (const int64_t[]){5});
    N(g, "TopK", I("x", "k"), I("v", "i"));
}
static void c_ri_topk_smallest(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 3, 40));
    gb_ints(g, "k", 1, (const int64_t[]){40});
    int32_t n = N(g, "TopK", I("x", "k"), I("v", "i"));
    cp_node_set_int(g, n, "largest", 0);
}
/* k above the sorted buffer's 256: the heap, in both directions, up to k
 * equal to the row. */
static void c_ri_topk_heap(struct cp_graph *g)
{
    X(g, "x", 2, D(3, 5000));
    gb_ints(g, "k", 1, (const int64_t[]){700});
    N(g, "TopK", I("x", "k"), I("v", "i"));
}
static void c_ri_topk_heap_smallest(struct cp_graph *g)
{
    X(g, "x", 2, D(2, 3000));
    gb_ints(g, "k", 1, (const int64_t[]){3000});
    int32_t n = N(g, "TopK", I("x", "k"), I("v", "i"));
    cp_node_set_int(g, n, "largest", 0);
}
static void c_ri_gather_el(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 4, 10));
    int64_t iv[2 * 3 * 6];
    for (int i = 0; i < 36; i++)
        iv[i] = (i * 7) % 20 - 10;
    gb_init(g, "ix", CP_DTYPE_I64, 3, D(2, 3, 6), iv);
    int32_t n = N(g, "GatherElements", I("x", "ix"), I("y"));
    cp_node_set_int(g, n, "axis", -1);
}
static void c_ri_tile(struct cp_graph *g)
{
    X(g, "x", 3, D(2, 3, 5));
    gb_ints(g, "r", 3, (const int64_t[]){2, 1, 3});
    N(g, "Tile", I("x", "r"), I("y"));
}

#define REDUCE_INDEX_CASES                                                                         \
    C(c_ri_log_softmax), CO(c_ri_log_softmax_old, 11), CM(c_ri_argmax, IN_WIDE),                   \
        CM(c_ri_argmin_last, IN_WIDE), C(c_ri_rmin), C(c_ri_rl1), C(c_ri_rl2), C(c_ri_rlse),       \
        C(c_ri_rss), C(c_ri_rprod), CM(c_ri_rlogsum, IN_POSITIVE), C(c_ri_cumsum_inner),           \
        C(c_ri_cumsum_last_rev_excl), C(c_ri_einsum_scores), C(c_ri_einsum_bmm),                   \
        C(c_ri_einsum_pv_heads), C(c_ri_einsum_trans_a), C(c_ri_einsum_seq_first),                 \
        C(c_ri_einsum_implicit), C(c_ri_topk), C(c_ri_topk_smallest), C(c_ri_topk_heap),           \
        C(c_ri_topk_heap_smallest), C(c_ri_gather_el), C(c_ri_tile)
#endif
