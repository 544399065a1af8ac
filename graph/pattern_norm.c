/* The normalisations exporters write out op by op, as LayerNormFusionPass
 * and GroupNormFusionPass fuse them (see pattern.h). */
#include "graph/pattern_internal.h"

#include <string.h>

#define MAX_CHANNELS 65536

/* The axes of a reduction: the attribute, or a constant input (opset 18). */
static bool reduce_axes(const struct cp_pattern_view *v, const struct cp_node *n, int64_t *axes,
                        size_t *na)
{
    const struct cp_attr *a = cp_node_attr(n, "axes");
    if (a && a->type == CP_ATTR_INTS && a->n <= CP_MAX_RANK) {
        memcpy(axes, a->ints, a->n * sizeof *axes);
        *na = a->n;
        return true;
    }
    if (n->n_inputs > 1 && n->inputs[1] >= 0)
        return cp_pv_const_ints(v, n->inputs[1], axes, CP_MAX_RANK, na);
    return false;
}

/* A ReduceMean over the last axis of x only, keeping dims. */
static bool is_last_axis_mean(const struct cp_pattern_view *v, const struct cp_node *n, int32_t x)
{
    if (!n || n->op != CP_OP_REDUCE_MEAN || n->n_outputs != 1 || n->n_inputs < 1 ||
        n->inputs[0] != x || cp_node_attr_int(n, "keepdims", 1) != 1)
        return false;
    int rank = cp_pv_tensor(v, x)->shape.rank;
    int64_t axes[CP_MAX_RANK];
    size_t na;
    if (rank < 1 || !reduce_axes(v, n, axes, &na) || na != 1)
        return false;
    return axes[0] == -1 || axes[0] == rank - 1;
}

/* An optional affine step after t: Mul (scale) or Add (shift) by a
 * constant that broadcasts along `axis` of a rank-`rank` tensor with `n`
 * values, read by that node only. OUT: *node, *out, *src (unchanged when
 * absent). */
static bool affine_step(const struct cp_pattern_view *v, int32_t t, enum cp_op op, int rank,
                        int axis, int64_t n, int32_t *node, int32_t *out, int32_t *src)
{
    int32_t i = cp_pv_only_consumer(v, t, op);
    const struct cp_node *s = cp_pv_node(v, i);
    int o = s ? cp_pv_other(s, t) : -1;
    if (o < 0)
        return false;
    const struct cp_tensor *c = cp_pv_tensor(v, s->inputs[o]);
    if (c->shape.rank < 1 || c->shape.rank > rank)
        return false;
    int off = rank - c->shape.rank;
    for (int k = 0; k < c->shape.rank; k++)
        if (c->shape.dims[k].value != (k + off == axis ? n : 1))
            return false;
    if (axis < off)
        return false;
    size_t got;
    if (!cp_pv_const_f32_count(v, s->inputs[o], (size_t)n, &got) || got != (size_t)n)
        return false;
    *node = i;
    *out = s->outputs[0];
    *src = s->inputs[o];
    return true;
}

/* ---- LayerNorm ---------------------------------------------------------- */

bool cp_pattern_match_layernorm(const struct cp_pattern_view *v, int32_t ri,
                                struct cp_pattern_layernorm *m)
{
    const struct cp_node *rm = cp_pv_node(v, ri);
    if (!rm || rm->op != CP_OP_REDUCE_MEAN || rm->n_inputs < 1)
        return false;
    int32_t x = rm->inputs[0];
    const struct cp_tensor *tx = cp_pv_tensor(v, x);
    if (!tx || !is_last_axis_mean(v, rm, x) || tx->dtype != CP_DTYPE_F32)
        return false;
    memset(m, 0, sizeof *m);
    int rank = tx->shape.rank;
    m->x = x;
    m->h = tx->shape.dims[rank - 1].value;
    if (m->h < 1 || m->h > MAX_CHANNELS)
        return false;
    m->nodes[m->n_nodes++] = ri;
    int32_t i = cp_pv_only_consumer(v, rm->outputs[0], CP_OP_SUB);
    const struct cp_node *sub = cp_pv_node(v, i);
    if (!sub || sub->n_inputs < 2 || sub->inputs[0] != x || sub->inputs[1] != rm->outputs[0])
        return false;
    m->nodes[m->n_nodes++] = i;
    int32_t d = sub->outputs[0];
    int32_t readers[3];
    if (cp_pv_readers(v, d, readers, 3) != 2)
        return false;
    const struct cp_node *sq = NULL, *dv = NULL;
    int32_t sqi = -1, dvi = -1;
    for (size_t k = 0; k < 2; k++) {
        const struct cp_node *n = cp_pv_node(v, readers[k]);
        bool square = n->n_inputs >= 2 && n->inputs[0] == d &&
                      ((n->op == CP_OP_POW && cp_pv_const_near(v, n->inputs[1], 2.0f, 1e-5f)) ||
                       (n->op == CP_OP_MUL && n->inputs[1] == d));
        if (square && !sq) {
            sq = n;
            sqi = readers[k];
        } else if (n->op == CP_OP_DIV && n->n_inputs >= 1 && n->inputs[0] == d) {
            dv = n;
            dvi = readers[k];
        }
    }
    /* d is read by the square (once, or twice for Mul(d, d)) and the Div. */
    size_t want = sq && sq->op == CP_OP_MUL ? 3 : 2;
    if (!sq || !dv || !cp_pattern_private(v, d, want))
        return false;
    m->nodes[m->n_nodes++] = sqi;
    i = cp_pv_only_consumer(v, sq->outputs[0], CP_OP_REDUCE_MEAN);
    const struct cp_node *rm2 = cp_pv_node(v, i);
    if (!rm2 || !is_last_axis_mean(v, rm2, sq->outputs[0]))
        return false;
    m->nodes[m->n_nodes++] = i;
    i = cp_pv_only_consumer(v, rm2->outputs[0], CP_OP_ADD);
    const struct cp_node *ae = cp_pv_node(v, i);
    int o = ae ? cp_pv_other(ae, rm2->outputs[0]) : -1;
    float eps;
    bool known;
    if (o < 0 || !cp_pv_const_scalar(v, ae->inputs[o], &eps, &known) || (known && !(eps >= 0.0f)))
        return false;
    m->eps = ae->inputs[o];
    m->nodes[m->n_nodes++] = i;
    i = cp_pv_only_consumer(v, ae->outputs[0], CP_OP_SQRT);
    const struct cp_node *sr = cp_pv_node(v, i);
    if (!sr || !cp_pattern_private(v, sr->outputs[0], 1) || dv->n_inputs < 2 ||
        dv->inputs[1] != sr->outputs[0])
        return false;
    m->nodes[m->n_nodes++] = i;
    m->nodes[m->n_nodes++] = dvi;
    m->out = dv->outputs[0];
    m->gamma_src = m->beta_src = -1;
    int32_t step;
    if (affine_step(v, m->out, CP_OP_MUL, rank, rank - 1, m->h, &step, &m->out, &m->gamma_src))
        m->nodes[m->n_nodes++] = step;
    if (affine_step(v, m->out, CP_OP_ADD, rank, rank - 1, m->h, &step, &m->out, &m->beta_src))
        m->nodes[m->n_nodes++] = step;
    return true;
}

