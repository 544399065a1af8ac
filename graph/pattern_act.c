/* What a fused op absorbs after its result (see pattern.h): activations
 * (one op, SiLU, a decomposed GELU), the GELU forms as patterns of their
 * own, the residual Add, and the tail that chains them. Each reads the
 * nodes after one tensor and says which nodes it found; none changes
 * anything. */
#include "graph/pattern_internal.h"

#include <float.h>
#include <math.h>
#include <string.h>

bool cp_pattern_is_activation_op(enum cp_op op)
{
    switch (op) {
    case CP_OP_RELU:
    case CP_OP_LEAKY_RELU:
    case CP_OP_CLIP:
    case CP_OP_SIGMOID:
    case CP_OP_GELU:
    case CP_OP_HARD_SWISH:
    case CP_OP_HARD_SIGMOID:
    case CP_OP_ELU:
    case CP_OP_SOFTPLUS:
    case CP_OP_MISH:
    case CP_OP_TANH:
        return true;
    default:
        return false;
    }
}

static enum cp_act_kind act_kind_of(enum cp_op op)
{
    switch (op) {
    case CP_OP_RELU:
        return CP_ACT_RELU;
    case CP_OP_LEAKY_RELU:
        return CP_ACT_LEAKY_RELU;
    case CP_OP_CLIP:
        return CP_ACT_CLIP;
    case CP_OP_SIGMOID:
        return CP_ACT_SIGMOID;
    case CP_OP_GELU:
        return CP_ACT_GELU;
    case CP_OP_HARD_SWISH:
        return CP_ACT_HARD_SWISH;
    case CP_OP_HARD_SIGMOID:
        return CP_ACT_HARD_SIGMOID;
    case CP_OP_ELU:
        return CP_ACT_ELU;
    case CP_OP_SOFTPLUS:
        return CP_ACT_SOFTPLUS;
    case CP_OP_MISH:
        return CP_ACT_MISH;
    case CP_OP_TANH:
        return CP_ACT_TANH;
    default:
        return CP_ACT_BAD;
    }
}

bool cp_pattern_act_is_decomposed_gelu(const struct cp_pattern_act *a)
{
    return a->kind == CP_ACT_GELU && a->n_nodes > 1;
}

static void act_init(struct cp_pattern_act *a, enum cp_act_kind kind, int reads)
{
    memset(a, 0, sizeof *a);
    a->kind = kind;
    a->reads = reads;
    a->out = -1;
}

static void act_add(struct cp_pattern_act *a, int32_t node)
{
    if (a->n_nodes < sizeof a->nodes / sizeof *a->nodes)
        a->nodes[a->n_nodes++] = node;
}

/* ---- one op, SiLU ----------------------------------------------------------------------- */

/* Clip's bounds: scalar constant inputs from opset 11, attributes before;
 * an absent bound is unbounded. Unknown values: NAN, and the bounds hold. */
static bool clip_bounds(const struct cp_pattern_view *v, const struct cp_node *n, float *lo,
                        float *hi)
{
    *lo = -FLT_MAX;
    *hi = FLT_MAX;
    if (cp_pv_opset_below(v, 11)) {
        *lo = cp_node_attr_float(n, "min", -FLT_MAX);
        *hi = cp_node_attr_float(n, "max", FLT_MAX);
        return true;
    }
    bool known_lo = true, known_hi = true;
    if (n->n_inputs > 1 && n->inputs[1] >= 0 && !cp_pv_const_scalar(v, n->inputs[1], lo, &known_lo))
        return false;
    if (n->n_inputs > 2 && n->inputs[2] >= 0 && !cp_pv_const_scalar(v, n->inputs[2], hi, &known_hi))
        return false;
    return !known_lo || !known_hi || *lo <= *hi;
}

/* A one-node activation reading x: its attributes, and the checks a fused
 * op needs (one output, Clip's bounds). */
