/* Scaled dot-product attention as FlashAttentionFusionPass fuses it (see
 * pattern.h and atc_bridge/passes/attention.c, which rewrites what this
 * finds). */
#include "graph/pattern_internal.h"

#include <math.h>
#include <string.h>

static const struct cp_tensor *f32_static(const struct cp_pattern_view *v, int32_t t, int rank)
{
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    if (!T || T->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&T->shape) ||
        (rank >= 0 && T->shape.rank != rank))
        return NULL;
    return T;
}

/* t is read by exactly one input slot of one live node and is not a graph
 * output: its producer can go with the pattern. */
static bool private_tensor(const struct cp_pattern_view *v, int32_t t)
{
    return cp_pattern_private(v, t, 1);
}

/* The live producer of intermediate t. */
static int32_t live_producer(const struct cp_pattern_view *v, int32_t t)
{
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    return T && T->kind == CP_TENSOR_INTERMEDIATE ? cp_pv_producer(v, t) : -1;
}

static bool add_node(struct cp_pattern_attention *m, int32_t n)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] == n)
            return false; /* shared between two chains: leave it */
    if (m->n_nodes >= CP_PATTERN_MAX_NODES)
        return false;
    m->nodes[m->n_nodes++] = n;
    return true;
}

/* A scalar f32 constant (any rank, one element). OUT: *val, NAN when the
 * view has no values. */
static bool scalar_const(const struct cp_pattern_view *v, int32_t t, float *val)
{
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    if (!T || !cp_pv_is_const(v, t) || T->dtype != CP_DTYPE_F32 || cp_shape_numel(&T->shape) != 1)
        return false;
    *val = NAN;
    if (v->knows_values)
        memcpy(val, T->data, sizeof *val);
    return true;
}

/* A plain matmul between two runtime operands: MatMul, or FusedMatMul
 * with no bias, activation, residual or transA. OUT: transB, alpha. */
static bool plain_matmul(const struct cp_node *n, bool *trans_b, float *alpha)
{
    *trans_b = false;
    *alpha = 1.0f;
    if (!n || n->n_outputs != 1 || n->n_inputs < 2)
        return false;
    if (n->op == CP_OP_MATMUL)
        return n->n_inputs == 2;
    if (n->op != CP_OP_FUSED_MATMUL || n->n_inputs != 2 ||
        cp_node_attr_string(n, "activation", "")[0] || cp_node_attr_int(n, "transA", 0))
        return false;
    *trans_b = cp_node_attr_int(n, "transB", 0) != 0;
    *alpha = cp_node_attr_float(n, "alpha", 1.0f);
    return true;
}

/* ---- operand chains ------------------------------------------------------ */

static bool perm_of(const struct cp_node *n, int64_t *perm)
{
    const struct cp_attr *a = cp_node_attr(n, "perm");
    if (!a || a->type != CP_ATTR_INTS || a->n != 4)
        return false;
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        perm[i] = a->ints[i];
        if (perm[i] < 0 || perm[i] > 3 || (seen >> perm[i] & 1))
            return false;
        seen |= 1 << perm[i];
    }
    return true;
}

static bool layout_is(const int64_t *l, int a, int b, int c, int d)
{
    return l[0] == a && l[1] == b && l[2] == c && l[3] == d;
}

/* A Mul or Div of `p`'s data input by a scalar constant that keeps its
 * shape: OUT: the factor it applies (NAN without values) and the data
 * input. */
static bool scalar_scale(const struct cp_pattern_view *v, const struct cp_node *p, float *factor,
                         int32_t *data)
{
    if (!p || (p->op != CP_OP_MUL && p->op != CP_OP_DIV) || p->n_inputs != 2 || p->n_outputs != 1 ||
        p->inputs[0] == p->inputs[1])
        return false;
    float c;
    int side = -1;
    if (scalar_const(v, p->inputs[1], &c))
        side = 0;
    else if (p->op == CP_OP_MUL && scalar_const(v, p->inputs[0], &c))
        side = 1;
    if (side < 0 || (p->op == CP_OP_DIV && c == 0.0f))
        return false;
    const struct cp_tensor *in = f32_static(v, p->inputs[side], -1);
    const struct cp_tensor *out = f32_static(v, p->outputs[0], -1);
    if (!in || !out || !cp_shape_equal(&in->shape, &out->shape))
        return false;
    *factor = p->op == CP_OP_MUL ? c : 1.0f / c;
    *data = p->inputs[side];
    return true;
}