/* ---- GroupNorm ---------------------------------------------------------- */

/* A constant of n f32 values, all equal to val (any value when the view has
 * none). */
static bool all_equal(const struct cp_pattern_view *v, int32_t t, int64_t n, float val)
{
    size_t got = 0;
    if (n < 1 || !cp_pv_const_f32_count(v, t, (size_t)n, &got) || got != (size_t)n)
        return false;
    if (!v->knows_values)
        return true;
    const float *data = cp_pv_tensor(v, t)->data;
    for (size_t k = 0; k < got; k++)
        if (data[k] != val)
            return false;
    return true;
}

bool cp_pattern_match_groupnorm(const struct cp_pattern_view *v, int32_t ii,
                                struct cp_pattern_groupnorm *m)
{
    const struct cp_node *in = cp_pv_node(v, ii);
    if (!in || in->op != CP_OP_INSTANCE_NORMALIZATION || in->n_inputs != 3 || in->n_outputs != 1)
        return false;
    int32_t r1i = cp_pv_producer(v, in->inputs[0]);
    const struct cp_node *r1 = cp_pv_node(v, r1i);
    if (!r1 || r1->op != CP_OP_RESHAPE || r1->n_inputs < 1 ||
        !cp_pattern_private(v, in->inputs[0], 1))
        return false;
    memset(m, 0, sizeof *m);
    int32_t x = m->x = r1->inputs[0];
    const struct cp_tensor *tx = cp_pv_tensor(v, x);
    const struct cp_tensor *tr = cp_pv_tensor(v, in->inputs[0]);
    /* [N, C, spatial...] -> [N, G, C/G * spatial]; N may be dynamic (batch
     * profiles), the rest must be known. */
    if (!tx || tx->dtype != CP_DTYPE_F32 || tx->shape.rank < 3 || tr->shape.rank != 3)
        return false;
    int64_t c = tx->shape.dims[1].value, groups = tr->shape.dims[1].value, per = 1;
    for (int k = 2; k < tx->shape.rank; k++)
        per = tx->shape.dims[k].value >= 0 && per >= 0 ? per * tx->shape.dims[k].value : -1;
    if (groups < 1 || c < 1 || c % groups != 0 || c > MAX_CHANNELS || per < 0 ||
        tr->shape.dims[2].value != c / groups * per ||
        tr->shape.dims[0].value != tx->shape.dims[0].value ||
        (tx->shape.dims[0].value < 0 &&
         !(tx->shape.dims[0].sym && tr->shape.dims[0].sym &&
           strcmp(tx->shape.dims[0].sym, tr->shape.dims[0].sym) == 0)))
        return false;
    if (!all_equal(v, in->inputs[1], groups, 1.0f) || !all_equal(v, in->inputs[2], groups, 0.0f))
        return false;
    m->groups = groups;
    m->channels = c;
    m->nodes[m->n_nodes++] = r1i;
    m->nodes[m->n_nodes++] = ii;
    int32_t i = cp_pv_only_consumer(v, in->outputs[0], CP_OP_RESHAPE);
    const struct cp_node *r2 = cp_pv_node(v, i);
    if (!r2 || !cp_shape_equal(&cp_pv_tensor(v, r2->outputs[0])->shape, &tx->shape))
        return false;
    m->nodes[m->n_nodes++] = i;
    m->shape_src = r2->n_inputs > 1 ? r2->inputs[1] : -1;
    m->out = r2->outputs[0];
    int rank = tx->shape.rank;
    int32_t step;
    m->gamma_src = m->beta_src = -1;
    if (affine_step(v, m->out, CP_OP_MUL, rank, 1, c, &step, &m->out, &m->gamma_src))
        m->nodes[m->n_nodes++] = step;
    if (affine_step(v, m->out, CP_OP_ADD, rank, 1, c, &step, &m->out, &m->beta_src))
        m->nodes[m->n_nodes++] = step;
    m->has_act = cp_pattern_match_activation(v, m->out, &m->act);
    if (m->has_act) {
        for (size_t k = 0; k < m->act.n_nodes; k++)
            m->nodes[m->n_nodes++] = m->act.nodes[k];
        m->out = m->act.out;
    }
    return true;
}
