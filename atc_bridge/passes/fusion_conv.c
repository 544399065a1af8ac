/*
 * ConvBiasActivationFusionPass and MatMulBiasActivationFusionPass.
 *
 * Conv [+ Add of a per-channel constant, when the Conv has no bias] then
 * an activation and/or a residual Add becomes one FusedConv; MatMul with a
 * constant right-hand side (a Linear layer) [+ Add of a 1-D bias, in either
 * operand order: PyTorch writes Add(bias, x)] then activation/residual
 * becomes one FusedMatMul, and every Gemm becomes a FusedMatMul (transA,
 * transB, alpha; beta * C as the bias when C is [N] or [1, N], as a residual
 * added before the activation when C is [M, N] and beta is 1).
 *
 * MatMuls of two activations (attention's Q Kᵀ and P V) are left alone: the
 * attention pass that runs after this family looks for them.
 *
 * Kernels run these as one oneDNN primitive with post-ops (runner/cpu/
 * dnnl_conv.c, dnnl_matmul.c), so the intermediate tensors are never
 * written out.
 *
 * What is fused is graph/pattern.h's (cp_pattern_match_conv, _matmul,
 * _gemm), which the rule engine runs on traces too; this file rewrites.
 */
#include "atc_bridge/passes/fusion_internal.h"

#include <stdlib.h>
#include <string.h>

/* The bias values of constant `src` (n floats), or NULL on OOM. */
static float *bias_values(struct cp_fuse *f, int32_t src, int64_t n)
{
    float *bv = malloc((size_t)(n > 0 ? n : 1) * sizeof *bv);
    size_t got;
    if (bv && !cp_fuse_const_floats(f, src, bv, (size_t)n, &got))
        memset(bv, 0, (size_t)n * sizeof *bv); /* the matcher checked it: cannot happen */
    return bv;
}

/* The 1-D bias tensor for `n` values: t itself when it is 1-D, else a new
 * weight with its data. */
static enum cp_status bias_tensor(struct cp_fuse *f, int32_t t, const float *v, int64_t n,
                                  int32_t *out)
{
    const struct cp_tensor *T = cp_graph_tensor(f->g, t);
    if (T->shape.rank == 1) {
        *out = t;
        return CP_OK;
    }
    return cp_fuse_new_weight(f, T->name, v, 1, &n, out);
}

/* The bias a matched Conv or MatMul gets: its own input 2, or the
 * constant its bias Add adds. OUT: *bias. */
static enum cp_status epilogue_bias(struct cp_fuse *f, const struct cp_node *op,
                                    const struct cp_pattern_epilogue *m, int32_t *bias)
{
    *bias = op->n_inputs > 2 ? op->inputs[2] : -1;
    if (m->bias_add < 0)
        return CP_OK;
    float *bv = bias_values(f, m->bias_src, m->n);
    if (!bv)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", op->name);
    enum cp_status st = bias_tensor(f, m->bias_src, bv, m->n, bias);
    free(bv);
    return st;
}

/* ---- Conv ------------------------------------------------------------- */

static enum cp_status fuse_conv(struct cp_fuse *f, int32_t ci, bool *changed)
{
    struct cp_pattern_epilogue m;
    if (!cp_pattern_match_conv(&f->pg.view, ci, &m))
        return CP_OK;
    const struct cp_node *c = cp_graph_node(f->g, ci);
    int32_t bias;
    enum cp_status st = epilogue_bias(f, c, &m, &bias);
    if (st != CP_OK)
        return st;
    int32_t ins[4] = {c->inputs[0], c->inputs[1], bias, m.tail.residual};
    size_t nin = m.tail.residual >= 0 ? 4 : bias >= 0 ? 3 : 2;
    int32_t idx;
    if ((st = cp_fuse_replace(f, m.nodes, m.n_nodes, "FusedConv", CP_DOMAIN, ins, nin, m.tail.out,
                              "_fused", &idx)) != CP_OK)
        return st;
    if (idx < 0)
        return CP_OK; /* switched off for this instance */
    if ((st = cp_fuse_copy_attrs(f, idx, c)) != CP_OK ||
        (st = cp_fuse_set_tail(f, idx, &m.tail)) != CP_OK)
        return st;
    *changed = true;
    return CP_OK;
}

enum cp_status cp_fusion_conv_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_fuse f;
    enum cp_status st = cp_fuse_init(&f, ctx);
    *changed = false;
    for (size_t i = 0; st == CP_OK && i < cp_graph_n_nodes(f.g); i++) {
        const struct cp_node *n = cp_graph_node(f.g, (int32_t)i);
        if (!n->dead && n->op == CP_OP_CONV)
            st = fuse_conv(&f, (int32_t)i, changed);
    }
    cp_fuse_release(&f);
    return st;
}

/* ---- MatMul and Gemm ---------------------------------------------------- */

/* A MatMul, or a FusedMatMul with nothing fused yet (the transpose pass
 * makes those when it folds a Transpose into transA/transB). */
