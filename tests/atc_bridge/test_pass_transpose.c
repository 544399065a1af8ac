/* TransposeOptimizationPass (atc_bridge/passes/cleanup_transpose.c):
 * inverse pairs cancel, consecutive Transposes merge, identity perms go,
 * a last-two-dims Transpose folds into MatMul as FusedMatMul transA/transB,
 * and attention MatMuls are left for the attention fusion. Every rewrite
 * computes the same on the reference kernels. */
#include "pass_test.h"

static void out(struct cp_graph *g, const char *name)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0);
    cr_assert_eq(cp_graph_add_output(g, t), CP_OK);
}

static int32_t transpose(struct cp_graph *g, const char *name, const char *in, const char *outn,
                         const int64_t *perm, size_t n)
{
    int32_t i = gb_node(g, name, "Transpose", (const char *const[]){in, NULL},
                        (const char *const[]){outn, NULL});
    cr_assert_eq(cp_node_set_ints(g, i, "perm", perm, n), CP_OK);
    return i;
}

/* ---- pairs --------------------------------------------------------------------------------- */

/* x [2,3,4,5] -> T(0,2,3,1) -> T(0,3,1,2) -> Relu -> y: the pair cancels. */
static struct cp_graph *build_inverse_pair(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(2, 3, 4, 5));
    transpose(g, "to_nhwc", "x", "a", GB_DIMS(0, 2, 3, 1), 4);
    transpose(g, "to_nchw", "a", "b", GB_DIMS(0, 3, 1, 2), 4);
    gb_node(g, "relu", "Relu", GB_IN("b"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_cancelled(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_TRANSPOSE), 0);
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    cr_assert_str_eq(cp_graph_tensor(g, pt_node(g, "relu")->inputs[0])->name, "x");
}

Test(pass_transpose, inverse_transposes_cancel)
{
    pt_check_pass(build_inverse_pair, "TransposeOptimizationPass", true, check_cancelled, 0);
}

/* x -> T(1,0,2) -> T(0,2,1) -> T(2,1,0) -> y (graph output): one Transpose
 * with the composed perm is left, still producing y. */
static struct cp_graph *build_chain(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(2, 3, 4));
    transpose(g, "t1", "x", "a", GB_DIMS(1, 0, 2), 3);
    transpose(g, "t2", "a", "b", GB_DIMS(0, 2, 1), 3);
    transpose(g, "t3", "b", "y", GB_DIMS(2, 1, 0), 3);
    out(g, "y");
    return g;
}

static void check_merged(struct cp_graph *g)
{
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    const struct cp_node *t = pt_producer(g, "y");
    cr_assert_not_null(t);
    cr_assert_eq(t->op, CP_OP_TRANSPOSE);
    cr_assert_str_eq(cp_graph_tensor(g, t->inputs[0])->name, "x");
    /* p1 = (1,0,2), p2 = (0,2,1): p12 = (1,2,0); then p3 = (2,1,0): (0,2,1). */
    const struct cp_attr *p = cp_node_attr(t, "perm");
    cr_assert_not_null(p);
    cr_assert_eq(p->n, 3);
    cr_assert_eq(p->ints[0], 0);
    cr_assert_eq(p->ints[1], 2);
    cr_assert_eq(p->ints[2], 1);
    cr_assert(pt_has_origin(t, "t1") && pt_has_origin(t, "t2") && pt_has_origin(t, "t3"));
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 4, 3));
}

Test(pass_transpose, consecutive_transposes_merge_into_one)
{
    pt_check_pass(build_chain, "TransposeOptimizationPass", true, check_merged, 0);
}

/* A pair whose first half is also read elsewhere: the second reads x
 * directly, the first stays for its other reader. */
static struct cp_graph *build_shared_pair(void)
{
    struct cp_graph *g = build_inverse_pair();
    gb_node(g, "side", "Exp", GB_IN("a"), GB_IN("z"));
    out(g, "z");
    return g;
}

static void check_shared(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_TRANSPOSE), 1);
    cr_assert_not_null(pt_node(g, "to_nhwc"));
    cr_assert_str_eq(cp_graph_tensor(g, pt_node(g, "relu")->inputs[0])->name, "x");
}

Test(pass_transpose, a_pair_whose_first_half_is_shared_still_cancels)
{
    pt_check_pass(build_shared_pair, "TransposeOptimizationPass", true, check_shared, 0);
}

/* An inverse pair producing a graph output directly from a graph input:
 * an Identity keeps the output name. */
