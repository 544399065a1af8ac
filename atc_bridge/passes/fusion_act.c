/* The activation, GELU and residual matchers the fusion passes share (see
 * fusion_internal.h). Each reads the nodes after one tensor and fills a
 * description of what it found; none changes the graph. Which ops make an
 * activation, and SiLU's shape, are graph/pattern.h's (the rule engine
 * finds unfused activations with the same matcher); here the checks only
 * a graph allows: single outputs, Clip's constant bounds, attributes. */
#include "atc_bridge/passes/fusion_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define MAX_READERS 4

static void act_init(struct cp_fuse_act *a, enum cp_act_kind kind, int32_t uses)
{
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->uses = uses;
    a->alpha = 0.0f;
    a->beta = 0.0f;
}

static void act_add(struct cp_fuse_act *a, int32_t node)
{
    if (a->n_nodes < sizeof a->nodes / sizeof *a->nodes)
        a->nodes[a->n_nodes++] = node;
}

/* Clip's bounds: scalar constant inputs from opset 11, attributes before;
 * an absent bound is unbounded. */
static bool clip_bounds(const struct cp_fuse *f, const struct cp_node *n, float *lo, float *hi)
{
    *lo = -FLT_MAX;
    *hi = FLT_MAX;
    if (cp_graph_opset(f->g) > 0 && cp_graph_opset(f->g) < 11) {
        *lo = cp_node_attr_float(n, "min", -FLT_MAX);
        *hi = cp_node_attr_float(n, "max", FLT_MAX);
        return true;
    }
    if (n->n_inputs > 1 && n->inputs[1] >= 0 && !cp_fuse_const_scalar(f, n->inputs[1], lo))
        return false;
    if (n->n_inputs > 2 && n->inputs[2] >= 0 && !cp_fuse_const_scalar(f, n->inputs[2], hi))
        return false;
    return *lo <= *hi;
}

/* A one-node activation graph/pattern.h matched: its attributes, and the
 * checks a graph allows. */
static bool single_from(const struct cp_fuse *f, const struct cp_pattern_act *m,
                        struct cp_fuse_act *a)
{
    const struct cp_node *n = cp_graph_node(f->g, m->nodes[0]);
    if (n->n_outputs != 1 || n->outputs[0] < 0)
        return false;
    act_init(a, m->kind, 1);
    switch (m->kind) {
    case CP_ACT_LEAKY_RELU:
        a->alpha = cp_node_attr_float(n, "alpha", 0.01f);
        break;
    case CP_ACT_CLIP:
        if (!clip_bounds(f, n, &a->alpha, &a->beta))
            return false;
        break;
    case CP_ACT_GELU:
        if (strcmp(cp_node_attr_string(n, "approximate", "none"), "tanh") == 0)
            a->kind = CP_ACT_GELU_TANH;
        break;
    default:
        break;
    }
    act_add(a, m->nodes[0]);
    a->out = n->outputs[0];
    return true;
}

/* SiLU as PyTorch exports it, Mul(x, Sigmoid(x)) in either operand order,
 * which graph/pattern.h matched. */
static bool silu_from(const struct cp_fuse *f, const struct cp_pattern_act *m,
                      struct cp_fuse_act *a)
{
    for (size_t i = 0; i < m->n_nodes; i++) {
        const struct cp_node *n = cp_graph_node(f->g, m->nodes[i]);
        if (n->n_outputs != 1)
            return false;
    }
    act_init(a, CP_ACT_SILU, 2);
    act_add(a, m->nodes[0]);
    act_add(a, m->nodes[1]);
    a->out = m->out;
    return true;
}

/* A binary node with x as one operand and a scalar constant near v as the
 * other. */
static bool is_binary_const(const struct cp_fuse *f, const struct cp_node *n, enum cp_op op,
                            int32_t x, float v, bool x_first)
{
    if (n->op != op || n->n_outputs != 1 || n->n_inputs != 2)
        return false;
    int o = cp_fuse_other(n, x);
    if (o < 0 || (x_first && o != 1))
        return false;
    float c;
    return cp_fuse_const_scalar(f, n->inputs[o], &c) && fabsf(c - v) <= 1e-4f * fabsf(v);
}

/* The single reader of t (private), or NULL. */
static const struct cp_node *sole_reader(const struct cp_fuse *f, int32_t t, int32_t *idx)
{
    if (!cp_fuse_private(f, t, 1) || cp_fuse_consumers(f, t, idx, 1) != 1)
        return NULL;
    return cp_graph_node(f->g, *idx);
}