static bool single(const struct cp_pattern_view *v, int32_t node, struct cp_pattern_act *a)
{
    const struct cp_node *n = cp_pv_node(v, node);
    if (n->n_outputs != 1 || n->outputs[0] < 0)
        return false;
    act_init(a, act_kind_of(n->op), 1);
    switch (a->kind) {
    case CP_ACT_LEAKY_RELU:
        a->alpha = cp_node_attr_float(n, "alpha", 0.01f);
        break;
    case CP_ACT_CLIP:
        if (!clip_bounds(v, n, &a->alpha, &a->beta))
            return false;
        break;
    case CP_ACT_GELU:
        if (strcmp(cp_node_attr_string(n, "approximate", "none"), "tanh") == 0)
            a->kind = CP_ACT_GELU_TANH;
        break;
    case CP_ACT_HARD_SIGMOID:
        a->alpha = cp_node_attr_float(n, "alpha", 0.2f);
        a->beta = cp_node_attr_float(n, "beta", 0.5f);
        break;
    case CP_ACT_ELU:
        a->alpha = cp_node_attr_float(n, "alpha", 1.0f);
        break;
    default:
        break;
    }
    act_add(a, node);
    a->out = n->outputs[0];
    return true;
}

/* Whether binary node n reads a on one side and b on the other. */
static bool reads_pair(const struct cp_node *n, int32_t a, int32_t b)
{
    if (n->n_inputs != 2)
        return false;
    int32_t i0 = n->inputs[0], i1 = n->inputs[1];
    return (i0 == a && i1 == b) || (i0 == b && i1 == a);
}

/* The gate of x * gate(x): Sigmoid makes SiLU; HardSigmoid with alpha 1/6
 * and beta 1/2 makes HardSwish (PyTorch's export below opset 14, where
 * ONNX has no HardSwish). CP_ACT_BAD for anything else. */
static enum cp_act_kind gated_kind(const struct cp_node *gate)
{
    if (gate->op == CP_OP_SIGMOID)
        return CP_ACT_SILU;
    if (gate->op == CP_OP_HARD_SIGMOID &&
        fabsf(cp_node_attr_float(gate, "alpha", 0.2f) - 1.0f / 6.0f) <= 1e-5f &&
        fabsf(cp_node_attr_float(gate, "beta", 0.5f) - 0.5f) <= 1e-5f)
        return CP_ACT_HARD_SWISH;
    return CP_ACT_BAD;
}

bool cp_pattern_match_silu(const struct cp_pattern_view *v, int32_t x, struct cp_pattern_act *m)
{
    int32_t r[3];
    if (x < 0 || cp_pv_readers(v, x, r, 3) != 2 || !cp_pattern_private(v, x, 2))
        return false;
    for (int i = 0; i < 2; i++) {
        const struct cp_node *sg = cp_pv_node(v, r[i]), *mul = cp_pv_node(v, r[1 - i]);
        enum cp_act_kind kind = gated_kind(sg);
        if (kind == CP_ACT_BAD || mul->op != CP_OP_MUL || sg->n_inputs < 1 || sg->inputs[0] != x ||
            sg->n_outputs != 1 || mul->n_outputs != 1)
            continue;
        int32_t s = sg->outputs[0], only;
        if (s < 0 || s == x || !reads_pair(mul, x, s) || cp_pv_readers(v, s, &only, 1) != 1 ||
            only != r[1 - i] || !cp_pattern_private(v, s, 1))
            continue;
        act_init(m, kind, 2);
        act_add(m, r[i]);
        act_add(m, r[1 - i]);
        m->out = mul->outputs[0];
        return true;
    }
    return false;
}

/* ---- GELU ------------------------------------------------------------------------------- */

/* A binary node with x as one operand (the first when x_first) and a
 * scalar constant near val as the other. */
static bool is_binary_const(const struct cp_pattern_view *v, const struct cp_node *n, enum cp_op op,
                            int32_t x, float val, bool x_first)
{
    if (!n || n->op != op || n->n_outputs != 1 || n->n_inputs != 2)
        return false;
    int o = cp_pv_other(n, x);
    if (o < 0 || (x_first && o != 1))
        return false;
    return cp_pv_const_near(v, n->inputs[o], val, 1e-4f);
}

