/* graph/pattern.h: the activation matchers the fusion passes and the rule
 * engine share, run on a view that is neither a cp_graph nor a trace (a
 * table of nodes), the view of a cp_graph, and the pattern table. */
#include <criterion/criterion.h>

#include "graph/graph_build.h"
#include "graph/pattern.h"

#include <string.h>

/* A toy graph: node i reads tensors in[i][0..n_in) and writes tensor i + 100.
 * Tensors below 100 are inputs (constants when listed in `consts`).
 * `outputs` lists graph outputs (never private). It knows no values, as a
 * trace does. */
#define TOY_TENSORS 200

struct toy {
    size_t n;
    struct cp_node nodes[8];
    int32_t in[8][3];
    int32_t out[8];
    struct cp_tensor tensors[TOY_TENSORS];
    int32_t outputs[2];
    size_t n_outputs;
};

static size_t t_n_nodes(const void *ctx)
{
    return ((const struct toy *)ctx)->n;
}

static size_t t_n_tensors(const void *ctx)
{
    (void)ctx;
    return TOY_TENSORS;
}

static const struct cp_node *t_node(const void *ctx, int32_t n)
{
    const struct toy *t = ctx;
    return n >= 0 && (size_t)n < t->n ? &t->nodes[n] : NULL;
}

static const struct cp_tensor *t_tensor(const void *ctx, int32_t x)
{
    const struct toy *t = ctx;
    return x >= 0 && x < TOY_TENSORS ? &t->tensors[x] : NULL;
}

static int32_t t_producer(const void *ctx, int32_t x)
{
    const struct toy *t = ctx;
    return x >= 100 && (size_t)(x - 100) < t->n ? x - 100 : -1;
}

static size_t t_readers(const void *ctx, int32_t x, int32_t *out, size_t max)
{
    const struct toy *t = ctx;
    size_t k = 0;
    for (size_t n = 0; n < t->n; n++)
        for (size_t i = 0; i < t->nodes[n].n_inputs; i++)
            if (t->nodes[n].inputs[i] == x) {
                if (k < max)
                    out[k] = (int32_t)n;
                k++;
                break;
            }
    return k;
}

static size_t t_n_reads(const void *ctx, int32_t x)
{
    const struct toy *t = ctx;
    size_t k = 0;
    for (size_t n = 0; n < t->n; n++)
        for (size_t i = 0; i < t->nodes[n].n_inputs; i++)
            k += t->nodes[n].inputs[i] == x;
    return k;
}

static bool t_is_output(const void *ctx, int32_t x)
{
    const struct toy *t = ctx;
    for (size_t i = 0; i < t->n_outputs; i++)
        if (t->outputs[i] == x)
            return true;
    return false;
}

static struct cp_pattern_view view_of(struct toy *t)
{
    int64_t dims[4] = {1, 4, 8, 8};
    for (int x = 0; x < TOY_TENSORS; x++) {
        t->tensors[x].dtype = CP_DTYPE_F32;
        cp_shape_set(&t->tensors[x].shape, 4, dims);
        t->tensors[x].kind = x < 100 ? CP_TENSOR_INPUT : CP_TENSOR_INTERMEDIATE;
        t->tensors[x].producer = t_producer(t, x);
    }
    return (struct cp_pattern_view){.ctx = t,
                                    .n_nodes = t_n_nodes,
                                    .n_tensors = t_n_tensors,
                                    .node = t_node,
                                    .tensor = t_tensor,
                                    .producer = t_producer,
                                    .readers = t_readers,
                                    .n_reads = t_n_reads,
                                    .is_output = t_is_output,
                                    .opset = CP_PATTERN_OPSET_UNKNOWN,
                                    .knows_values = false};
}

static void node(struct toy *t, enum cp_op op, int32_t a, int32_t b)
{
    size_t n = t->n++;
    struct cp_node *nd = &t->nodes[n];
    memset(nd, 0, sizeof *nd);
    nd->op = op;
    nd->op_type = cp_op_name(op);
    t->in[n][0] = a;
    t->in[n][1] = b;
    t->out[n] = (int32_t)n + 100;
    nd->inputs = t->in[n];
    nd->n_inputs = b < 0 ? 1 : 2;
    nd->outputs = &t->out[n];
    nd->n_outputs = 1;
}

