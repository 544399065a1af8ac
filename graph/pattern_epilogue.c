/* The epilogues ConvBiasActivationFusionPass and
 * MatMulBiasActivationFusionPass fuse into a Conv, MatMul or Gemm, and the
 * BatchNormalization ConvBatchNormFusionPass folds into a Conv (see
 * pattern.h). Bias detection is one function for both passes:
 * axis_constant, a constant that broadcasts along one axis only. */
#include "graph/pattern_internal.h"

#include <string.h>

/* A constant that broadcasts along one axis only (`axis` of a tensor of
 * rank `rank`, counted from the front) with `n` elements there: [n],
 * [n,1,1], [1,n,1,1], ... */
static bool axis_constant(const struct cp_pattern_view *v, int32_t t, int rank, int axis, int64_t n)
{
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    if (!T || T->shape.rank < 0 || T->shape.rank > rank || n > CP_PATTERN_MAX_BIAS)
        return false;
    int off = rank - T->shape.rank; /* right-aligned broadcasting */
    for (int i = 0; i < T->shape.rank; i++) {
        int64_t want = i + off == axis ? n : 1;
        if (T->shape.dims[i].value != want)
            return false;
    }
    if (axis < off && n != 1)
        return false;
    size_t got;
    return cp_pv_const_f32_count(v, t, (size_t)n, &got) && got == (size_t)n;
}

static void init(struct cp_pattern_epilogue *m, int32_t op)
{
    memset(m, 0, sizeof *m);
    m->op_node = op;
    m->bias_add = m->bias_src = m->bias_c = m->c_residual = -1;
    m->nodes[m->n_nodes++] = op;
}

static void take_tail(struct cp_pattern_epilogue *m)
{
    for (size_t i = 0; i < m->tail.n_nodes && m->n_nodes < CP_PATTERN_MAX_NODES; i++)
        m->nodes[m->n_nodes++] = m->tail.nodes[i];
}

/* ---- Conv ------------------------------------------------------------------------- */

bool cp_pattern_match_conv(const struct cp_pattern_view *v, int32_t ci,
                           struct cp_pattern_epilogue *m)
{
    const struct cp_node *c = cp_pv_node(v, ci);
    if (!c || c->op != CP_OP_CONV || c->n_outputs != 1 || c->n_inputs < 2 || c->outputs[0] < 0)
        return false;
    int32_t y = c->outputs[0];
    const struct cp_tensor *ty = cp_pv_tensor(v, y);
    if (ty->dtype != CP_DTYPE_F32 || ty->shape.rank < 3)
        return false;
    init(m, ci);
    m->n = ty->shape.dims[1].value;
    int32_t bias = c->n_inputs > 2 ? c->inputs[2] : -1;
    /* A bias-less Conv followed by a per-channel constant Add: the bias. */
    if (bias < 0 && m->n > 0 && m->n <= CP_PATTERN_MAX_BIAS) {
        int32_t a = cp_pv_only_consumer(v, y, CP_OP_ADD);
        const struct cp_node *an = cp_pv_node(v, a);
        int o = an ? cp_pv_other(an, y) : -1;
        if (o >= 0 && axis_constant(v, an->inputs[o], ty->shape.rank, 1, m->n)) {
            m->bias_add = a;
            m->bias_src = an->inputs[o];
            m->nodes[m->n_nodes++] = a;
            y = an->outputs[0];
        }
    }
    cp_pattern_match_tail(v, y, &m->tail);
    if (m->bias_add < 0 && !m->tail.has_act && m->tail.residual < 0)
        return false; /* nothing to fuse: a plain Conv stays a Conv */
    take_tail(m);
    return true;
}

/* ---- MatMul and Gemm ------------------------------------------------------------------ */

/* The 1-D bias Add after a MatMul result y of last dimension n. */
static bool match_bias(const struct cp_pattern_view *v, int32_t y, int64_t n, int32_t *add,
                       int32_t *src)
{
    const struct cp_tensor *ty = cp_pv_tensor(v, y);
    int32_t a = cp_pv_only_consumer(v, y, CP_OP_ADD);
    if (a < 0 || n <= 0 || n > CP_PATTERN_MAX_BIAS || ty->shape.rank < 1)
        return false;
    const struct cp_node *an = cp_pv_node(v, a);
    int o = cp_pv_other(an, y);
    if (o < 0 || !axis_constant(v, an->inputs[o], ty->shape.rank, ty->shape.rank - 1, n))
        return false;
    *add = a;
    *src = an->inputs[o];
    return true;
}

bool cp_pattern_match_matmul(const struct cp_pattern_view *v, int32_t mi,
                             struct cp_pattern_epilogue *m)
{
    const struct cp_node *mm = cp_pv_node(v, mi);
    if (!mm || (mm->op != CP_OP_MATMUL && mm->op != CP_OP_FUSED_MATMUL))
        return false;
    bool own = mm->op == CP_OP_FUSED_MATMUL;
    if (mm->n_inputs < 2 || mm->n_inputs > (own ? 3u : 2u) || mm->n_outputs != 1 ||
        mm->outputs[0] < 0)
        return false;
    if (own && (cp_node_attr_string(mm, "activation", "")[0] || cp_node_attr_int(mm, "transA", 0)))
        return false;
    const struct cp_tensor *tb = cp_pv_tensor(v, mm->inputs[1]);
    const struct cp_tensor *ta = cp_pv_tensor(v, mm->inputs[0]);
    int32_t y = mm->outputs[0];
    const struct cp_tensor *ty = cp_pv_tensor(v, y);
    if (!ta || !tb || tb->kind != CP_TENSOR_INITIALIZER || tb->shape.rank != 2 ||
        ta->shape.rank < 2 || ty->dtype != CP_DTYPE_F32 || tb->dtype != CP_DTYPE_F32)
        return false;
    init(m, mi);
    m->n = tb->shape.dims[cp_node_attr_int(mm, "transB", 0) ? 0 : 1].value;
    int32_t bias = mm->n_inputs > 2 ? mm->inputs[2] : -1;
    if (bias < 0 && match_bias(v, y, m->n, &m->bias_add, &m->bias_src)) {
        m->nodes[m->n_nodes++] = m->bias_add;
        y = cp_pv_node(v, m->bias_add)->outputs[0];
    }
    cp_pattern_match_tail(v, y, &m->tail);
    if (m->bias_add < 0 && !m->tail.has_act && m->tail.residual < 0)
        return false;
    take_tail(m);
    return true;
}

