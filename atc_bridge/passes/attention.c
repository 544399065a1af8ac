/*
 * The attention pass family (see pass.h): FlashAttentionFusionPass.
 *
 * It finds scaled dot-product attention written out as ONNX ops,
 *
 *   MatMul(Q, Kᵀ) -> [Mul or Div by a scalar] -> [Add(mask)] -> Softmax(last axis)
 *                 -> MatMul(., V)
 *
 * and replaces it by one FusedAttention node (graph.h), whose kernels never
 * hold the N x M scores. Each operand is [B, H, rows, depth] (Kᵀ
 * [B, H, depth, keys]); a MatMul may also be a FusedMatMul with nothing
 * fused into it (transB = 1 reading K or V transposed, alpha folded into
 * the scale). The scale may also be applied to Q or K before the MatMul
 * (Mul or Div by a scalar anywhere in their chains); all factors multiply
 * into the node's `scale`. The mask is the Add's other operand, whatever
 * computes it.
 *
 * The head split around it is absorbed when it is private to the attention:
 * walking back from Q, K and V through Transposes (and one Reshape that
 * splits [B, rows, H*depth] into [B, rows, H, depth], and scalar scales of
 * Q and K) while each tensor has no other reader, the pass takes the
 * furthest source whose memory order is one of FusedAttention's formats:
 * BNHD (the packed 3-D tensor before the split, as PyTorch exports it),
 * BHND or BHDN. Forward from the
 * output, Transpose(0,2,1,3) then Reshape to [B, N, H*Dv] (the head merge)
 * becomes out_format BNHD. Without those chains the 4-D tensors are used
 * as they are.
 *
 * The pass leaves the pattern alone unless every intermediate tensor has
 * exactly one reader and is not a graph output, shapes are static, dtypes
 * f32, batch dimensions match without broadcasting, and the mask
 * broadcasts to [B, H, N, M] without widening the scores.
 */
#include "atc_bridge/passes/pass.h"
#include "atc_bridge/passes/rewrite.h"
#include "graph/pattern.h"

#include <stdio.h>
#include <string.h>

#define ATT_MAX_NODES 16

/* What one match found. */
struct att_match {
    int32_t nodes[ATT_MAX_NODES]; /* every node the fused one replaces */
    size_t n_nodes;
    int32_t q, k, v, mask, out;                  /* tensors of the new node */
    const char *q_fmt, *k_fmt, *v_fmt, *out_fmt; /* formats */
    int64_t heads;
    float scale;
    const char *name_from; /* node the new name derives from */
};

static const struct cp_node *live_producer(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = t >= 0 ? cp_graph_tensor(g, t) : NULL;
    if (!T || T->kind != CP_TENSOR_INTERMEDIATE || T->producer < 0)
        return NULL;
    const struct cp_node *n = cp_graph_node(g, T->producer);
    return n && !n->dead ? n : NULL;
}

/* t is read by exactly one input slot of one live node and is not a graph
 * output: its producer can go with the pattern. */
static bool private_tensor(const struct cp_graph *g, int32_t t)
{
    return !cp_rw_is_graph_output(g, t) && cp_rw_n_uses(g, t) == 1;
}

static const struct cp_tensor *f32_static(const struct cp_graph *g, int32_t t, int rank)
{
    const struct cp_tensor *T = t >= 0 ? cp_graph_tensor(g, t) : NULL;
    if (!T || T->dtype != CP_DTYPE_F32 || !cp_shape_is_static(&T->shape) ||
        (rank >= 0 && T->shape.rank != rank))
        return NULL;
    return T;
}

static bool add_node(struct att_match *m, int32_t n)
{
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i] == n)
            return false; /* shared between two chains: leave it */
    if (m->n_nodes >= ATT_MAX_NODES)
        return false;
    m->nodes[m->n_nodes++] = n;
    return true;
}

static int32_t node_index(const struct cp_graph *g, const struct cp_node *n)
{
    const struct cp_tensor *t = cp_graph_tensor(g, n->outputs[0]);
    return t->producer;
}

/* A scalar f32 constant (any rank, one element). */
static bool scalar_const(const struct cp_graph *g, int32_t t, float *v)
{
    const struct cp_tensor *T = t >= 0 ? cp_graph_tensor(g, t) : NULL;
    const void *data = cp_rw_const_data(g, t);
    if (!T || !data || T->dtype != CP_DTYPE_F32 || cp_shape_numel(&T->shape) != 1)
        return false;
    memcpy(v, data, sizeof *v);
    return true;
}