Test(pattern, one_activation_op_reading_x_is_the_activation)
{
    static const enum cp_op acts[] = {CP_OP_RELU,         CP_OP_LEAKY_RELU, CP_OP_CLIP,
                                      CP_OP_SIGMOID,      CP_OP_GELU,       CP_OP_HARD_SWISH,
                                      CP_OP_HARD_SIGMOID, CP_OP_ELU,        CP_OP_SOFTPLUS,
                                      CP_OP_MISH,         CP_OP_TANH};
    static const enum cp_act_kind kinds[] = {
        CP_ACT_RELU,     CP_ACT_LEAKY_RELU, CP_ACT_CLIP,         CP_ACT_SIGMOID,
        CP_ACT_GELU,     CP_ACT_HARD_SWISH, CP_ACT_HARD_SIGMOID, CP_ACT_ELU,
        CP_ACT_SOFTPLUS, CP_ACT_MISH,       CP_ACT_TANH};
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) {
        struct toy t = {0};
        node(&t, CP_OP_CONV, 1, 2); /* tensor 100 */
        node(&t, acts[i], 100, -1); /* tensor 101 */
        struct cp_pattern_view v = view_of(&t);
        struct cp_pattern_act m;
        cr_assert(cp_pattern_match_activation(&v, 100, &m), "%s", cp_op_name(acts[i]));
        cr_assert_eq(m.kind, kinds[i]);
        cr_assert_eq(m.n_nodes, 1);
        cr_assert_eq(m.nodes[0], 1);
        cr_assert_eq(m.out, 101);
        cr_assert_eq(m.reads, 1);
    }
    struct toy t = {0};
    node(&t, CP_OP_CONV, 1, 2);
    node(&t, CP_OP_EXP, 100, -1); /* not one a fused op absorbs */
    struct cp_pattern_view v = view_of(&t);
    struct cp_pattern_act m;
    cr_assert_not(cp_pattern_match_activation(&v, 100, &m));
    cr_assert_not(cp_pattern_is_activation_op(CP_OP_EXP));
}

Test(pattern, an_activation_must_be_the_only_reader)
{
    struct toy t = {0};
    node(&t, CP_OP_CONV, 1, 2);
    node(&t, CP_OP_RELU, 100, -1);
    node(&t, CP_OP_ADD, 100, 3); /* a second reader of the Conv's output */
    struct cp_pattern_view v = view_of(&t);
    struct cp_pattern_act m;
    cr_assert_not(cp_pattern_match_activation(&v, 100, &m));
    /* a graph output is never private */
    struct toy u = {0};
    node(&u, CP_OP_CONV, 1, 2);
    node(&u, CP_OP_RELU, 100, -1);
    u.outputs[u.n_outputs++] = 100;
    v = view_of(&u);
    cr_assert_not(cp_pattern_match_activation(&v, 100, &m));
}

Test(pattern, silu_in_either_operand_order)
{
    for (int order = 0; order < 2; order++) {
        struct toy t = {0};
        node(&t, CP_OP_MATMUL, 1, 2);     /* 100 */
        node(&t, CP_OP_SIGMOID, 100, -1); /* 101 */
        if (order)
            node(&t, CP_OP_MUL, 101, 100); /* 102 */
        else
            node(&t, CP_OP_MUL, 100, 101);
        struct cp_pattern_view v = view_of(&t);
        struct cp_pattern_act m;
        cr_assert(cp_pattern_match_activation(&v, 100, &m));
        cr_assert_eq(m.kind, CP_ACT_SILU);
        cr_assert_eq(m.n_nodes, 2);
        cr_assert_eq(m.nodes[0], 1);
        cr_assert_eq(m.nodes[1], 2);
        cr_assert_eq(m.out, 102);
        cr_assert_eq(m.reads, 2);
        cr_assert(cp_pattern_match_silu(&v, 100, &m));
    }
}

Test(pattern, silu_needs_its_sigmoid_private_and_the_right_product)
{
    struct toy t = {0};
    node(&t, CP_OP_MATMUL, 1, 2);
    node(&t, CP_OP_SIGMOID, 100, -1);
    node(&t, CP_OP_MUL, 100, 101);
    node(&t, CP_OP_RELU, 101, -1); /* the sigmoid's result is read twice */
    struct cp_pattern_view v = view_of(&t);
    struct cp_pattern_act m;
    cr_assert_not(cp_pattern_match_silu(&v, 100, &m));

    struct toy u = {0};
    node(&u, CP_OP_MATMUL, 1, 2);
    node(&u, CP_OP_SIGMOID, 100, -1);
    node(&u, CP_OP_MUL, 100, 5); /* x * something else */
    v = view_of(&u);
    cr_assert_not(cp_pattern_match_silu(&v, 100, &m));
    cr_assert_not(cp_pattern_match_activation(&v, 100, &m));
}