/* GELU from the Div (or Mul by 1/sqrt2) node `di` that reads x. */
static bool gelu_from(const struct cp_fuse *f, int32_t x, int32_t di, struct cp_fuse_act *a)
{
    const struct cp_node *d = cp_graph_node(f->g, di);
    if (!is_binary_const(f, d, CP_OP_DIV, x, 1.41421356f, true) &&
        !is_binary_const(f, d, CP_OP_MUL, x, 0.70710678f, false))
        return false;
    int32_t ei, ai, mi, m2i;
    const struct cp_node *e = sole_reader(f, d->outputs[0], &ei);
    if (!e || e->op != CP_OP_ERF || e->n_outputs != 1)
        return false;
    const struct cp_node *ad = sole_reader(f, e->outputs[0], &ai);
    if (!ad || !is_binary_const(f, ad, CP_OP_ADD, e->outputs[0], 1.0f, false))
        return false;
    int32_t one_plus = ad->outputs[0]; /* 1 + erf(x / sqrt2) */
    const struct cp_node *m = sole_reader(f, one_plus, &mi);
    if (!m || m->op != CP_OP_MUL || m->n_outputs != 1)
        return false;
    int o = cp_fuse_other(m, one_plus);
    if (o < 0)
        return false;
    int32_t other = m->inputs[o];
    act_init(a, CP_ACT_GELU, 2);
    act_add(a, di);
    act_add(a, ei);
    act_add(a, ai);
    act_add(a, mi);
    if (other == x || is_binary_const(f, m, CP_OP_MUL, one_plus, 0.5f, false)) {
        /* (1+erf) * x, then * 0.5; or (1+erf) * 0.5, then * x */
        const struct cp_node *m2 = sole_reader(f, m->outputs[0], &m2i);
        if (!m2)
            return false;
        bool ok = other == x ? is_binary_const(f, m2, CP_OP_MUL, m->outputs[0], 0.5f, false)
                             : (m2->op == CP_OP_MUL && cp_fuse_other(m2, m->outputs[0]) >= 0 &&
                                m2->inputs[cp_fuse_other(m2, m->outputs[0])] == x);
        if (!ok)
            return false;
        act_add(a, m2i);
        a->out = m2->outputs[0];
        return true;
    }
    /* (x * 0.5) * (1+erf) */
    const struct cp_node *h = cp_fuse_producer(f, other);
    if (!h || !cp_fuse_private(f, other, 1) || !is_binary_const(f, h, CP_OP_MUL, x, 0.5f, false))
        return false;
    int32_t hi = cp_graph_tensor(f->g, other)->producer;
    act_add(a, hi);
    a->out = m->outputs[0];
    return true;
}

bool cp_fuse_match_gelu(const struct cp_fuse *f, int32_t x, struct cp_fuse_act *a)
{
    int32_t readers[8];
    size_t n = cp_fuse_consumers(f, x, readers, 8);
    for (size_t i = 0; i < n && i < 8; i++)
        if (gelu_from(f, x, readers[i], a))
            return true;
    return false;
}

bool cp_fuse_match_activation(const struct cp_fuse *f, int32_t x, struct cp_fuse_act *a)
{
    if (x < 0 || (size_t)x >= f->n_tensors || f->is_output[x])
        return false;
    struct cp_pattern_act m;
    if (cp_pattern_match_activation(&f->view, x, &m)) {
        if (m.kind != CP_ACT_SILU)
            return single_from(f, &m, a);
        if (silu_from(f, &m, a))
            return true;
    }
    int32_t readers[MAX_READERS];
    size_t n = cp_fuse_consumers(f, x, readers, MAX_READERS);
    return n == 2 && f->uses[x] == 2 && cp_fuse_match_gelu(f, x, a) && a->uses == 2;
}

/* Shapes that are the same at run time whatever the inputs: known values,
 * or the same named symbolic dimension. */
static bool same_shape(const struct cp_shape *a, const struct cp_shape *b)
{
    if (a->rank < 0 || !cp_shape_equal(a, b))
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i].value < 0 && !a->dims[i].sym)
            return false;
    return true;
}

bool cp_fuse_match_residual(const struct cp_fuse *f, int32_t x, int32_t *add, int32_t *r)
{
    int32_t c;
    const struct cp_node *n = sole_reader(f, x, &c);
    if (!n || n->op != CP_OP_ADD || n->n_outputs != 1)
        return false;
    int o = cp_fuse_other(n, x);
    if (o < 0)
        return false;
    const struct cp_tensor *tx = cp_graph_tensor(f->g, x),
                           *tr = cp_graph_tensor(f->g, n->inputs[o]);
    const struct cp_tensor *ty = cp_graph_tensor(f->g, n->outputs[0]);
    if (tr->dtype != CP_DTYPE_F32 || tx->dtype != CP_DTYPE_F32 ||
        !same_shape(&tx->shape, &tr->shape) || !same_shape(&tx->shape, &ty->shape))
        return false;
    *add = c;
    *r = n->inputs[o];
    return true;
}

static void tail_add_act(struct cp_fuse_tail *tl, const struct cp_fuse_act *a)
{
    tl->has_act = true;
    tl->act = *a;
    for (size_t i = 0; i < a->n_nodes && tl->n_nodes < sizeof tl->nodes / sizeof *tl->nodes; i++)
        tl->nodes[tl->n_nodes++] = a->nodes[i];
    tl->out = a->out;
}

static void tail_add_residual(const struct cp_fuse *f, struct cp_fuse_tail *tl, int32_t add,
                              int32_t r)
{
    tl->residual = r;
    if (tl->n_nodes < sizeof tl->nodes / sizeof *tl->nodes)
        tl->nodes[tl->n_nodes++] = add;
    tl->out = cp_graph_node(f->g, add)->outputs[0];
}

void cp_fuse_match_tail(const struct cp_fuse *f, int32_t t, struct cp_fuse_tail *tl)
{
    memset(tl, 0, sizeof *tl);
    tl->residual = -1;
    tl->out = t;
    struct cp_fuse_act a;
    int32_t add, r;
    if (cp_fuse_match_activation(f, t, &a)) {
        tail_add_act(tl, &a);
        if (cp_fuse_match_residual(f, tl->out, &add, &r))
            tail_add_residual(f, tl, add, r);
    } else if (cp_fuse_match_residual(f, t, &add, &r)) {
        tail_add_residual(f, tl, add, r);
        if (cp_fuse_match_activation(f, tl->out, &a)) {
            tail_add_act(tl, &a);
            tl->residual_first = true;
        }
    }
}
