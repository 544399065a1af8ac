/* The memory planner: liveness over hand-built graphs, reuse versus no
 * reuse, views sharing storage, outputs kept intact, and placement
 * invariants on many random lifetimes. No kernel runs here. */
#include "runner/cpu/kernel.h"
#include "runner/cpu/memplan.h"

#include "graph/graph_build.h"

#include <criterion/criterion.h>
#include <stdlib.h>

/* ---- helpers ------------------------------------------------------------- */

static bool lifetimes_overlap(const struct cp_mem_block *a, const struct cp_mem_block *b)
{
    return a->first <= b->last && b->first <= a->last;
}

static uint64_t aligned(uint64_t x)
{
    return (x + CP_MEM_ALIGN - 1) / CP_MEM_ALIGN * CP_MEM_ALIGN;
}

/* Blocks live at the same time never share a byte; every block is
 * aligned and inside the arena. */
static void assert_valid_placement(const struct cp_mem_block *b, size_t n, uint64_t arena)
{
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(b[i].offset % CP_MEM_ALIGN, 0, "block %zu at %llu is not aligned", i,
                     (unsigned long long)b[i].offset);
        cr_assert_leq(b[i].offset + b[i].size, arena, "block %zu ends past the arena", i);
        for (size_t j = 0; j < i; j++) {
            if (!b[i].size || !b[j].size || !lifetimes_overlap(&b[i], &b[j]))
                continue;
            bool disjoint =
                b[i].offset + b[i].size <= b[j].offset || b[j].offset + b[j].size <= b[i].offset;
            cr_assert(disjoint,
                      "blocks %zu [%llu,+%llu) steps %d..%d and %zu [%llu,+%llu) steps %d..%d "
                      "overlap",
                      i, (unsigned long long)b[i].offset, (unsigned long long)b[i].size, b[i].first,
                      b[i].last, j, (unsigned long long)b[j].offset, (unsigned long long)b[j].size,
                      b[j].first, b[j].last);
        }
    }
}

/* Plan `g` (inferred first) with `mode`. */
static void plan(struct cp_graph *g, enum cp_buffer_opt mode, struct cp_memplan *mp)
{
    gb_infer_ok(g);
    int32_t *order;
    size_t n;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_topo_order(g, &order, &n, &d), CP_OK, "%s", d.msg);
    bool *is_view = calloc(n + 1, sizeof *is_view);
    cr_assert_not_null(is_view);
    for (size_t k = 0; k < n; k++)
        is_view[k] = cp_op_is_view(cp_graph_node(g, order[k])->op);
    cr_assert_eq(cp_memplan_build(g, order, is_view, n, mode, mp, &d), CP_OK, "%s", d.msg);
    assert_valid_placement(mp->blocks, mp->n_blocks, mp->arena_bytes);
    cr_assert_leq(mp->peak_bytes, mp->arena_bytes);
    free(order);
    free(is_view);
}

static const struct cp_mem_block *block_of(struct cp_graph *g, const struct cp_memplan *mp,
                                           const char *name)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0);
    cr_assert_geq(mp->block[t], 0, "'%s' has no buffer", name);
    return &mp->blocks[mp->block[t]];
}