/* The passes' view of a cp_graph: reads are input slots of live nodes, a
 * graph output is never private, constants carry their data, and an update
 * sees a rewrite. */
Test(pattern, a_graph_view_counts_slots_and_sees_rewrites)
{
    struct cp_graph *g = gb_graph(17);
    gb_input(g, "x", CP_DTYPE_F32, 2, GB_DIMS(2, 3));
    gb_floats(g, "c", 1, (const float[]){2.0f});
    gb_node(g, "sq", "Mul", GB_IN("x", "x"), GB_IN("x2"));
    gb_node(g, "r", "Relu", GB_IN("x2"), GB_IN("y"));
    cr_assert_eq(cp_graph_add_output(g, cp_graph_find_tensor(g, "y")), CP_OK);
    struct cp_pattern_graph pg;
    cr_assert_eq(cp_pattern_graph_init(&pg, g), CP_OK);
    const struct cp_pattern_view *v = &pg.view;
    int32_t x = cp_graph_find_tensor(g, "x"), x2 = cp_graph_find_tensor(g, "x2");
    int32_t y = cp_graph_find_tensor(g, "y"), c = cp_graph_find_tensor(g, "c");
    cr_assert(cp_pattern_private(v, x, 2), "Mul(x, x) reads x twice");
    cr_assert_not(cp_pattern_private(v, x, 1));
    int32_t r[2];
    cr_assert_eq(v->readers(v->ctx, x, r, 2), 1, "one node, however many slots");
    cr_assert(cp_pattern_private(v, x2, 1));
    cr_assert_not(cp_pattern_private(v, y, 0), "a graph output is never private");
    cr_assert_eq(v->producer(v->ctx, x2), 0);
    cr_assert_eq(v->producer(v->ctx, x), -1);
    cr_assert(v->knows_values);
    cr_assert_eq(v->opset, 17);
    cr_assert_float_eq(*(const float *)v->tensor(v->ctx, c)->data, 2.0f, 0);
    /* a second reader of x2 appears: after the update x2 is shared */
    gb_node(g, "r2", "Relu", GB_IN("x2"), GB_IN("z"));
    cr_assert_eq(cp_pattern_graph_update(&pg), CP_OK);
    cr_assert_not(cp_pattern_private(v, x2, 1));
    cr_assert_eq(v->readers(v->ctx, x2, r, 2), 2);
    /* the Relu dies: it reads nothing, and is no node of the view */
    cp_graph_node(g, 1)->dead = true;
    cr_assert_eq(cp_pattern_graph_update(&pg), CP_OK);
    cr_assert(cp_pattern_private(v, x2, 1));
    cr_assert_null(v->node(v->ctx, 1));
    cp_pattern_graph_release(&pg);
    cp_graph_free(g);
}

Test(pattern, every_pattern_has_a_kind_a_chain_and_a_hint)
{
    size_t unfused_by_none = 0;
    for (int i = 0; i < CP_PATTERN_COUNT; i++) {
        const struct cp_pattern_def *p = cp_pattern_get((enum cp_pattern_id)i);
        cr_assert_not_null(p);
        cr_assert(p->kind && p->kind[0], "pattern %d", i);
        cr_assert(p->chain && p->chain[0], "%s", p->kind);
        cr_assert(p->fix_hint && p->fix_hint[0], "%s", p->kind);
        cr_assert_not_null(p->fix_pass);
        unfused_by_none += p->fix_pass[0] == '\0';
    }
    cr_assert_eq(unfused_by_none, 1, "only the tanh GELU has no pass");
    cr_assert_str_eq(cp_pattern_get(CP_PATTERN_GELU_TANH)->fix_pass, "");
    cr_assert_null(cp_pattern_get(CP_PATTERN_COUNT));
}

Test(pattern, fused_activation_names_round_trip)
{
    for (int k = CP_ACT_NONE; k < CP_ACT_BAD; k++)
        cr_assert_eq((int)cp_act_from_name(cp_act_name((enum cp_act_kind)k)), k);
    cr_assert_str_eq(cp_act_name(CP_ACT_SILU), "SiLU");
    cr_assert_str_eq(cp_act_name(CP_ACT_NONE), "");
    cr_assert_eq(cp_act_from_name("Swish"), CP_ACT_BAD);
    cr_assert_null(cp_act_name(CP_ACT_BAD));
}