/* The multiplications after 1 + erf(.) (or 1 + tanh(.)) = `one_plus`:
 * Mul(x) then Mul(0.5), Mul(0.5) then Mul(x), or Mul(x * 0.5) with x * 0.5
 * private. Appends their nodes to a and sets a->out. */
static bool gelu_products(const struct cp_pattern_view *v, int32_t x, int32_t one_plus,
                          struct cp_pattern_act *a)
{
    int32_t mi = cp_pv_sole_reader(v, one_plus);
    const struct cp_node *m = cp_pv_node(v, mi);
    if (!m || m->op != CP_OP_MUL || m->n_outputs != 1)
        return false;
    int o = cp_pv_other(m, one_plus);
    if (o < 0)
        return false;
    int32_t other = m->inputs[o];
    act_add(a, mi);
    if (other == x || is_binary_const(v, m, CP_OP_MUL, one_plus, 0.5f, false)) {
        /* (1+erf) * x, then * 0.5; or (1+erf) * 0.5, then * x */
        int32_t m2i = cp_pv_sole_reader(v, m->outputs[0]);
        const struct cp_node *m2 = cp_pv_node(v, m2i);
        if (!m2)
            return false;
        int o2 = cp_pv_other(m2, m->outputs[0]);
        bool ok = other == x ? is_binary_const(v, m2, CP_OP_MUL, m->outputs[0], 0.5f, false)
                             : (m2->op == CP_OP_MUL && o2 >= 0 && m2->inputs[o2] == x);
        if (!ok)
            return false;
        act_add(a, m2i);
        a->out = m2->outputs[0];
        return true;
    }
    /* (x * 0.5) * (1+erf) */
    int32_t hi = cp_pv_producer(v, other);
    const struct cp_node *h = cp_pv_node(v, hi);
    if (!h || !cp_pattern_private(v, other, 1) || !is_binary_const(v, h, CP_OP_MUL, x, 0.5f, false))
        return false;
    act_add(a, hi);
    a->out = m->outputs[0];
    return true;
}

/* GELU from the Div (or Mul by 1/sqrt2) node `di` that reads x. */
static bool gelu_from(const struct cp_pattern_view *v, int32_t x, int32_t di,
                      struct cp_pattern_act *a)
{
    const struct cp_node *d = cp_pv_node(v, di);
    if (!is_binary_const(v, d, CP_OP_DIV, x, 1.41421356f, true) &&
        !is_binary_const(v, d, CP_OP_MUL, x, 0.70710678f, false))
        return false;
    int32_t ei = cp_pv_sole_reader(v, d->outputs[0]);
    const struct cp_node *e = cp_pv_node(v, ei);
    if (!e || e->op != CP_OP_ERF || e->n_outputs != 1)
        return false;
    int32_t ai = cp_pv_sole_reader(v, e->outputs[0]);
    const struct cp_node *ad = cp_pv_node(v, ai);
    if (!ad || !is_binary_const(v, ad, CP_OP_ADD, e->outputs[0], 1.0f, false))
        return false;
    act_init(a, CP_ACT_GELU, 2);
    act_add(a, di);
    act_add(a, ei);
    act_add(a, ai);
    return gelu_products(v, x, ad->outputs[0], a);
}

bool cp_pattern_match_gelu(const struct cp_pattern_view *v, int32_t x, struct cp_pattern_act *m)
{
    int32_t readers[8];
    size_t n = cp_pv_readers(v, x, readers, 8);
    for (size_t i = 0; i < n && i < 8; i++)
        if (gelu_from(v, x, readers[i], m))
            return true;
    return false;
}

