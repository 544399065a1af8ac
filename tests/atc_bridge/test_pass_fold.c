/* ConstantFoldingPass (atc_bridge/passes/cleanup_fold.c, cleanup_eval.c):
 * the Shape/Gather/Unsqueeze/Concat chains PyTorch exports and constant
 * float subgraphs become initializers, the evaluator computes what the
 * runtime's reference kernels compute, and what must stay stays (graph
 * outputs, outputs that would bloat the model). */
#include "pass_test.h"

static void out(struct cp_graph *g, const char *name)
{
    int32_t t = cp_graph_find_tensor(g, name);
    cr_assert_geq(t, 0);
    cr_assert_eq(cp_graph_add_output(g, t), CP_OK);
}

static int32_t set_int(struct cp_graph *g, int32_t node, const char *name, int64_t v)
{
    cr_assert_eq(cp_node_set_int(g, node, name, v), CP_OK);
    return node;
}

/* ---- shape chains ------------------------------------------------------------------ */

/* y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])): x [2,3,4] -> [2,12]. */
static struct cp_graph *build_shape_chain(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(2, 3, 4));
    gb_scalar(g, "zero", 0);
    gb_ints(g, "axes0", 1, GB_DIMS(0));
    gb_ints(g, "minus1", 1, GB_DIMS(-1));
    gb_node(g, "shape", "Shape", GB_IN("x"), GB_IN("s"));
    gb_node(g, "gather", "Gather", GB_IN("s", "zero"), GB_IN("b"));
    gb_node(g, "unsqueeze", "Unsqueeze", GB_IN("b", "axes0"), GB_IN("b1"));
    set_int(g, gb_node(g, "concat", "Concat", GB_IN("b1", "minus1"), GB_IN("target")), "axis", 0);
    gb_node(g, "reshape", "Reshape", GB_IN("x", "target"), GB_IN("y"));
    out(g, "y");
    return g;
}

/* The target is [2, -1] at the converted batch and [4, -1] at twice it:
 * folded as [0, -1], which copies the batch from the Reshape's input. The
 * Shape/Gather/Unsqueeze feeding it then reach no output. */
static void check_shape_chain(struct cp_graph *g)
{
    const struct cp_node *r = pt_node(g, "reshape");
    cr_assert_not_null(r);
    const struct cp_tensor *t = gb_get(g, "target");
    cr_assert_eq(t->kind, CP_TENSOR_INITIALIZER);
    cr_assert_eq(t->dtype, CP_DTYPE_I64);
    cr_assert_eq(t->nbytes, 2 * sizeof(int64_t));
    const int64_t *v = t->data;
    cr_assert_eq(v[0], 0, "the batch entry must stay free, got %lld", (long long)v[0]);
    cr_assert_eq(v[1], -1);
    cr_assert_null(pt_node(g, "concat"));
    cr_assert(pt_run_pass(g, "DeadNodeEliminationPass"));
    cr_assert_eq(cp_graph_n_live_nodes(g), 1, "only the Reshape should be left");
    gb_assert_shape(g, "y", 2, GB_DIMS(2, 12));
}

Test(pass_fold, shape_gather_unsqueeze_concat_chain_becomes_an_initializer)
{
    pt_check_pass(build_shape_chain, "ConstantFoldingPass", true, check_shape_chain, 0);
}

/* x.view(x.size(0), x.size(1), -1): the channel count folds outright, the
 * batch entry becomes 0. */