/* A plain matmul between two runtime operands: MatMul, or FusedMatMul
 * with no bias, activation, residual or transA. OUT: transB, alpha. */
static bool plain_matmul(const struct cp_node *n, bool *trans_b, float *alpha)
{
    *trans_b = false;
    *alpha = 1.0f;
    if (n->n_outputs != 1 || n->n_inputs < 2)
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
    size_t np = 0;
    if (!cp_rw_attr_ints(n, "perm", perm, 4, &np) || np != 4)
        return false;
    int seen = 0;
    for (int a = 0; a < 4; a++) {
        if (perm[a] < 0 || perm[a] > 3 || (seen >> perm[a] & 1))
            return false;
        seen |= 1 << perm[a];
    }
    return true;
}

static bool layout_is(const int64_t *l, int a, int b, int c, int d)
{
    return l[0] == a && l[1] == b && l[2] == c && l[3] == d;
}

/* A Mul or Div of `p`'s data input by a scalar constant that keeps its
 * shape: OUT: the factor it applies and the data input. */
static bool scalar_scale(const struct cp_graph *g, const struct cp_node *p, float *factor,
                         int32_t *data)
{
    if ((p->op != CP_OP_MUL && p->op != CP_OP_DIV) || p->n_inputs != 2 || p->n_outputs != 1 ||
        p->inputs[0] == p->inputs[1])
        return false;
    float c;
    int side = -1;
    if (scalar_const(g, p->inputs[1], &c))
        side = 0;
    else if (p->op == CP_OP_MUL && scalar_const(g, p->inputs[0], &c))
        side = 1;
    if (side < 0 || (p->op == CP_OP_DIV && c == 0.0f))
        return false;
    const struct cp_tensor *in = f32_static(g, p->inputs[side], -1);
    const struct cp_tensor *out = f32_static(g, p->outputs[0], -1);
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
static bool operand_source(const struct cp_graph *g, int32_t t, const int64_t *layout,
                           struct att_match *m, int32_t *src, const char **fmt, float *scale)
{
    int64_t lt[4];
    memcpy(lt, layout, sizeof lt);
    int32_t chain[ATT_MAX_NODES];
    size_t n_chain = 0, best_len = 0;
    int32_t cur = t, best = -1;
    const char *best_fmt = NULL;
    float factor = 1.0f, best_factor = 1.0f;
    if (layout_is(lt, 0, 1, 2, 3) || layout_is(lt, 0, 1, 3, 2)) {
        best = t;
        best_fmt = layout_is(lt, 0, 1, 2, 3) ? "BHND" : "BHDN";
    }
    bool packed = false; /* past the head split: only scales from here */
    while (n_chain < ATT_MAX_NODES && private_tensor(g, cur)) {
        const struct cp_node *p = live_producer(g, cur);
        if (!p || p->n_inputs < 1 || p->n_outputs != 1)
            break;
        float f;
        int32_t data;
        if (scale && scalar_scale(g, p, &f, &data)) {
            factor *= f;
            chain[n_chain++] = node_index(g, p);
            cur = data;
        } else if (!packed && p->op == CP_OP_TRANSPOSE && p->n_inputs == 1) {
            int64_t perm[4], ls[4];
            const struct cp_tensor *in = f32_static(g, p->inputs[0], 4);
            if (!in || !perm_of(p, perm))
                break;
            for (int a = 0; a < 4; a++)
                ls[perm[a]] = lt[a];
            memcpy(lt, ls, sizeof lt);
            chain[n_chain++] = node_index(g, p);
            cur = p->inputs[0];
        } else if (!packed && p->op == CP_OP_RESHAPE && layout_is(lt, 0, 2, 1, 3)) {
            /* [B, rows, H*depth] -> [B, rows, H, depth] */
            const struct cp_tensor *in = f32_static(g, p->inputs[0], 3);
            const struct cp_dim *y = cp_graph_tensor(g, cur)->shape.dims;
            if (!in || in->shape.dims[0].value != y[0].value ||
                in->shape.dims[1].value != y[1].value ||
                in->shape.dims[2].value != y[2].value * y[3].value)
                break;
            chain[n_chain++] = node_index(g, p);
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
static bool output_sink(const struct cp_graph *g, int32_t y, struct att_match *m)
{
    m->out = y;
    m->out_fmt = "BHND";
    if (!private_tensor(g, y))
        return true;
    int32_t ti = cp_rw_sole_consumer(g, y);
    const struct cp_node *t = ti >= 0 ? cp_graph_node(g, ti) : NULL;
    int64_t perm[4];
    if (!t || t->op != CP_OP_TRANSPOSE || t->n_outputs != 1 || !perm_of(t, perm) ||
        !layout_is(perm, 0, 2, 1, 3) || !private_tensor(g, t->outputs[0]))
        return true;
    int32_t ri = cp_rw_sole_consumer(g, t->outputs[0]);
    const struct cp_node *r = ri >= 0 ? cp_graph_node(g, ri) : NULL;
    if (!r || r->op != CP_OP_RESHAPE || r->n_outputs != 1 || r->inputs[0] != t->outputs[0])
        return true;
    const struct cp_tensor *u = f32_static(g, t->outputs[0], 4),
                           *z = f32_static(g, r->outputs[0], 3);
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
static bool mask_fits(const struct cp_graph *g, int32_t t, const struct cp_tensor *scores)
{
    const struct cp_tensor *M = f32_static(g, t, -1);
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
static bool reaches_matmul(const struct cp_graph *g, int32_t t)
{
    const struct cp_node *p = live_producer(g, t);
    float f;
    int32_t data;
    bool trans;
    if (p && scalar_scale(g, p, &f, &data))
        p = live_producer(g, data);
    return p && plain_matmul(p, &trans, &f);
}

/* Try the attention ending in Softmax node si. */
static bool match_at(const struct cp_graph *g, int32_t si, struct att_match *m)
{
    memset(m, 0, sizeof *m);
    m->mask = -1;
    const struct cp_node *sm = cp_graph_node(g, si);
    if (sm->n_inputs != 1 || sm->n_outputs != 1)
        return false;
    const struct cp_tensor *x = f32_static(g, sm->inputs[0], 4);
    if (!x || !f32_static(g, sm->outputs[0], 4))
        return false;
    int64_t axis = cp_node_attr_int(sm, "axis", cp_graph_opset(g) < 13 ? 1 : -1);
    if (axis != 3 && axis != -1)
        return false;

    /* forward: Softmax -> MatMul(., V) */
    if (!private_tensor(g, sm->outputs[0]))
        return false;
    int32_t pvi = cp_rw_sole_consumer(g, sm->outputs[0]);
    const struct cp_node *pv = pvi >= 0 ? cp_graph_node(g, pvi) : NULL;
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
    const struct cp_node *p = live_producer(g, cur);
    if (p && p->op == CP_OP_ADD && p->n_inputs == 2 && p->n_outputs == 1 &&
        p->inputs[0] != p->inputs[1] && private_tensor(g, cur)) {
        /* the score side is the one that leads to the matmul */
        for (int side = 0; side < 2; side++)
            if (reaches_matmul(g, p->inputs[side]) && f32_static(g, p->inputs[side], 4) &&
                same_dims(cp_graph_tensor(g, p->inputs[side]), x) &&
                mask_fits(g, p->inputs[1 - side], x)) {
                m->mask = p->inputs[1 - side];
                cur = p->inputs[side];
                break;
            }
        if (m->mask >= 0) {
            add_node(m, node_index(g, p));
            p = live_producer(g, cur);
        }
    }
    float f;
    int32_t data;
    if (p && private_tensor(g, cur) && scalar_scale(g, p, &f, &data) &&
        same_dims(cp_graph_tensor(g, data), x)) {
        scale = f;
        add_node(m, node_index(g, p));
        cur = data;
        p = live_producer(g, cur);
    }
    bool k_trans;
    float qk_alpha;
    if (!p || !private_tensor(g, cur) || !plain_matmul(p, &k_trans, &qk_alpha) ||
        p->inputs[0] == p->inputs[1] || !same_dims(cp_graph_tensor(g, cur), x))
        return false;
    int32_t qki = node_index(g, p);
    add_node(m, qki);
    m->scale = scale * qk_alpha;
    m->name_from = p->name;

    /* operands: Q [B,H,N,D], Kᵀ [B,H,D,M] (K [B,H,M,D] with transB), V [B,H,M,Dv] */
    const struct cp_tensor *q = f32_static(g, p->inputs[0], 4), *k = f32_static(g, p->inputs[1], 4),
                           *v = f32_static(g, pv->inputs[1], 4),
                           *y = f32_static(g, pv->outputs[0], 4);
    if (!q || !k || !v || !y)
        return false;
    const struct cp_dim *qd = q->shape.dims, *kd = k->shape.dims, *vd = v->shape.dims;
    int64_t B = qd[0].value, H = qd[1].value, N = qd[2].value, D = qd[3].value;
    int64_t M = k_trans ? kd[2].value : kd[3].value;
    int64_t kdepth = k_trans ? kd[3].value : kd[2].value;
    int64_t vrows = v_trans ? vd[3].value : vd[2].value;
    if (kd[0].value != B || kd[1].value != H || vd[0].value != B || vd[1].value != H ||
        kdepth != D || vrows != M || x->shape.dims[2].value != N || x->shape.dims[3].value != M)
        return false;
    m->heads = H;

    static const int64_t canon[4] = {0, 1, 2, 3}, swapped[4] = {0, 1, 3, 2};
    if (!operand_source(g, p->inputs[0], canon, m, &m->q, &m->q_fmt, &m->scale) ||
        !operand_source(g, p->inputs[1], k_trans ? canon : swapped, m, &m->k, &m->k_fmt,
                        &m->scale) ||
        !operand_source(g, pv->inputs[1], v_trans ? swapped : canon, m, &m->v, &m->v_fmt, NULL) ||
        !output_sink(g, pv->outputs[0], m))
        return false;
    return true;
}

/* "/blk/attn1/MatMul" -> "/blk/attn1/FusedAttention", made unique. */
static void fused_name(const struct cp_graph *g, const char *from, char *out, size_t cap)
{
    char base[512];
    const char *slash = strrchr(from, '/');
    int len = slash ? (int)(slash - from) : 0;
    snprintf(base, sizeof base, "%.*s%sFusedAttention", len, from, slash ? "/" : "");
    cp_rw_unique_node_name(g, base, out, cap);
}

static enum cp_status replace(struct cp_pass_ctx *ctx, const struct att_match *m)
{
    struct cp_graph *g = ctx->g;
    char name[600];
    fused_name(g, m->name_from, name, sizeof name);
    for (size_t i = 0; i < m->n_nodes; i++)
        cp_rw_kill(g, m->nodes[i]);
    int32_t ins[4] = {m->q, m->k, m->v, m->mask};
    int32_t idx;
    enum cp_status st =
        cp_rw_add_node(g, name, "FusedAttention", CP_DOMAIN, ins, m->mask >= 0 ? 4 : 3, &m->out, 1,
                       m->nodes, m->n_nodes, &idx, ctx->d);
    if (st != CP_OK)
        return st;
    if (cp_node_set_int(g, idx, "num_heads", m->heads) != CP_OK ||
        cp_node_set_float(g, idx, "scale", m->scale) != CP_OK ||
        cp_node_set_string(g, idx, "q_format", m->q_fmt) != CP_OK ||
        cp_node_set_string(g, idx, "k_format", m->k_fmt) != CP_OK ||
        cp_node_set_string(g, idx, "v_format", m->v_fmt) != CP_OK ||
        cp_node_set_string(g, idx, "out_format", m->out_fmt) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory creating node '%s'", name);
    cp_log_msg(ctx->log, CP_LOG_DEBUG,
               "FlashAttentionFusionPass: '%s' replaces %zu nodes (q %s, k %s, v %s, out %s)", name,
               m->n_nodes, m->q_fmt, m->k_fmt, m->v_fmt, m->out_fmt);
    return CP_OK;
}

static enum cp_status flash_attention_run(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    size_t n = cp_graph_n_nodes(ctx->g);
    for (size_t i = 0; i < n; i++) {
        const struct cp_node *sm = cp_graph_node(ctx->g, (int32_t)i);
        if (sm->dead || sm->op != CP_OP_SOFTMAX)
            continue;
        struct att_match m;
        if (!match_at(ctx->g, (int32_t)i, &m))
            continue;
        enum cp_status st = replace(ctx, &m);
        if (st != CP_OK)
            return st;
        *changed = true;
    }
    return CP_OK;
}

const struct cp_pass cp_attention_passes[] = {
    {CP_PASS_FLASH_ATTENTION, "GraphFusion",
     "MatMul(Q,K^T) -> scale -> [mask Add] -> Softmax -> MatMul(V), with its head split and merge, "
     "to one FusedAttention",
     flash_attention_run},
    {NULL, NULL, NULL, NULL},
};