/*
 * Find the source of operand tensor t. `layout` says how t's axes map to
 * the canonical [B, H, rows, depth]: t's axis a is canonical axis
 * layout[a]. Walks back through private Transposes, a head-splitting
 * Reshape and (when `scale` is given: Q and K) scalar Mul/Div, which
 * commute with the rest and join the attention's scale; the nodes passed
 * on the way to the chosen source join m. OUT: *src, *fmt, *scale
 * (multiplied by the factors absorbed).
 */
static bool operand_source(const struct cp_pattern_view *v, int32_t t, const int64_t *layout,
                           struct cp_pattern_attention *m, int32_t *src, const char **fmt,
                           float *scale)
{
    int64_t lt[4];
    memcpy(lt, layout, sizeof lt);
    int32_t chain[CP_PATTERN_MAX_NODES];
    size_t n_chain = 0, best_len = 0;
    int32_t cur = t, best = -1;
    const char *best_fmt = NULL;
    float factor = 1.0f, best_factor = 1.0f;
    if (layout_is(lt, 0, 1, 2, 3) || layout_is(lt, 0, 1, 3, 2)) {
        best = t;
        best_fmt = layout_is(lt, 0, 1, 2, 3) ? "BHND" : "BHDN";
    }
    bool packed = false; /* past the head split: only scales from here */
    while (n_chain < CP_PATTERN_MAX_NODES && private_tensor(v, cur)) {
        int32_t pi = live_producer(v, cur);
        const struct cp_node *p = cp_pv_node(v, pi);
        if (!p || p->n_inputs < 1 || p->n_outputs != 1)
            break;
        float f;
        int32_t data;
        if (scale && scalar_scale(v, p, &f, &data)) {
            factor *= f;
            chain[n_chain++] = pi;
            cur = data;
        } else if (!packed && p->op == CP_OP_TRANSPOSE && p->n_inputs == 1) {
            int64_t perm[4], ls[4];
            const struct cp_tensor *in = f32_static(v, p->inputs[0], 4);
            if (!in || !perm_of(p, perm))
                break;
            for (int a = 0; a < 4; a++)
                ls[perm[a]] = lt[a];
            memcpy(lt, ls, sizeof lt);
            chain[n_chain++] = pi;
            cur = p->inputs[0];
        } else if (!packed && p->op == CP_OP_RESHAPE && layout_is(lt, 0, 2, 1, 3)) {
            /* [B, rows, H*depth] -> [B, rows, H, depth] */
            const struct cp_tensor *in = f32_static(v, p->inputs[0], 3);
            const struct cp_dim *y = cp_pv_tensor(v, cur)->shape.dims;
            if (!in || in->shape.dims[0].value != y[0].value ||
                in->shape.dims[1].value != y[1].value ||
                in->shape.dims[2].value != y[2].value * y[3].value)
                break;
            chain[n_chain++] = pi;
            cur = p->inputs[0];
            packed = true;
        } else {
            break;
        }
        if (packed || layout_is(lt, 0, 1, 2, 3) || layout_is(lt, 0, 1, 3, 2)) {
            best = cur;
            best_fmt = packed ? "BNHD" : layout_is(lt, 0, 1, 2, 3) ? "BHND" : "BHDN";
            best_len = n_chain;
            best_factor = factor;
        }
    }
    if (best < 0)
        return false;
    for (size_t i = 0; i < best_len; i++)
        if (!add_node(m, chain[i]))
            return false;
    *src = best;
    *fmt = best_fmt;
    if (scale)
        *scale *= best_factor;
    return true;
}