int32_t cp_pattern_gelu_input(const struct cp_pattern_view *v, int32_t erf)
{
    const struct cp_node *e = cp_pv_node(v, erf);
    const struct cp_node *d =
        e && e->n_inputs ? cp_pv_node(v, cp_pv_producer(v, e->inputs[0])) : NULL;
    if (!d || (d->op != CP_OP_DIV && d->op != CP_OP_MUL) || d->n_inputs != 2)
        return -1;
    float c;
    return cp_pv_const_scalar(v, d->inputs[1], &c, NULL) ? d->inputs[0] : d->inputs[1];
}

/* The node of op `op` that makes input i of n; -1 when none. */
static int32_t input_op(const struct cp_pattern_view *v, const struct cp_node *n, size_t i,
                        enum cp_op op)
{
    if (!n || i >= n->n_inputs)
        return -1;
    int32_t p = cp_pv_producer(v, n->inputs[i]);
    return p >= 0 && cp_pv_node(v, p)->op == op ? p : -1;
}

/* Whether output 0 of node n has exactly one reader, node r. */
static bool only_read_by(const struct cp_pattern_view *v, int32_t n, int32_t r)
{
    int32_t c;
    const struct cp_node *nd = cp_pv_node(v, n);
    return nd && nd->n_outputs >= 1 && cp_pv_readers(v, nd->outputs[0], &c, 1) == 1 && c == r;
}

static bool node_reads(const struct cp_node *n, int32_t t)
{
    for (size_t i = 0; i < n->n_inputs; i++)
        if (n->inputs[i] == t)
            return true;
    return false;
}

bool cp_pattern_match_gelu_tanh(const struct cp_pattern_view *v, int32_t tanh, int32_t *nodes,
                                size_t *n_nodes, int32_t *x)
{
    /* tanh(c * (x + 0.044715 * x^3)) */
    const struct cp_node *e = cp_pv_node(v, tanh);
    int32_t m1 = e && e->op == CP_OP_TANH ? input_op(v, e, 0, CP_OP_MUL) : -1;
    const struct cp_node *mn = cp_pv_node(v, m1);
    float c;
    if (!mn || !only_read_by(v, m1, tanh) || mn->n_inputs != 2)
        return false;
    int32_t a1 = -1;
    for (size_t i = 0; i < 2 && a1 < 0; i++)
        if (input_op(v, mn, i, CP_OP_ADD) >= 0 &&
            cp_pv_const_scalar(v, mn->inputs[1 - i], &c, NULL))
            a1 = input_op(v, mn, i, CP_OP_ADD);
    const struct cp_node *an = cp_pv_node(v, a1);
    if (!an || !only_read_by(v, a1, m1) || an->n_inputs != 2)
        return false;
    int32_t xin = -1, cube[3];
    size_t n_cube = 0;
    for (size_t i = 0; i < 2 && xin < 0; i++) {
        /* input i is x, the other side a Mul/Pow chain over x */
        int32_t cand = an->inputs[i], cn = cp_pv_producer(v, an->inputs[1 - i]);
        n_cube = 0;
        for (int hop = 0; hop < 3 && cn >= 0; hop++) {
            const struct cp_node *k = cp_pv_node(v, cn);
            if (k->op != CP_OP_MUL && k->op != CP_OP_POW)
                break;
            cube[n_cube++] = cn;
            int32_t next = -1;
            for (size_t j = 0; j < k->n_inputs; j++)
                if (k->inputs[j] != cand && cp_pv_producer(v, k->inputs[j]) >= 0)
                    next = cp_pv_producer(v, k->inputs[j]);
            if (node_reads(k, cand) && next < 0) {
                xin = cand;
                break;
            }
            cn = next;
        }
    }
    if (xin < 0)
        return false;
    int32_t ai = cp_pv_sole_reader(v, e->outputs[0]);
    const struct cp_node *ad = cp_pv_node(v, ai);
    if (!ad || !is_binary_const(v, ad, CP_OP_ADD, e->outputs[0], 1.0f, false))
        return false;
    struct cp_pattern_act a;
    act_init(&a, CP_ACT_GELU_TANH, 0);
    if (!gelu_products(v, xin, ad->outputs[0], &a))
        return false;
    size_t k = 0;
    for (size_t i = 0; i < n_cube; i++)
        nodes[k++] = cube[i];
    nodes[k++] = a1;
    nodes[k++] = m1;
    nodes[k++] = tanh;
    nodes[k++] = ai;
    for (size_t i = 0; i < a.n_nodes; i++)
        nodes[k++] = a.nodes[i];
    *n_nodes = k;
    *x = xin;
    return true;
}