static enum cp_status fuse_matmul(struct cp_fuse *f, int32_t mi, bool *changed)
{
    struct cp_pattern_epilogue m;
    if (!cp_pattern_match_matmul(&f->pg.view, mi, &m))
        return CP_OK;
    const struct cp_node *mm = cp_graph_node(f->g, mi);
    bool own = mm->op == CP_OP_FUSED_MATMUL;
    int32_t bias;
    enum cp_status st = epilogue_bias(f, mm, &m, &bias);
    if (st != CP_OK)
        return st;
    int32_t ins[4] = {mm->inputs[0], mm->inputs[1], bias, m.tail.residual};
    size_t nin = m.tail.residual >= 0 ? 4 : bias >= 0 ? 3 : 2;
    int32_t idx;
    if ((st = cp_fuse_replace(f, m.nodes, m.n_nodes, "FusedMatMul", CP_DOMAIN, ins, nin, m.tail.out,
                              "_fused", &idx)) != CP_OK)
        return st;
    if (idx < 0)
        return CP_OK; /* switched off for this instance */
    if ((own && (st = cp_fuse_copy_attrs(f, idx, mm)) != CP_OK) ||
        (!own && (st = cp_fuse_copy_int8(f, idx, cp_graph_node(f->g, mi))) != CP_OK) ||
        (st = cp_fuse_set_tail(f, idx, &m.tail)) != CP_OK)
        return st;
    *changed = true;
    return CP_OK;
}

/* Gemm: C as the bias ([N] or [1, N], scaled by beta) or, with beta 1 and
 * C of the output's shape, as a residual added before the activation. */
static enum cp_status fuse_gemm(struct cp_fuse *f, int32_t gi, bool *changed)
{
    struct cp_pattern_epilogue m;
    if (!cp_pattern_match_gemm(&f->pg.view, gi, &m))
        return CP_OK;
    const struct cp_node *gm = cp_graph_node(f->g, gi);
    int64_t n = m.n;
    float alpha = cp_node_attr_float(gm, "alpha", 1.0f);
    float beta = cp_node_attr_float(gm, "beta", 1.0f);
    int32_t bias = -1;
    enum cp_status st = CP_OK;
    if (m.bias_c >= 0 && m.c_const) {
        const struct cp_tensor *tc = cp_graph_tensor(f->g, m.bias_c);
        float *bv = bias_values(f, m.bias_c, n);
        if (!bv)
            return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", gm->name);
        if (beta != 1.0f || tc->shape.rank != 1) {
            for (int64_t i = 0; i < n; i++)
                bv[i] *= beta;
            st = cp_fuse_new_weight(f, tc->name, bv, 1, &n, &bias);
        } else {
            bias = m.bias_c;
        }
        free(bv);
        if (st != CP_OK)
            return st;
    } else if (m.bias_c >= 0) {
        bias = m.bias_c; /* a run-time bias */
    }
    int32_t ins[4] = {gm->inputs[0], gm->inputs[1], bias, m.tail.residual};
    size_t nin = m.tail.residual >= 0 ? 4 : bias >= 0 ? 3 : 2;
    int32_t idx;
    int64_t ta = cp_node_attr_int(gm, "transA", 0), tb = cp_node_attr_int(gm, "transB", 0);
    if ((st = cp_fuse_replace(f, m.nodes, m.n_nodes, "FusedMatMul", CP_DOMAIN, ins, nin, m.tail.out,
                              "_fused", &idx)) != CP_OK)
        return st;
    if (idx < 0)
        return CP_OK; /* switched off for this instance */
    if ((ta && cp_node_set_int(f->g, idx, "transA", 1) != CP_OK) ||
        (tb && cp_node_set_int(f->g, idx, "transB", 1) != CP_OK) ||
        (alpha != 1.0f && cp_node_set_float(f->g, idx, "alpha", alpha) != CP_OK) ||
        cp_fuse_copy_int8(f, idx, cp_graph_node(f->g, gi)) != CP_OK)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", gm->name);
    if ((st = cp_fuse_set_tail(f, idx, &m.tail)) != CP_OK)
        return st;
    *changed = true;
    return CP_OK;
}

enum cp_status cp_fusion_matmul_run(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_fuse f;
    enum cp_status st = cp_fuse_init(&f, ctx);
    *changed = false;
    for (size_t i = 0; st == CP_OK && i < cp_graph_n_nodes(f.g); i++) {
        const struct cp_node *n = cp_graph_node(f.g, (int32_t)i);
        if (n->dead)
            continue;
        if (n->op == CP_OP_MATMUL || n->op == CP_OP_FUSED_MATMUL)
            st = fuse_matmul(&f, (int32_t)i, changed);
        else if (n->op == CP_OP_GEMM)
            st = fuse_gemm(&f, (int32_t)i, changed);
    }
    cp_fuse_release(&f);
    return st;
}