/* The head merge after the output: Transpose(0,2,1,3) -> Reshape to
 * [B, N, H*Dv], both private. Else the 4-D output stays. */
static bool output_sink(const struct cp_pattern_view *v, int32_t y, struct cp_pattern_attention *m)
{
    m->out = y;
    m->out_fmt = "BHND";
    if (!private_tensor(v, y))
        return true;
    int32_t ti = cp_pv_sole_consumer(v, y);
    const struct cp_node *t = cp_pv_node(v, ti);
    int64_t perm[4];
    if (!t || t->op != CP_OP_TRANSPOSE || t->n_outputs != 1 || !perm_of(t, perm) ||
        !layout_is(perm, 0, 2, 1, 3) || !private_tensor(v, t->outputs[0]))
        return true;
    int32_t ri = cp_pv_sole_consumer(v, t->outputs[0]);
    const struct cp_node *r = cp_pv_node(v, ri);
    if (!r || r->op != CP_OP_RESHAPE || r->n_outputs != 1 || r->inputs[0] != t->outputs[0])
        return true;
    const struct cp_tensor *u = f32_static(v, t->outputs[0], 4),
                           *z = f32_static(v, r->outputs[0], 3);
    if (!u || !z)
        return true;
    const struct cp_dim *ud = u->shape.dims, *zd = z->shape.dims;
    if (zd[0].value != ud[0].value || zd[1].value != ud[1].value ||
        zd[2].value != ud[2].value * ud[3].value)
        return true;
    if (!add_node(m, ti) || !add_node(m, ri))
        return false;
    m->out = r->outputs[0];
    m->out_fmt = "BNHD";
    return true;
}

/* ---- the pattern ------------------------------------------------------------ */

static bool same_dims(const struct cp_tensor *a, const struct cp_tensor *b)
{
    return cp_shape_equal(&a->shape, &b->shape);
}

/* The mask: f32, static, rank <= 4, broadcasting to the scores' shape. */
static bool mask_fits(const struct cp_pattern_view *v, int32_t t, const struct cp_tensor *scores)
{
    const struct cp_tensor *M = f32_static(v, t, -1);
    if (!M || M->shape.rank > 4)
        return false;
    for (int i = 0; i < M->shape.rank; i++) {
        int64_t d = M->shape.dims[i].value, s = scores->shape.dims[4 - M->shape.rank + i].value;
        if (d != 1 && d != s)
            return false;
    }
    return true;
}

/* Whether t is a plain matmul's output, perhaps through a scalar scale. */
static bool reaches_matmul(const struct cp_pattern_view *v, int32_t t)
{
    const struct cp_node *p = cp_pv_node(v, live_producer(v, t));
    float f;
    int32_t data;
    bool trans;
    if (p && scalar_scale(v, p, &f, &data))
        p = cp_pv_node(v, live_producer(v, data));
    return p && plain_matmul(p, &trans, &f);
}

bool cp_pattern_match_attention(const struct cp_pattern_view *v, int32_t si,
                                struct cp_pattern_attention *m)
{
    memset(m, 0, sizeof *m);
    m->mask = -1;
    const struct cp_node *sm = cp_pv_node(v, si);
    if (!sm || sm->op != CP_OP_SOFTMAX || sm->n_inputs != 1 || sm->n_outputs != 1)
        return false;
    const struct cp_tensor *x = f32_static(v, sm->inputs[0], 4);
    if (!x || !f32_static(v, sm->outputs[0], 4))
        return false;
    /* the default axis is 1 before opset 13 (and in a graph that names no
     * opset), the last axis from 13 on */
    int64_t axis = cp_node_attr_int(sm, "axis", cp_pv_opset_at_least(v, 13) ? -1 : 1);
    if (axis != 3 && axis != -1)
        return false;