static struct cp_graph *build_pair_to_output(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(3, 4));
    transpose(g, "t1", "x", "a", GB_DIMS(1, 0), 2);
    transpose(g, "t2", "a", "y", GB_DIMS(1, 0), 2);
    out(g, "y");
    return g;
}

static void check_pair_to_output(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_TRANSPOSE), 0);
    const struct cp_node *n = pt_producer(g, "y");
    cr_assert_not_null(n);
    cr_assert_eq(n->op, CP_OP_IDENTITY);
}

Test(pass_transpose, a_cancelled_pair_at_a_graph_output_keeps_the_output)
{
    pt_check_pass(build_pair_to_output, "TransposeOptimizationPass", true, check_pair_to_output, 0);
}

/* ---- MatMul ---------------------------------------------------------------------------------- */

/* y = MatMul(Transpose(a [2,5,3], 0,2,1), Transpose(b [2,4,5], 0,2,1)) */
static struct cp_graph *build_matmul(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "a", CP_DTYPE_F32, 3, GB_DIMS(2, 5, 3));
    gb_input(g, "b", CP_DTYPE_F32, 3, GB_DIMS(2, 4, 5));
    transpose(g, "ta", "a", "at", GB_DIMS(0, 2, 1), 3);
    transpose(g, "tb", "b", "bt", GB_DIMS(0, 2, 1), 3);
    gb_node(g, "matmul", "MatMul", GB_IN("at", "bt"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_fused_matmul(struct cp_graph *g)
{
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    const struct cp_node *m = pt_producer(g, "y");
    cr_assert_not_null(m);
    cr_assert_eq(m->op, CP_OP_FUSED_MATMUL);
    cr_assert_str_eq(m->domain, CP_DOMAIN);
    cr_assert_eq(cp_node_attr_int(m, "transA", 0), 1);
    cr_assert_eq(cp_node_attr_int(m, "transB", 0), 1);
    cr_assert_str_eq(cp_graph_tensor(g, m->inputs[0])->name, "a");
    cr_assert_str_eq(cp_graph_tensor(g, m->inputs[1])->name, "b");
    cr_assert(pt_has_origin(m, "matmul") && pt_has_origin(m, "ta") && pt_has_origin(m, "tb"));
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 3, 4));
}

Test(pass_transpose, last_two_dims_transposes_fold_into_fused_matmul)
{
    pt_check_pass(build_matmul, "TransposeOptimizationPass", true, check_fused_matmul, 1e-6);
}

/* A Transpose that moves a batch dimension cannot be a trans flag. */
static struct cp_graph *build_matmul_batch_perm(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "a", CP_DTYPE_F32, 3, GB_DIMS(3, 2, 4));
    gb_input(g, "b", CP_DTYPE_F32, 3, GB_DIMS(2, 4, 5));
    transpose(g, "ta", "a", "at", GB_DIMS(1, 0, 2), 3);
    gb_node(g, "matmul", "MatMul", GB_IN("at", "b"), GB_IN("y"));
    out(g, "y");
    return g;
}

Test(pass_transpose, a_transpose_of_batch_dimensions_is_not_folded)
{
    pt_check_pass(build_matmul_batch_perm, "TransposeOptimizationPass", false, NULL, 0);
}

/* Scores = MatMul(q, Transpose(k)) -> Mul(scale) -> Softmax: attention,
 * left for FlashAttentionFusionPass. */
static struct cp_graph *build_attention(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "q", CP_DTYPE_F32, 3, GB_DIMS(2, 6, 4));
    gb_input(g, "k", CP_DTYPE_F32, 3, GB_DIMS(2, 6, 4));
    gb_input(g, "v", CP_DTYPE_F32, 3, GB_DIMS(2, 6, 4));
    gb_floats(g, "scale", 1, (const float[]){0.5f});
    transpose(g, "tk", "k", "kt", GB_DIMS(0, 2, 1), 3);
    gb_node(g, "qk", "MatMul", GB_IN("q", "kt"), GB_IN("s"));
    gb_node(g, "mul", "Mul", GB_IN("s", "scale"), GB_IN("ss"));
    gb_node(g, "softmax", "Softmax", GB_IN("ss"), GB_IN("p"));
    gb_node(g, "pv", "MatMul", GB_IN("p", "v"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_attention(struct cp_graph *g)
{
    cr_assert_eq(pt_count_op(g, CP_OP_FUSED_MATMUL), 0);
    cr_assert_not_null(pt_node(g, "tk"));
}

Test(pass_transpose, attention_matmuls_are_left_for_the_attention_fusion)
{
    pt_check_pass(build_attention, "TransposeOptimizationPass", false, check_attention, 0);
}