static struct cp_graph *build_view_chain(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(2, 3, 4, 5));
    gb_scalar(g, "zero", 0);
    gb_scalar(g, "one", 1);
    gb_ints(g, "axes0", 1, GB_DIMS(0));
    gb_ints(g, "minus1", 1, GB_DIMS(-1));
    gb_node(g, "shape", "Shape", GB_IN("x"), GB_IN("s"));
    gb_node(g, "g0", "Gather", GB_IN("s", "zero"), GB_IN("b"));
    gb_node(g, "g1", "Gather", GB_IN("s", "one"), GB_IN("c"));
    gb_node(g, "u0", "Unsqueeze", GB_IN("b", "axes0"), GB_IN("b1"));
    gb_node(g, "u1", "Unsqueeze", GB_IN("c", "axes0"), GB_IN("c1"));
    set_int(g, gb_node(g, "concat", "Concat", GB_IN("b1", "c1", "minus1"), GB_IN("target")), "axis",
            0);
    gb_node(g, "reshape", "Reshape", GB_IN("x", "target"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_view_chain(struct cp_graph *g)
{
    const struct cp_tensor *c1 = gb_get(g, "c1");
    cr_assert_eq(c1->kind, CP_TENSOR_INITIALIZER, "the channel count does not follow the batch");
    const int64_t *v = gb_get(g, "target")->data;
    cr_assert_not_null(v);
    cr_assert_eq(v[0], 0);
    cr_assert_eq(v[1], 3);
    cr_assert_eq(v[2], -1);
    cr_assert(pt_run_pass(g, "DeadNodeEliminationPass"));
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    gb_assert_shape(g, "y", 3, GB_DIMS(2, 3, 20));
}

Test(pass_fold, view_by_size_keeps_the_batch_free_and_folds_the_rest)
{
    pt_check_pass(build_view_chain, "ConstantFoldingPass", true, check_view_chain, 0);
}

/* y = x + float(x.shape[0]): a value that follows the batch and is not a
 * Reshape target stays computed. */
Test(pass_fold, a_value_that_follows_the_batch_is_not_baked_in)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(2, 3));
    gb_scalar(g, "zero", 0);
    gb_node(g, "shape", "Shape", GB_IN("x"), GB_IN("s"));
    gb_node(g, "gather", "Gather", GB_IN("s", "zero"), GB_IN("b"));
    set_int(g, gb_node(g, "cast", "Cast", GB_IN("b"), GB_IN("bf")), "to", 1);
    gb_node(g, "add", "Add", GB_IN("x", "bf"), GB_IN("y"));
    out(g, "y");
    pt_prepare(g);
    cr_assert_not(pt_run_pass(g, "ConstantFoldingPass"));
    cr_assert_not_null(pt_node(g, "gather"));
    cr_assert_eq(gb_get(g, "b")->kind, CP_TENSOR_INTERMEDIATE);
    cp_graph_free(g);
}

/* ShuffleNet's channel shuffle as exported: Reshape(x, [1, 2, 3, 4]) hard-
 * codes batch 1, so the model runs at no other batch; the half-channel
 * count chunk() computes after it (Shape -> Gather(1) -> Div(2)) and even
 * x.shape[0] fold, since nothing here can follow a batch. */
Test(pass_fold, a_model_whose_constants_fix_the_batch_folds_every_known_value)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 4, GB_DIMS(1, 6, 2, 2));
    gb_ints(g, "split", 5, GB_DIMS(1, 2, 3, 2, 2));
    gb_scalar(g, "zero", 0);
    gb_scalar(g, "one", 1);
    gb_scalar(g, "two", 2);
    gb_node(g, "shuffle", "Reshape", GB_IN("x", "split"), GB_IN("x5"));
    gb_node(g, "shape", "Shape", GB_IN("x5"), GB_IN("s"));
    gb_node(g, "gc", "Gather", GB_IN("s", "one"), GB_IN("c"));
    gb_node(g, "half", "Div", GB_IN("c", "two"), GB_IN("h"));
    gb_node(g, "gb", "Gather", GB_IN("s", "zero"), GB_IN("b"));
    gb_node(g, "sum", "Add", GB_IN("h", "b"), GB_IN("hb"));
    set_int(g, gb_node(g, "cast", "Cast", GB_IN("hb"), GB_IN("hf")), "to", 1);
    gb_node(g, "add", "Add", GB_IN("x5", "hf"), GB_IN("y"));
    out(g, "y");
    pt_prepare(g);
    cr_assert(pt_run_pass(g, "ConstantFoldingPass"));
    const struct cp_tensor *hb = gb_get(g, "hb");
    cr_assert_eq(hb->kind, CP_TENSOR_INITIALIZER, "the batch-fixed chain stays computed");
    cr_assert_eq(*(const int64_t *)hb->data, 2, "hb = 2 / 2 + 1, got %lld",
                 (long long)*(const int64_t *)hb->data);
    cr_assert_eq(gb_get(g, "hf")->kind, CP_TENSOR_INITIALIZER);
    cr_assert_eq(cp_graph_n_live_nodes(g), 2, "Reshape and Add are left, not %zu",
                 cp_graph_n_live_nodes(g));
    cp_graph_free(g);
}

/* The shape is only known when the dimension is: a dynamic batch keeps the
 * chain (Shape's output has no value), while the folded part stays exact. */