/* x -> Relu -> a -> Relu -> b -> Relu -> c -> Relu -> y, each 1x1024 f32. */
static struct cp_graph *chain(void)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(1, 1024));
    gb_node(g, "n1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "n2", "Relu", GB_IN("a"), GB_IN("b"));
    gb_node(g, "n3", "Relu", GB_IN("b"), GB_IN("c"));
    gb_node(g, "n4", "Relu", GB_IN("c"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    return g;
}

/* ---- placement on the graph ------------------------------------------------ */

Test(memplan, test_chain_reuses_buffers_with_l2_optimize)
{
    struct cp_graph *g = chain();
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    cr_assert_eq(mp.n_blocks, 5); /* x, a, b, c, y */
    cr_assert_eq(mp.n_steps, 4);
    /* x lives throughout; of a, b, c, y at most two at once. */
    cr_assert_eq(mp.arena_bytes, 3 * 4096);
    cr_assert_lt(mp.arena_bytes, 5 * 4096);
    cr_assert_eq(mp.peak_bytes, 3 * 4096);
    cr_assert_eq(mp.weight_bytes, 0);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_chain_without_reuse_gives_every_buffer_its_own_bytes)
{
    struct cp_graph *g = chain();
    struct cp_memplan mp;
    plan(g, CP_BUF_OFF_OPTIMIZE, &mp);
    cr_assert_eq(mp.arena_bytes, 5 * 4096);
    cr_assert_eq(mp.peak_bytes, 3 * 4096, "peak does not depend on placement");
    for (size_t i = 0; i < mp.n_blocks; i++)
        for (size_t j = 0; j < i; j++)
            cr_assert_neq(mp.blocks[i].offset, mp.blocks[j].offset);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_l1_optimize_reuses_like_l2)
{
    struct cp_graph *g = chain();
    struct cp_memplan mp;
    plan(g, CP_BUF_L1_OPTIMIZE, &mp);
    cr_assert_eq(mp.arena_bytes, 3 * 4096);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_sizes_are_rounded_to_the_alignment)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(10)); /* 40 bytes */
    gb_node(g, "n1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "n2", "Relu", GB_IN("a"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_memplan mp;
    plan(g, CP_BUF_OFF_OPTIMIZE, &mp);
    cr_assert_eq(mp.arena_bytes, 3 * aligned(40));
    for (size_t i = 0; i < mp.n_blocks; i++)
        cr_assert_eq(mp.blocks[i].size, 40);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_graph_inputs_live_for_the_whole_run)
{
    struct cp_graph *g = chain();
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    const struct cp_mem_block *x = block_of(g, &mp, "x");
    cr_assert_eq(x->first, 0);
    cr_assert_eq(x->last, mp.n_steps, "an input must survive to be run again");
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_views_alias_their_input_without_memory)
{
    /* x -> Relu -> a -> Reshape -> v -> Flatten -> f -> Relu -> y */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(4, 256));
    gb_ints(g, "shape", 3, GB_DIMS(2, 2, 256));
    gb_node(g, "n1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "r", "Reshape", GB_IN("a", "shape"), GB_IN("v"));
    gb_node(g, "f", "Flatten", GB_IN("v"), GB_IN("fl"));
    gb_node(g, "n2", "Relu", GB_IN("fl"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    cr_assert_eq(mp.n_blocks, 3, "x, a, y: the views add nothing");
    cr_assert_eq(mp.n_steps, 2);
    int32_t a = cp_graph_find_tensor(g, "a"), v = cp_graph_find_tensor(g, "v"),
            fl = cp_graph_find_tensor(g, "fl");
    cr_assert_eq(mp.root[v], a);
    cr_assert_eq(mp.root[fl], a, "alias chains resolve to the root");
    cr_assert_eq(mp.block[fl], mp.block[a]);
    cr_assert_eq(mp.arena_bytes, 3 * 4096);
    cr_assert_eq(mp.weight_bytes, 3 * 8, "the Reshape's shape is read");
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_a_view_extends_its_roots_lifetime)
{
    /* a is viewed as v, and v is read last: a must live until then. */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(1, 1024));
    gb_ints(g, "shape", 2, GB_DIMS(1, 1024));
    gb_node(g, "n1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "r", "Reshape", GB_IN("a", "shape"), GB_IN("v"));
    gb_node(g, "n2", "Relu", GB_IN("a"), GB_IN("b"));
    gb_node(g, "n3", "Relu", GB_IN("b"), GB_IN("c"));
    gb_node(g, "n4", "Add", GB_IN("v", "c"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    const struct cp_mem_block *a = block_of(g, &mp, "a");
    cr_assert_eq(a->first, 0);
    cr_assert_eq(a->last, 3, "read through the view by n4 at step 3");
    cr_assert_eq(block_of(g, &mp, "v"), a);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_a_graph_output_is_never_overwritten)
{
    /* a is an output but also feeds a chain: nothing later may reuse it. */
    struct cp_graph *g = chain();
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "a")), CP_OK);
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    const struct cp_mem_block *a = block_of(g, &mp, "a");
    cr_assert_eq(a->last, mp.n_steps);
    for (size_t i = 0; i < mp.n_blocks; i++) {
        const struct cp_mem_block *b = &mp.blocks[i];
        if (b == a || b->first < a->first)
            continue;
        bool disjoint = b->offset + b->size <= a->offset || a->offset + a->size <= b->offset;
        cr_assert(disjoint, "block of '%s' overwrites output 'a'",
                  cp_graph_tensor(g, b->tensor)->name);
    }
    cr_assert_eq(mp.arena_bytes, 4 * 4096);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_a_view_of_an_output_keeps_it_alive)
{
    /* y = Reshape(a) is the output: a's block must last to the end. */
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(1, 1024));
    gb_ints(g, "shape", 1, GB_DIMS(1024));
    gb_node(g, "n1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "r", "Reshape", GB_IN("a", "shape"), GB_IN("y"));
    gb_node(g, "n2", "Relu", GB_IN("a"), GB_IN("b"));
    gb_node(g, "n3", "Relu", GB_IN("b"), GB_IN("z"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "z")), CP_OK);
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    cr_assert_eq(block_of(g, &mp, "a")->last, mp.n_steps);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_outputs_that_are_inputs_or_weights_need_no_buffer)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_floats(g, "w", 4, (const float[]){1, 2, 3, 4});
    gb_node(g, "id", "Identity", GB_IN("x"), GB_IN("y"));
    gb_node(g, "add", "Add", GB_IN("x", "w"), GB_IN("z"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "w")), CP_OK);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "z")), CP_OK);
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "z")), CP_OK);
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    cr_assert_eq(mp.n_blocks, 2, "x and z");
    int32_t w = cp_graph_find_tensor(g, "w");
    cr_assert_eq(mp.root[w], w);
    cr_assert_eq(mp.block[w], -1);
    cr_assert_eq(mp.root[cp_graph_find_tensor(g, "y")], cp_graph_find_tensor(g, "x"));
    cr_assert_eq(mp.weight_bytes, 16);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_a_weight_read_twice_counts_once)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_floats(g, "w", 4, (const float[]){1, 2, 3, 4});
    gb_node(g, "a1", "Add", GB_IN("x", "w"), GB_IN("a"));
    gb_node(g, "a2", "Mul", GB_IN("a", "w"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    cr_assert_eq(mp.weight_bytes, 16);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_a_view_that_changes_size_is_refused)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "id", "Identity", GB_IN("x"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    /* Corrupt what inference found, as a broken .om might. */
    int64_t dims[] = {8};
    cp_shape_set(&cp_graph_tensor(g, cp_graph_find_tensor(g, "y"))->shape, 1, dims);
    int32_t order[] = {0};
    bool is_view[] = {true};
    struct cp_memplan mp;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_memplan_build(g, order, is_view, 1, CP_BUF_L2_OPTIMIZE, &mp, &d),
                 CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "'id'") && strstr(d.msg, "'y'"), "%s", d.msg);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