/* ---- the activation a fused op absorbs ------------------------------------------------------ */

bool cp_pattern_match_activation(const struct cp_pattern_view *v, int32_t x,
                                 struct cp_pattern_act *m)
{
    if (x < 0 || (size_t)x >= v->n_tensors(v->ctx) || cp_pv_is_output(v, x))
        return false;
    int32_t r[4];
    size_t n = cp_pv_readers(v, x, r, 4);
    if (n == 1 && cp_pattern_private(v, x, 1)) {
        const struct cp_node *a = cp_pv_node(v, r[0]);
        if (!cp_pattern_is_activation_op(a->op) || a->n_inputs < 1 || a->inputs[0] != x)
            return false;
        return single(v, r[0], m);
    }
    if (n != 2)
        return false;
    if (cp_pattern_match_silu(v, x, m))
        return true;
    return cp_pattern_private(v, x, 2) && cp_pattern_match_gelu(v, x, m) && m->reads == 2;
}

/* ---- residual, tail ----------------------------------------------------------------------- */

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

bool cp_pattern_match_residual(const struct cp_pattern_view *v, int32_t x, int32_t *add, int32_t *r)
{
    int32_t c = cp_pv_sole_reader(v, x);
    const struct cp_node *n = cp_pv_node(v, c);
    if (!n || n->op != CP_OP_ADD || n->n_outputs != 1)
        return false;
    int o = cp_pv_other(n, x);
    if (o < 0)
        return false;
    const struct cp_tensor *tx = cp_pv_tensor(v, x), *tr = cp_pv_tensor(v, n->inputs[o]);
    const struct cp_tensor *ty = cp_pv_tensor(v, n->outputs[0]);
    if (!tx || !tr || !ty || tr->dtype != CP_DTYPE_F32 || tx->dtype != CP_DTYPE_F32 ||
        !same_shape(&tx->shape, &tr->shape) || !same_shape(&tx->shape, &ty->shape))
        return false;
    *add = c;
    *r = n->inputs[o];
    return true;
}

static void tail_add_act(struct cp_pattern_tail *tl, const struct cp_pattern_act *a)
{
    tl->has_act = true;
    tl->act = *a;
    for (size_t i = 0; i < a->n_nodes && tl->n_nodes < sizeof tl->nodes / sizeof *tl->nodes; i++)
        tl->nodes[tl->n_nodes++] = a->nodes[i];
    tl->out = a->out;
}

static void tail_add_residual(const struct cp_pattern_view *v, struct cp_pattern_tail *tl,
                              int32_t add, int32_t r)
{
    tl->residual = r;
    if (tl->n_nodes < sizeof tl->nodes / sizeof *tl->nodes)
        tl->nodes[tl->n_nodes++] = add;
    tl->out = cp_pv_node(v, add)->outputs[0];
}

void cp_pattern_match_tail(const struct cp_pattern_view *v, int32_t t, struct cp_pattern_tail *tl)
{
    memset(tl, 0, sizeof *tl);
    tl->residual = -1;
    tl->out = t;
    struct cp_pattern_act a;
    int32_t add, r;
    if (cp_pattern_match_activation(v, t, &a)) {
        tail_add_act(tl, &a);
        if (cp_pattern_match_residual(v, tl->out, &add, &r))
            tail_add_residual(v, tl, add, r);
    } else if (cp_pattern_match_residual(v, t, &add, &r)) {
        tail_add_residual(v, tl, add, r);
        if (cp_pattern_match_activation(v, tl->out, &a)) {
            tail_add_act(tl, &a);
            tl->residual_first = true;
        }
    }
}