    /* forward: Softmax -> MatMul(., V) */
    if (!private_tensor(v, sm->outputs[0]))
        return false;
    int32_t pvi = cp_pv_sole_consumer(v, sm->outputs[0]);
    const struct cp_node *pv = cp_pv_node(v, pvi);
    bool v_trans;
    float pv_alpha;
    if (!pv || !plain_matmul(pv, &v_trans, &pv_alpha) || pv_alpha != 1.0f ||
        pv->inputs[0] != sm->outputs[0] || pv->inputs[1] == sm->outputs[0])
        return false;

    /* backward: [Add(mask)] <- [Mul/Div scale] <- MatMul(Q, Kᵀ) */
    add_node(m, si);
    add_node(m, pvi);
    float scale = 1.0f;
    int32_t cur = sm->inputs[0];
    int32_t pi = live_producer(v, cur);
    const struct cp_node *p = cp_pv_node(v, pi);
    if (p && p->op == CP_OP_ADD && p->n_inputs == 2 && p->n_outputs == 1 &&
        p->inputs[0] != p->inputs[1] && private_tensor(v, cur)) {
        /* the score side is the one that leads to the matmul */
        for (int side = 0; side < 2; side++)
            if (reaches_matmul(v, p->inputs[side]) && f32_static(v, p->inputs[side], 4) &&
                same_dims(cp_pv_tensor(v, p->inputs[side]), x) &&
                mask_fits(v, p->inputs[1 - side], x)) {
                m->mask = p->inputs[1 - side];
                cur = p->inputs[side];
                break;
            }
        if (m->mask >= 0) {
            add_node(m, pi);
            pi = live_producer(v, cur);
            p = cp_pv_node(v, pi);
        }
    }
    float f;
    int32_t data;
    if (p && private_tensor(v, cur) && scalar_scale(v, p, &f, &data) &&
        same_dims(cp_pv_tensor(v, data), x)) {
        scale = f;
        add_node(m, pi);
        cur = data;
        pi = live_producer(v, cur);
        p = cp_pv_node(v, pi);
    }
    bool k_trans;
    float qk_alpha;
    if (!p || !private_tensor(v, cur) || !plain_matmul(p, &k_trans, &qk_alpha) ||
        p->inputs[0] == p->inputs[1] || !same_dims(cp_pv_tensor(v, cur), x))
        return false;
    add_node(m, pi);
    m->scale = scale * qk_alpha;
    m->qk_node = pi;

    /* operands: Q [B,H,N,D], Kᵀ [B,H,D,M] (K [B,H,M,D] with transB), V [B,H,M,Dv] */
    const struct cp_tensor *q = f32_static(v, p->inputs[0], 4), *k = f32_static(v, p->inputs[1], 4),
                           *vv = f32_static(v, pv->inputs[1], 4),
                           *y = f32_static(v, pv->outputs[0], 4);
    if (!q || !k || !vv || !y)
        return false;
    const struct cp_dim *qd = q->shape.dims, *kd = k->shape.dims, *vd = vv->shape.dims;
    int64_t B = qd[0].value, H = qd[1].value, N = qd[2].value, D = qd[3].value;
    int64_t M = k_trans ? kd[2].value : kd[3].value;
    int64_t kdepth = k_trans ? kd[3].value : kd[2].value;
    int64_t vrows = v_trans ? vd[3].value : vd[2].value;
    if (kd[0].value != B || kd[1].value != H || vd[0].value != B || vd[1].value != H ||
        kdepth != D || vrows != M || x->shape.dims[2].value != N || x->shape.dims[3].value != M)
        return false;
    m->heads = H;

    static const int64_t canon[4] = {0, 1, 2, 3}, swapped[4] = {0, 1, 3, 2};
    if (!operand_source(v, p->inputs[0], canon, m, &m->q, &m->q_fmt, &m->scale) ||
        !operand_source(v, p->inputs[1], k_trans ? canon : swapped, m, &m->k, &m->k_fmt,
                        &m->scale) ||
        !operand_source(v, pv->inputs[1], v_trans ? swapped : canon, m, &m->v, &m->v_fmt, NULL) ||
        !output_sink(v, pv->outputs[0], m))
        return false;
    return true;
}