/* x [4] -> Relu -> y, then y's shape corrupted to `dims` (as a broken .om
 * might carry it) and planned: the planner must refuse, not plan 0 bytes
 * for a size that wrapped. */
static void expect_refused(int rank, const int64_t *dims, const char *want)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(4));
    gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    cp_shape_set(&cp_graph_tensor(g, cp_graph_find_tensor(g, "y"))->shape, rank, dims);
    int32_t order[] = {0};
    bool is_view[] = {false};
    struct cp_memplan mp;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_memplan_build(g, order, is_view, 1, CP_BUF_L2_OPTIMIZE, &mp, &d),
                 CP_ERR_INVALID, "planned %llu bytes", (unsigned long long)mp.arena_bytes);
    cr_assert(strstr(d.msg, "'y'") && strstr(d.msg, want), "%s", d.msg);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_a_tensor_whose_byte_size_wraps_is_refused)
{
    /* 2^62 f32 elements: 2^64 bytes, 0 in 64 bits. */
    expect_refused(2, GB_DIMS((int64_t)1 << 31, (int64_t)1 << 31), "node 'relu'");
}

Test(memplan, test_tensors_whose_sizes_sum_past_64_bits_are_refused)
{
    /* Five buffers of 2^62 bytes each fit one by one; without reuse their
     * offsets add up to 5 * 2^62, which wrapped in 64 bits. */
    struct cp_graph *g = gb_graph(17);
    int64_t big = (int64_t)1 << 60; /* f32 */
    gb_input(g, "x", CP_DTYPE_F32, 1, &big);
    gb_node(g, "r1", "Relu", GB_IN("x"), GB_IN("a"));
    gb_node(g, "r2", "Relu", GB_IN("a"), GB_IN("b"));
    gb_node(g, "r3", "Relu", GB_IN("b"), GB_IN("c"));
    gb_node(g, "r4", "Relu", GB_IN("c"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    gb_infer_ok(g);
    int32_t order[] = {0, 1, 2, 3};
    bool is_view[] = {false, false, false, false};
    struct cp_memplan mp;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_memplan_build(g, order, is_view, 4, CP_BUF_OFF_OPTIMIZE, &mp, &d),
                 CP_ERR_INVALID, "planned %llu bytes", (unsigned long long)mp.arena_bytes);
    cr_assert(strstr(d.msg, "64-bit"), "%s", d.msg);
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

/* ---- placement alone ---------------------------------------------------------- */

Test(memplan, test_placement_is_valid_on_random_lifetimes)
{
    uint64_t seed = 12345;
    for (int round = 0; round < 50; round++) {
        size_t n = 1 + (size_t)(round * 7 % 90);
        int32_t steps = 1 + round % 40;
        struct cp_mem_block *b = calloc(n, sizeof *b);
        cr_assert_not_null(b);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i].size = (seed >> 33) % 5000;
            b[i].first = (int32_t)((seed >> 20) % (uint64_t)(steps + 1));
            b[i].last = b[i].first + (int32_t)((seed >> 8) % 6);
            if (b[i].last > steps)
                b[i].last = steps;
            b[i].tensor = (int32_t)i;
            sum += aligned(b[i].size);
        }
        uint64_t arena, peak;
        cr_assert_eq(cp_memplan_place(b, n, steps, true, &arena, &peak), CP_OK);
        assert_valid_placement(b, n, arena);
        cr_assert_leq(peak, arena);
        cr_assert_leq(arena, sum);
        uint64_t arena_off, peak_off;
        cr_assert_eq(cp_memplan_place(b, n, steps, false, &arena_off, &peak_off), CP_OK);
        assert_valid_placement(b, n, arena_off);
        cr_assert_eq(arena_off, sum);
        cr_assert_eq(peak_off, peak);
        free(b);
    }
}

