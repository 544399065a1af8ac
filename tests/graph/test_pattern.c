/* graph/pattern.h: the activation matchers the fusion passes and the rule
 * engine share, run on a view that is neither a cp_graph nor a trace (a
 * table of nodes), and the pattern table. */
#include <criterion/criterion.h>

#include "graph/pattern.h"

#include <string.h>

/* A toy graph: node i reads tensors in[i][0..n_in) and writes tensor i + 100.
 * Tensors below 100 are external. `outputs` lists graph outputs (never
 * private). */
struct toy {
    size_t n;
    enum cp_op op[8];
    int32_t in[8][2];
    size_t n_in[8];
    int32_t outputs[2];
    size_t n_outputs;
};

static enum cp_op t_op(const void *ctx, int32_t n)
{
    return ((const struct toy *)ctx)->op[n];
}

static size_t t_n_inputs(const void *ctx, int32_t n)
{
    return ((const struct toy *)ctx)->n_in[n];
}

static int32_t t_input(const void *ctx, int32_t n, size_t i)
{
    const struct toy *t = ctx;
    return i < t->n_in[n] ? t->in[n][i] : -1;
}

static int32_t t_output(const void *ctx, int32_t n, size_t i)
{
    (void)ctx;
    return i == 0 ? n + 100 : -1;
}

static size_t t_readers(const void *ctx, int32_t x, int32_t *out, size_t max)
{
    const struct toy *t = ctx;
    size_t k = 0;
    for (size_t n = 0; n < t->n; n++)
        for (size_t i = 0; i < t->n_in[n]; i++)
            if (t->in[n][i] == x) {
                if (k < max)
                    out[k] = (int32_t)n;
                k++;
                break;
            }
    return k;
}

static bool t_private_to(const void *ctx, int32_t x, int reads)
{
    const struct toy *t = ctx;
    for (size_t i = 0; i < t->n_outputs; i++)
        if (t->outputs[i] == x)
            return false;
    int k = 0;
    for (size_t n = 0; n < t->n; n++)
        for (size_t i = 0; i < t->n_in[n]; i++)
            k += t->in[n][i] == x;
    return k == reads;
}

static struct cp_pattern_view view_of(const struct toy *t)
{
    return (struct cp_pattern_view){t,        t_op,      t_n_inputs,  t_input,
                                    t_output, t_readers, t_private_to};
}

static void node(struct toy *t, enum cp_op op, int32_t a, int32_t b)
{
    size_t n = t->n++;
    t->op[n] = op;
    t->in[n][0] = a;
    t->in[n][1] = b;
    t->n_in[n] = b < 0 ? 1 : 2;
}

Test(pattern, one_activation_op_reading_x_is_the_activation)
{
    static const enum cp_op acts[] = {CP_OP_RELU, CP_OP_LEAKY_RELU, CP_OP_CLIP, CP_OP_SIGMOID,
                                      CP_OP_GELU};
    static const enum cp_act_kind kinds[] = {CP_ACT_RELU, CP_ACT_LEAKY_RELU, CP_ACT_CLIP,
                                             CP_ACT_SIGMOID, CP_ACT_GELU};
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
    node(&t, CP_OP_TANH, 100, -1); /* not one a fused op absorbs */
    struct cp_pattern_view v = view_of(&t);
    struct cp_pattern_act m;
    cr_assert_not(cp_pattern_match_activation(&v, 100, &m));
    cr_assert_not(cp_pattern_is_activation_op(CP_OP_TANH));
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