bool cp_pattern_match_gemm(const struct cp_pattern_view *v, int32_t gi,
                           struct cp_pattern_epilogue *m)
{
    const struct cp_node *gm = cp_pv_node(v, gi);
    if (!gm || gm->op != CP_OP_GEMM || gm->n_inputs < 2 || gm->n_outputs != 1 || gm->outputs[0] < 0)
        return false;
    const struct cp_tensor *ty = cp_pv_tensor(v, gm->outputs[0]);
    if (ty->dtype != CP_DTYPE_F32 || ty->shape.rank != 2)
        return false;
    init(m, gi);
    int64_t n = m->n = ty->shape.dims[1].value;
    float beta = cp_node_attr_float(gm, "beta", 1.0f);
    int32_t c = gm->n_inputs > 2 ? gm->inputs[2] : -1;
    const struct cp_tensor *tc = cp_pv_tensor(v, c);
    if (tc && cp_shape_numel(&tc->shape) == 0)
        tc = NULL, c = -1;
    if (tc && beta != 0.0f) {
        bool row = n > 0 && n <= CP_PATTERN_MAX_BIAS && tc->shape.rank >= 1 &&
                   tc->shape.rank <= 2 && tc->shape.dims[tc->shape.rank - 1].value == n &&
                   (tc->shape.rank == 1 || tc->shape.dims[0].value == 1);
        size_t got = 0;
        if (row && cp_pv_const_f32_count(v, c, (size_t)n, &got) && got == (size_t)n) {
            m->bias_c = c;
            m->c_const = true;
        } else if (row && tc->shape.rank == 1 && beta == 1.0f) {
            m->bias_c = c; /* a run-time bias */
        } else if (beta == 1.0f && tc->dtype == CP_DTYPE_F32 &&
                   cp_shape_equal(&tc->shape, &ty->shape) && cp_shape_is_static(&tc->shape)) {
            m->c_residual = c;
        } else {
            return false; /* a C that broadcasts otherwise: Gemm stays */
        }
    }
    if (m->c_residual >= 0) {
        /* Only an activation can follow: the residual slot is taken. */
        memset(&m->tail, 0, sizeof m->tail);
        m->tail.residual = m->c_residual;
        m->tail.residual_first = true;
        m->tail.out = gm->outputs[0];
        struct cp_pattern_act a;
        if (cp_pattern_match_activation(v, m->tail.out, &a)) {
            m->tail.has_act = true;
            m->tail.act = a;
            for (size_t i = 0; i < a.n_nodes; i++)
                m->tail.nodes[m->tail.n_nodes++] = a.nodes[i];
            m->tail.out = a.out;
        }
    } else {
        cp_pattern_match_tail(v, gm->outputs[0], &m->tail);
    }
    take_tail(m);
    return true;
}

/* ---- Conv + BatchNormalization ------------------------------------------------------------ */

/* A constant f32 initializer with exactly n elements. */
static bool f32_const(const struct cp_pattern_view *v, int32_t t, int64_t n)
{
    const struct cp_tensor *T = cp_pv_tensor(v, t);
    return T && T->dtype == CP_DTYPE_F32 && cp_shape_numel(&T->shape) == n && cp_pv_is_const(v, t);
}

int32_t cp_pattern_match_conv_bn(const struct cp_pattern_view *v, int32_t bi)
{
    const struct cp_node *bn = cp_pv_node(v, bi);
    if (!bn || bn->op != CP_OP_BATCH_NORMALIZATION || bn->n_inputs != 5 ||
        cp_node_attr_int(bn, "training_mode", 0) != 0)
        return -1;
    for (size_t k = 1; k < bn->n_outputs; k++)
        if (bn->outputs[k] >= 0)
            return -1;
    const struct cp_tensor *x = cp_pv_tensor(v, bn->inputs[0]);
    int32_t ci = cp_pv_producer(v, bn->inputs[0]);
    if (!x || x->kind != CP_TENSOR_INTERMEDIATE || ci < 0 || x->dtype != CP_DTYPE_F32)
        return -1;
    const struct cp_node *c = cp_pv_node(v, ci);
    if (c->op != CP_OP_CONV || c->n_outputs != 1 || c->n_inputs < 2)
        return -1;
    if (cp_pv_sole_consumer(v, bn->inputs[0]) < 0)
        return -1;
    const struct cp_tensor *w = cp_pv_tensor(v, c->inputs[1]);
    if (!w || w->shape.rank < 3 || !cp_shape_is_static(&w->shape))
        return -1;
    int64_t oc = w->shape.dims[0].value;
    if (!f32_const(v, c->inputs[1], cp_shape_numel(&w->shape)))
        return -1;
    if (c->n_inputs >= 3 && c->inputs[2] >= 0 && !f32_const(v, c->inputs[2], oc))
        return -1;
    for (size_t k = 1; k < 5; k++)
        if (!f32_const(v, bn->inputs[k], oc))
            return -1;
    return ci;
}