Test(memplan, test_placement_fills_the_lowest_gap)
{
    /* A (0..1) and C (0..1) sit side by side; B (2..3) fits at 0 again. */
    struct cp_mem_block b[] = {
        {.size = 128, .first = 0, .last = 1},
        {.size = 128, .first = 2, .last = 3},
        {.size = 64, .first = 0, .last = 1},
    };
    uint64_t arena, peak;
    cr_assert_eq(cp_memplan_place(b, 3, 3, true, &arena, &peak), CP_OK);
    cr_assert_eq(b[0].offset, 0);
    cr_assert_eq(b[1].offset, 0);
    cr_assert_eq(b[2].offset, 128);
    cr_assert_eq(arena, 192);
    cr_assert_eq(peak, 192);
}

Test(memplan, test_zero_size_blocks_take_no_room)
{
    struct cp_mem_block b[] = {
        {.size = 0, .first = 0, .last = 2},
        {.size = 64, .first = 0, .last = 2},
    };
    uint64_t arena, peak;
    cr_assert_eq(cp_memplan_place(b, 2, 2, true, &arena, &peak), CP_OK);
    cr_assert_eq(arena, 64);
    cr_assert_eq(peak, 64);
}

/* ---- FusedConv over its residual ------------------------------------------- */

/* x -> Relu -> r; FusedConv(x, w, -, r) -> y; then Relu(y) -> z, and with
 * `r_later`, Add(z, r) -> o: r is read again after the conv. */
static struct cp_graph *residual_graph(bool r_later, bool r_output)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 8, 6, 6));
    float w[8 * 8];
    for (int i = 0; i < 64; i++)
        w[i] = (float)(i % 7) * 0.1f;
    gb_init(g, "w", CP_DTYPE_F32, 4, GB_DIMS(8, 8, 1, 1), w);
    gb_node(g, "pre", "Relu", GB_IN("x"), GB_IN("r"));
    gb_node_in(g, "conv", "FusedConv", CP_DOMAIN, GB_IN("x", "w", "", "r"), GB_IN("y"));
    gb_node(g, "post", "Relu", GB_IN("y"), GB_IN("z"));
    if (r_later) {
        gb_node(g, "add", "Add", GB_IN("z", "r"), GB_IN("o"));
        cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "o")), CP_OK);
    } else {
        cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "z")), CP_OK);
    }
    if (r_output)
        cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "r")), CP_OK);
    return g;
}

Test(memplan, test_a_fused_conv_writes_over_a_residual_nothing_reads_later)
{
    struct cp_graph *g = residual_graph(false, false);
    struct cp_memplan mp;
    plan(g, CP_BUF_L2_OPTIMIZE, &mp);
    const struct cp_mem_block *r = block_of(g, &mp, "r"), *y = block_of(g, &mp, "y");
    cr_assert_eq(r, y, "y shares r's buffer");
    cr_assert_eq(r->last, 2, "the shared buffer lives until y's reader");
    cp_memplan_release(&mp);
    /* without reuse, every tensor keeps its own bytes */
    plan(g, CP_BUF_OFF_OPTIMIZE, &mp);
    cr_assert_neq(block_of(g, &mp, "r"), block_of(g, &mp, "y"));
    cp_memplan_release(&mp);
    cp_graph_free(g);
}

Test(memplan, test_a_residual_read_later_or_returned_keeps_its_own_buffer)
{
    for (int v = 0; v < 2; v++) {
        struct cp_graph *g = residual_graph(v == 0, v == 1);
        struct cp_memplan mp;
        plan(g, CP_BUF_L2_OPTIMIZE, &mp);
        const struct cp_mem_block *r = block_of(g, &mp, "r"), *y = block_of(g, &mp, "y");
        cr_assert_neq(r, y, "variant %d: r is %s", v, v == 0 ? "read by Add" : "a graph output");
        cr_assert(r->offset + r->size <= y->offset || y->offset + y->size <= r->offset,
                  "variant %d: r and y overlap", v);
        cp_memplan_release(&mp);
        cp_graph_free(g);
    }
}
