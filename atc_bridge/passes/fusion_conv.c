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
 */
#include "atc_bridge/passes/fusion_internal.h"

#include <stdlib.h>
#include <string.h>

#define MAX_BIAS 65536

/* A constant that broadcasts along one axis only (`axis` of a tensor of
 * rank `rank`, counted from the front) with `n` elements there: [n],
 * [n,1,1], [1,n,1,1], ... OUT: v (n floats). */
static bool axis_constant(const struct cp_fuse *f, int32_t t, int rank, int axis, int64_t n,
                          float *v)
{
    const struct cp_tensor *T = cp_graph_tensor(f->g, t);
    if (T->shape.rank < 0 || T->shape.rank > rank || n > MAX_BIAS)
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
    return cp_fuse_const_floats(f, t, v, (size_t)n, &got) && got == (size_t)n;
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

/* ---- Conv ------------------------------------------------------------- */

static enum cp_status fuse_conv(struct cp_fuse *f, int32_t ci, bool *changed)
{
    const struct cp_node *c = cp_graph_node(f->g, ci);
    if (c->n_outputs != 1 || c->n_inputs < 2 || c->outputs[0] < 0)
        return CP_OK;
    int32_t y = c->outputs[0];
    const struct cp_tensor *ty = cp_graph_tensor(f->g, y);
    if (ty->dtype != CP_DTYPE_F32 || ty->shape.rank < 3)
        return CP_OK;
    int64_t m = ty->shape.dims[1].value;
    int32_t bias = c->n_inputs > 2 ? c->inputs[2] : -1;
    int32_t dead[CP_FUSE_MAX_NODES];
    size_t nd = 0;
    dead[nd++] = ci;
    /* A bias-less Conv followed by a per-channel constant Add: the bias. */
    float *bv = NULL;
    int32_t badd = -1, bsrc = -1;
    if (bias < 0 && m > 0 && m <= MAX_BIAS) {
        int32_t a = cp_fuse_only_consumer(f, y, CP_OP_ADD);
        const struct cp_node *an = a >= 0 ? cp_graph_node(f->g, a) : NULL;
        int o = an ? cp_fuse_other(an, y) : -1;
        bv = malloc((size_t)m * sizeof *bv);
        if (!bv)
            return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", c->name);
        if (o >= 0 && axis_constant(f, an->inputs[o], ty->shape.rank, 1, m, bv)) {
            badd = a;
            bsrc = an->inputs[o];
            dead[nd++] = a;
            y = an->outputs[0];
        }
    }
    struct cp_fuse_tail tl;
    cp_fuse_match_tail(f, y, &tl);
    enum cp_status st = CP_OK;
    if (badd < 0 && !tl.has_act && tl.residual < 0)
        goto out; /* nothing to fuse: a plain Conv stays a Conv */
    if (badd >= 0 && (st = bias_tensor(f, bsrc, bv, m, &bias)) != CP_OK)
        goto out;
    for (size_t i = 0; i < tl.n_nodes; i++)
        dead[nd++] = tl.nodes[i];
    int32_t ins[4] = {c->inputs[0], c->inputs[1], bias, tl.residual};
    size_t nin = tl.residual >= 0 ? 4 : bias >= 0 ? 3 : 2;
    int32_t idx;
    if ((st = cp_fuse_replace(f, dead, nd, "FusedConv", CP_DOMAIN, ins, nin, tl.out, "_fused",
                              &idx)) != CP_OK)
        goto out;
    if ((st = cp_fuse_copy_attrs(f, idx, c)) != CP_OK ||
        (st = cp_fuse_set_tail(f, idx, &tl)) != CP_OK)
        goto out;
    *changed = true;
out:
    free(bv);
    return st;
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

/* The 1-D bias Add after a MatMul result y of last dimension n. */
static bool match_bias(const struct cp_fuse *f, int32_t y, int64_t n, float *bv, int32_t *add,
                       int32_t *src)
{
    const struct cp_tensor *ty = cp_graph_tensor(f->g, y);
    int32_t a = cp_fuse_only_consumer(f, y, CP_OP_ADD);
    if (a < 0 || n <= 0 || n > MAX_BIAS || ty->shape.rank < 1)
        return false;
    const struct cp_node *an = cp_graph_node(f->g, a);
    int o = cp_fuse_other(an, y);
    if (o < 0 || !axis_constant(f, an->inputs[o], ty->shape.rank, ty->shape.rank - 1, n, bv))
        return false;
    *add = a;
    *src = an->inputs[o];
    return true;
}

/* A MatMul, or a FusedMatMul with nothing fused yet (the transpose pass
 * makes those when it folds a Transpose into transA/transB). */
static enum cp_status fuse_matmul(struct cp_fuse *f, int32_t mi, bool *changed)
{
    const struct cp_node *mm = cp_graph_node(f->g, mi);
    bool own = mm->op == CP_OP_FUSED_MATMUL;
    if (mm->n_inputs < 2 || mm->n_inputs > (own ? 3u : 2u) || mm->n_outputs != 1 ||
        mm->outputs[0] < 0)
        return CP_OK;
    if (own && (cp_node_attr_string(mm, "activation", "")[0] || cp_node_attr_int(mm, "transA", 0)))
        return CP_OK;
    const struct cp_tensor *tb = cp_graph_tensor(f->g, mm->inputs[1]);
    const struct cp_tensor *ta = cp_graph_tensor(f->g, mm->inputs[0]);
    int32_t y = mm->outputs[0];
    const struct cp_tensor *ty = cp_graph_tensor(f->g, y);
    if (tb->kind != CP_TENSOR_INITIALIZER || tb->shape.rank != 2 || ta->shape.rank < 2 ||
        ty->dtype != CP_DTYPE_F32 || tb->dtype != CP_DTYPE_F32)
        return CP_OK;
    int64_t n = tb->shape.dims[cp_node_attr_int(mm, "transB", 0) ? 0 : 1].value;
    int32_t dead[CP_FUSE_MAX_NODES];
    size_t nd = 0;
    dead[nd++] = mi;
    float *bv = malloc((size_t)(n > 0 && n <= MAX_BIAS ? n : 1) * sizeof *bv);
    if (!bv)
        return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", mm->name);
    int32_t badd = -1, bsrc = -1, bias = mm->n_inputs > 2 ? mm->inputs[2] : -1;
    if (bias < 0 && match_bias(f, y, n, bv, &badd, &bsrc)) {
        dead[nd++] = badd;
        y = cp_graph_node(f->g, badd)->outputs[0];
    }
    struct cp_fuse_tail tl;
    cp_fuse_match_tail(f, y, &tl);
    enum cp_status st = CP_OK;
    if (badd < 0 && !tl.has_act && tl.residual < 0)
        goto out;
    if (badd >= 0 && (st = bias_tensor(f, bsrc, bv, n, &bias)) != CP_OK)
        goto out;
    for (size_t i = 0; i < tl.n_nodes; i++)
        dead[nd++] = tl.nodes[i];
    int32_t ins[4] = {mm->inputs[0], mm->inputs[1], bias, tl.residual};
    size_t nin = tl.residual >= 0 ? 4 : bias >= 0 ? 3 : 2;
    int32_t idx;
    if ((st = cp_fuse_replace(f, dead, nd, "FusedMatMul", CP_DOMAIN, ins, nin, tl.out, "_fused",
                              &idx)) != CP_OK)
        goto out;
    if ((own && (st = cp_fuse_copy_attrs(f, idx, mm)) != CP_OK) ||
        (st = cp_fuse_set_tail(f, idx, &tl)) != CP_OK)
        goto out;
    *changed = true;
out:
    free(bv);
    return st;
}

/* Gemm: C as the bias ([N] or [1, N], scaled by beta) or, with beta 1 and
 * C of the output's shape, as a residual added before the activation. */
static enum cp_status fuse_gemm(struct cp_fuse *f, int32_t gi, bool *changed)
{
    const struct cp_node *gm = cp_graph_node(f->g, gi);
    if (gm->n_inputs < 2 || gm->n_outputs != 1 || gm->outputs[0] < 0)
        return CP_OK;
    const struct cp_tensor *ty = cp_graph_tensor(f->g, gm->outputs[0]);
    if (ty->dtype != CP_DTYPE_F32 || ty->shape.rank != 2)
        return CP_OK;
    int64_t n = ty->shape.dims[1].value;
    float alpha = cp_node_attr_float(gm, "alpha", 1.0f);
    float beta = cp_node_attr_float(gm, "beta", 1.0f);
    int32_t c = gm->n_inputs > 2 ? gm->inputs[2] : -1;
    const struct cp_tensor *tc = c >= 0 ? cp_graph_tensor(f->g, c) : NULL;
    if (tc && cp_shape_numel(&tc->shape) == 0)
        tc = NULL, c = -1;
    int32_t bias = -1, pre_residual = -1;
    enum cp_status st = CP_OK;
    float *bv = NULL;
    if (tc && beta != 0.0f) {
        bool row = n > 0 && n <= MAX_BIAS && tc->shape.rank >= 1 && tc->shape.rank <= 2 &&
                   tc->shape.dims[tc->shape.rank - 1].value == n &&
                   (tc->shape.rank == 1 || tc->shape.dims[0].value == 1);
        if (row && (bv = malloc((size_t)n * sizeof *bv)) == NULL)
            return cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", gm->name);
        size_t got = 0;
        if (row && cp_fuse_const_floats(f, c, bv, (size_t)n, &got) && got == (size_t)n) {
            if (beta != 1.0f || tc->shape.rank != 1) {
                for (int64_t i = 0; i < n; i++)
                    bv[i] *= beta;
                st = cp_fuse_new_weight(f, tc->name, bv, 1, &n, &bias);
            } else {
                bias = c;
            }
        } else if (row && tc->shape.rank == 1 && beta == 1.0f) {
            bias = c; /* a run-time bias */
        } else if (beta == 1.0f && tc->dtype == CP_DTYPE_F32 &&
                   cp_shape_equal(&tc->shape, &ty->shape) && cp_shape_is_static(&tc->shape)) {
            pre_residual = c;
        } else {
            goto out; /* a C that broadcasts otherwise: Gemm stays */
        }
        if (st != CP_OK)
            goto out;
    }
    int32_t dead[CP_FUSE_MAX_NODES];
    size_t nd = 0;
    dead[nd++] = gi;
    struct cp_fuse_tail tl;
    if (pre_residual >= 0) {
        /* Only an activation can follow: the residual slot is taken. */
        memset(&tl, 0, sizeof tl);
        tl.residual = pre_residual;
        tl.residual_first = true;
        tl.out = gm->outputs[0];
        struct cp_fuse_act a;
        if (cp_fuse_match_activation(f, tl.out, &a)) {
            tl.has_act = true;
            tl.act = a;
            for (size_t i = 0; i < a.n_nodes; i++)
                tl.nodes[tl.n_nodes++] = a.nodes[i];
            tl.out = a.out;
        }
    } else {
        cp_fuse_match_tail(f, gm->outputs[0], &tl);
    }
    for (size_t i = 0; i < tl.n_nodes; i++)
        dead[nd++] = tl.nodes[i];
    int32_t ins[4] = {gm->inputs[0], gm->inputs[1], bias, tl.residual};
    size_t nin = tl.residual >= 0 ? 4 : bias >= 0 ? 3 : 2;
    int32_t idx;
    int64_t ta = cp_node_attr_int(gm, "transA", 0), tb = cp_node_attr_int(gm, "transB", 0);
    if ((st = cp_fuse_replace(f, dead, nd, "FusedMatMul", CP_DOMAIN, ins, nin, tl.out, "_fused",
                              &idx)) != CP_OK)
        goto out;
    if ((ta && cp_node_set_int(f->g, idx, "transA", 1) != CP_OK) ||
        (tb && cp_node_set_int(f->g, idx, "transB", 1) != CP_OK) ||
        (alpha != 1.0f && cp_node_set_float(f->g, idx, "alpha", alpha) != CP_OK)) {
        st = cp_diag_set(f->d, CP_ERR_NOMEM, "out of memory fusing node '%s'", gm->name);
        goto out;
    }
    if ((st = cp_fuse_set_tail(f, idx, &tl)) != CP_OK)
        goto out;
    *changed = true;
out:
    free(bv);
    return st;
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