Test(pass_fold, shape_of_a_dynamic_dimension_is_not_folded)
{
    struct cp_graph *g = gb_graph(13);
    gb_input_sym(g, "x", CP_DTYPE_F32, 3, GB_DIMS(-1, 3, 4), (const char *const[]){"N", 0, 0});
    gb_scalar(g, "zero", 0);
    gb_node(g, "shape", "Shape", GB_IN("x"), GB_IN("s"));
    gb_node(g, "gather", "Gather", GB_IN("s", "zero"), GB_IN("b"));
    set_int(g, gb_node(g, "cast", "Cast", GB_IN("b"), GB_IN("bf")), "to", 1);
    gb_node(g, "add", "Add", GB_IN("x", "bf"), GB_IN("y"));
    out(g, "y");
    pt_prepare(g);
    cr_assert_not(pt_run_pass(g, "ConstantFoldingPass"));
    cr_assert_eq(cp_graph_n_live_nodes(g), 4);
    cp_graph_free(g);
}

/* ---- constant float subgraphs -------------------------------------------------------- */

static const float W[4][3] = {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}, {10, 11, 12}};

/* y = MatMul(x [2,5,3], Concat(U, U)) with U = Unsqueeze(Identity(Transpose(W) * 0.5)). */
static struct cp_graph *build_weight_chain(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 3, GB_DIMS(2, 5, 3));
    gb_init(g, "W", CP_DTYPE_F32, 2, GB_DIMS(4, 3), W);
    gb_floats(g, "half", 1, (const float[]){0.5f});
    gb_ints(g, "axes0", 1, GB_DIMS(0));
    int32_t tr = gb_node(g, "transpose", "Transpose", GB_IN("W"), GB_IN("wt"));
    cr_assert_eq(cp_node_set_ints(g, tr, "perm", GB_DIMS(1, 0), 2), CP_OK);
    gb_node(g, "scale", "Mul", GB_IN("wt", "half"), GB_IN("ws"));
    gb_node(g, "identity", "Identity", GB_IN("ws"), GB_IN("wi"));
    gb_node(g, "unsqueeze", "Unsqueeze", GB_IN("wi", "axes0"), GB_IN("wu"));
    set_int(g, gb_node(g, "concat", "Concat", GB_IN("wu", "wu"), GB_IN("wc")), "axis", 0);
    gb_node(g, "matmul", "MatMul", GB_IN("x", "wc"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_weight_chain(struct cp_graph *g)
{
    cr_assert_eq(cp_graph_n_live_nodes(g), 1, "only the MatMul should be left");
    const struct cp_node *m = pt_node(g, "matmul");
    cr_assert_not_null(m);
    const struct cp_tensor *w = cp_graph_tensor(g, m->inputs[1]);
    cr_assert_eq(w->kind, CP_TENSOR_INITIALIZER);
    cr_assert_str_eq(w->name, "wc", "the folded tensor keeps its name");
    cr_assert_eq(w->owner, CP_DATA_HEAP);
    gb_assert_shape(g, "wc", 3, GB_DIMS(2, 3, 4));
    const float *v = w->data;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                cr_assert_float_eq(v[(b * 3 + i) * 4 + j], W[j][i] * 0.5f, 0, "wc[%d][%d][%d] = %g",
                                   b, i, j, v[(b * 3 + i) * 4 + j]);
}

Test(pass_fold, transpose_scale_unsqueeze_concat_of_a_weight_folds_into_one_initializer)
{
    pt_check_pass(build_weight_chain, "ConstantFoldingPass", true, check_weight_chain, 0);
}

/* Many ops on constants, feeding y = x + f(constants): every op folds and
 * the result is what the reference kernels compute. */
static struct cp_graph *build_evaluator_zoo(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(2, 16));
    float c0[2 * 3 * 4];
    for (int i = 0; i < 24; i++)
        c0[i] = (float)i * 0.1f - 1.0f;
    gb_init(g, "c0", CP_DTYPE_F32, 3, GB_DIMS(2, 3, 4), c0);
    /* Slice axis 2 backwards by 2 from 3, axis 1 forwards by 2: [2,2,2]. */
    gb_ints(g, "starts", 2, GB_DIMS(3, 0));
    gb_ints(g, "ends", 2, GB_DIMS(-5, 3));
    gb_ints(g, "axes", 2, GB_DIMS(2, 1));
    gb_ints(g, "steps", 2, GB_DIMS(-2, 2));
    gb_node(g, "slice", "Slice", GB_IN("c0", "starts", "ends", "axes", "steps"), GB_IN("t1"));
    /* Gather with a negative index along axis 1: [2,2,4] -> keep [2,2,2]. */
    gb_ints(g, "idx", 2, GB_DIMS(-1, 0));
    set_int(g, gb_node(g, "gather", "Gather", GB_IN("c0", "idx"), GB_IN("t2")), "axis", 1);
    gb_ints(g, "s_start", 1, GB_DIMS(1));
    gb_ints(g, "s_end", 1, GB_DIMS(3));
    gb_ints(g, "s_axis", 1, GB_DIMS(2));
    gb_node(g, "slice2", "Slice", GB_IN("t2", "s_start", "s_end", "s_axis"), GB_IN("t2s"));
    /* Expand a scalar, compare, select. */
    gb_floats(g, "two", 1, (const float[]){0.2f});
    gb_ints(g, "shape222", 3, GB_DIMS(2, 2, 2));
    gb_node(g, "expand", "Expand", GB_IN("two", "shape222"), GB_IN("t3"));
    gb_node(g, "equal", "Equal", GB_IN("t1", "t2s"), GB_IN("eq"));
    gb_node(g, "where", "Where", GB_IN("eq", "t3", "t1"), GB_IN("t4"));
    /* Pow with an integer exponent, then a chain of unary ops. */
    gb_ints(g, "p2", 1, GB_DIMS(2));
    gb_node(g, "pow", "Pow", GB_IN("t4", "p2"), GB_IN("t5"));
    gb_node(g, "erf", "Erf", GB_IN("t5"), GB_IN("u1"));
    gb_node(g, "tanh", "Tanh", GB_IN("u1"), GB_IN("u2"));
    gb_node(g, "exp", "Exp", GB_IN("u2"), GB_IN("u3"));
    gb_node(g, "sigmoid", "Sigmoid", GB_IN("u3"), GB_IN("u4"));
    gb_node(g, "sqrt", "Sqrt", GB_IN("u4"), GB_IN("u5"));
    gb_floats(g, "three", 1, (const float[]){3.0f});
    gb_floats(g, "one", 1, (const float[]){1.0f});
    gb_node(g, "div", "Div", GB_IN("u5", "three"), GB_IN("u6"));
    gb_node(g, "sub", "Sub", GB_IN("u6", "one"), GB_IN("u7"));
    gb_node(g, "relu", "Relu", GB_IN("u7"), GB_IN("u8"));
    /* Through integers and back: Cast to i32 of 100*u7, integer Div. */
    gb_floats(g, "hundred", 1, (const float[]){100.0f});
    gb_node(g, "mul100", "Mul", GB_IN("u7", "hundred"), GB_IN("m"));
    set_int(g, gb_node(g, "to_i32", "Cast", GB_IN("m"), GB_IN("mi")), "to", 6);
    int32_t seven = gb_tensor(g, "seven", CP_DTYPE_I32, 1, GB_DIMS(1), CP_TENSOR_INITIALIZER);
    {
        int32_t *v = cp_graph_alloc(g, sizeof *v);
        *v = 7;
        cr_assert_eq(cp_graph_set_data(g, seven, v, sizeof *v, CP_DATA_ARENA, NULL), CP_OK);
    }
    gb_node(g, "idiv", "Div", GB_IN("mi", "seven"), GB_IN("q"));
    set_int(g, gb_node(g, "to_f32", "Cast", GB_IN("q"), GB_IN("qf")), "to", 1);
    gb_node(g, "mix", "Add", GB_IN("qf", "u8"), GB_IN("u9"));
    /* A Range longer than inference propagates values for, cast to f32. */
    gb_scalar(g, "r0", 0);
    gb_scalar(g, "r1", 300);
    gb_scalar(g, "r2", 3);
    gb_node(g, "range", "Range", GB_IN("r0", "r1", "r2"), GB_IN("rg"));
    gb_ints(g, "r_start", 1, GB_DIMS(60));
    gb_ints(g, "r_end", 1, GB_DIMS(68));
    gb_ints(g, "r_axis", 1, GB_DIMS(0));
    gb_node(g, "rslice", "Slice", GB_IN("rg", "r_start", "r_end", "r_axis"), GB_IN("rs"));
    set_int(g, gb_node(g, "rcast", "Cast", GB_IN("rs"), GB_IN("rf")), "to", 1);
    gb_ints(g, "shape8", 1, GB_DIMS(8));
    gb_node(g, "flat", "Reshape", GB_IN("u9", "shape8"), GB_IN("u10"));
    gb_node(g, "plus_range", "Add", GB_IN("u10", "rf"), GB_IN("u11"));
    /* ConstantOfShape with a tensor value attribute, and a final Concat. */
    int32_t cos_v = gb_tensor(g, "cos_value", CP_DTYPE_F32, 1, GB_DIMS(1), CP_TENSOR_INITIALIZER);
    {
        float *v = cp_graph_alloc(g, sizeof *v);
        *v = 0.25f;
        cr_assert_eq(cp_graph_set_data(g, cos_v, v, sizeof *v, CP_DATA_ARENA, NULL), CP_OK);
    }
    int32_t cos = gb_node(g, "cos", "ConstantOfShape", GB_IN("shape8"), GB_IN("k"));
    cr_assert_eq(cp_node_set_tensor(g, cos, "value", cos_v), CP_OK);
    set_int(g, gb_node(g, "cat", "Concat", GB_IN("u11", "k", "u11", "k"), GB_IN("c32")), "axis", 0);
    gb_ints(g, "shape2x16", 2, GB_DIMS(2, 16));
    gb_node(g, "to2d", "Reshape", GB_IN("c32", "shape2x16"), GB_IN("c2d"));
    gb_node(g, "out", "Add", GB_IN("x", "c2d"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_zoo(struct cp_graph *g)
{
    cr_assert_eq(cp_graph_n_live_nodes(g), 1, "everything but the last Add should fold");
    const struct cp_node *n = pt_node(g, "out");
    cr_assert_not_null(n);
    cr_assert_eq(cp_graph_tensor(g, n->inputs[1])->kind, CP_TENSOR_INITIALIZER);
}

Test(pass_fold, evaluator_agrees_with_the_reference_kernels_on_every_folded_op)
{
    pt_check_pass(build_evaluator_zoo, "ConstantFoldingPass", true, check_zoo, 1e-6);
}

/* ---- what stays ---------------------------------------------------------------------- */

/* Expand of a scalar to 2 MiB: folding would bake the bytes into the .om. */
static struct cp_graph *build_big_expand(void)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(512, 1024));
    gb_floats(g, "v", 1, (const float[]){1.5f});
    gb_ints(g, "shape", 2, GB_DIMS(512, 1024));
    gb_node(g, "expand", "Expand", GB_IN("v", "shape"), GB_IN("e"));
    gb_node(g, "add", "Add", GB_IN("x", "e"), GB_IN("y"));
    out(g, "y");
    return g;
}

static void check_big_expand(struct cp_graph *g)
{
    cr_assert_not_null(pt_node(g, "expand"), "a 2 MiB constant must not be folded");
}

Test(pass_fold, an_output_that_would_bloat_the_model_is_not_folded)
{
    pt_check_pass(build_big_expand, "ConstantFoldingPass", false, check_big_expand, 0);
}

Test(pass_fold, a_constant_graph_output_stays_produced_by_its_node)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(3));
    gb_floats(g, "a", 3, (const float[]){1, 2, 3});
    gb_floats(g, "b", 3, (const float[]){4, 5, 6});
    gb_node(g, "sum", "Add", GB_IN("a", "b"), GB_IN("c"));
    gb_node(g, "relu", "Relu", GB_IN("x"), GB_IN("y"));
    out(g, "c");
    out(g, "y");
    pt_prepare(g);
    cr_assert_not(pt_run_pass(g, "ConstantFoldingPass"));
    cr_assert_not_null(pt_node(g, "sum"));
    cr_assert_eq(gb_get(g, "c")->kind, CP_TENSOR_INTERMEDIATE);
    cp_graph_free(g);
}

Test(pass_fold, nodes_reading_a_graph_input_stay)
{
    struct cp_graph *g = gb_graph(13);
    gb_input(g, "x", CP_DTYPE_F32, 1, GB_DIMS(3));
    gb_floats(g, "a", 3, (const float[]){1, 2, 3});
    gb_node(g, "mul", "Mul", GB_IN("x", "a"), GB_IN("y"));
    out(g, "y");
    pt_prepare(g);
    cr_assert_not(pt_run_pass(g, "ConstantFoldingPass"));
    cr_assert_eq(cp_graph_n_live_nodes(g), 1);
    cp_graph_free(g);
}
