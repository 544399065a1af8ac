/* TransposeOptimizationPass:
 *
 *  - a Transpose whose perm is the identity goes;
 *  - Transpose(Transpose(x, p1), p2) becomes Transpose(x, p) with
 *    p[i] = p1[p2[i]], and goes altogether when p is the identity;
 *  - MatMul(Transpose(a), b) where the Transpose swaps the last two
 *    dimensions (and keeps the rest) becomes FusedMatMul(a, b, transA=1),
 *    likewise transB for the second operand: the matmul reads the operand
 *    transposed instead of a copy being made;
 *  - a channel shuffle (Reshape, Transpose 0,2,1,3,4, Reshape) becomes a
 *    channel Gather, and so do channel Slices of its result
 *    (cleanup_shuffle.c).
 *
 * A MatMul that is part of an attention block (its result reaches a
 * Softmax through at most a scale and a mask, or it multiplies a Softmax's
 * result) is left as it is: FlashAttentionFusionPass, later in the order,
 * matches those MatMuls and their Transposes itself. */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <stdio.h>
#include <string.h>

/* The perm of Transpose node n for an input of rank r. */
static bool get_perm(const struct cp_node *n, int r, int64_t *perm)
{
    size_t np = 0;
    if (r < 0 || r > CP_MAX_RANK)
        return false;
    if (!cp_rw_attr_ints(n, "perm", perm, CP_MAX_RANK, &np)) {
        if (cp_node_attr(n, "perm"))
            return false;
        for (int a = 0; a < r; a++)
            perm[a] = r - 1 - a;
        return true;
    }
    if ((int)np != r)
        return false;
    bool seen[CP_MAX_RANK] = {false};
    for (int a = 0; a < r; a++) {
        if (perm[a] < 0 || perm[a] >= r || seen[perm[a]])
            return false;
        seen[perm[a]] = true;
    }
    return true;
}

static bool is_identity_perm(const int64_t *perm, int r)
{
    for (int a = 0; a < r; a++)
        if (perm[a] != a)
            return false;
    return true;
}

static int rank_of(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(g, t);
    return T ? T->shape.rank : -1;
}

/* The live Transpose node producing t, or -1. */
static int32_t transpose_producer(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(g, t);
    if (!T || T->kind != CP_TENSOR_INTERMEDIATE || T->producer < 0)
        return -1;
    const struct cp_node *p = cp_graph_node(g, T->producer);
    return p && !p->dead && p->op == CP_OP_TRANSPOSE && p->n_inputs == 1 ? T->producer : -1;
}

/* Kill node i if nothing reads its outputs any more. */
static void kill_if_unused(struct cp_graph *g, int32_t i)
{
    const struct cp_node *n = cp_graph_node(g, i);
    for (size_t k = 0; k < n->n_outputs; k++)
        if (n->outputs[k] >= 0 &&
            (cp_rw_n_uses(g, n->outputs[k]) || cp_rw_is_graph_output(g, n->outputs[k])))
            return;
    cp_rw_kill(g, i);
}

/* Replace Transpose node i (x -> y) by a node reading x0 (perm NULL: an
 * identity). When y is no graph output, its readers simply read x0 (or
 * the new Transpose's output); `from` lists the nodes replaced. */
static enum cp_status replace_transpose(struct cp_pass_ctx *ctx, int32_t i, int32_t x0,
                                        const int64_t *perm, int r, const int32_t *from,
                                        size_t n_from)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *n = cp_graph_node(g, i);
    int32_t y = n->outputs[0];
    if (!perm && !cp_rw_is_graph_output(g, y)) {
        cp_rw_kill(g, i);
        cp_rw_replace_uses(g, y, x0);
        return CP_OK;
    }
    cp_rw_kill(g, i);
    int32_t ni;
    enum cp_status st = cp_rw_add_node(g, n->name, perm ? "Transpose" : "Identity", "", &x0, 1, &y,
                                       1, from, n_from, &ni, ctx->d);
    if (st == CP_OK && perm && cp_node_set_ints(g, ni, "perm", perm, (size_t)r) != CP_OK)
        st = cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory rewriting node '%s'", n->name);
    return st;
}

/* Transpose node i: identity, or the second of a pair. OUT: *done. */
static enum cp_status simplify_transpose(struct cp_pass_ctx *ctx, int32_t i, bool *done)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *n = cp_graph_node(g, i);
    *done = false;
    if (n->n_inputs != 1 || n->n_outputs != 1 || n->outputs[0] < 0)
        return CP_OK;
    int r = rank_of(g, n->inputs[0]);
    int64_t p2[CP_MAX_RANK];
    if (!get_perm(n, r, p2))
        return CP_OK;
    if (is_identity_perm(p2, r)) {
        int32_t from[1] = {i};
        *done = true;
        return replace_transpose(ctx, i, n->inputs[0], NULL, r, from, 1);
    }
    int32_t t1 = transpose_producer(g, n->inputs[0]);
    int64_t p1[CP_MAX_RANK];
    if (t1 < 0)
        return CP_OK;
    const struct cp_node *first = cp_graph_node(g, t1);
    if (rank_of(g, first->inputs[0]) != r || !get_perm(first, r, p1))
        return CP_OK;
    int64_t p[CP_MAX_RANK];
    for (int a = 0; a < r; a++)
        p[a] = p1[p2[a]];
    int32_t from[2] = {t1, i};
    *done = true;
    enum cp_status st =
        replace_transpose(ctx, i, first->inputs[0], is_identity_perm(p, r) ? NULL : p, r, from, 2);
    if (st == CP_OK)
        kill_if_unused(g, t1);
    return st;
}

/* ---- MatMul ------------------------------------------------------------------------- */

static bool swaps_last_two(const int64_t *perm, int r)
{
    if (r < 2)
        return false;
    for (int a = 0; a < r - 2; a++)
        if (perm[a] != a)
            return false;
    return perm[r - 2] == r - 1 && perm[r - 1] == r - 2;
}

static bool op_in(enum cp_op op, const enum cp_op *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == op)
            return true;
    return false;
}

/* Whether tensor t reaches a Softmax within `depth` steps through the ops
 * an attention block puts between its MatMul and its Softmax. */
static bool reaches_softmax(const struct cp_graph *g, int32_t t, int depth)
{
    static const enum cp_op between[] = {CP_OP_MUL, CP_OP_DIV, CP_OP_ADD, CP_OP_WHERE, CP_OP_CAST};
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        bool reads = false;
        for (size_t j = 0; j < n->n_inputs && !reads; j++)
            reads = n->inputs[j] == t;
        if (!reads)
            continue;
        if (n->op == CP_OP_SOFTMAX)
            return true;
        if (depth > 0 && op_in(n->op, between, sizeof between / sizeof *between) &&
            n->n_outputs == 1 && reaches_softmax(g, n->outputs[0], depth - 1))
            return true;
    }
    return false;
}

static bool in_attention(const struct cp_graph *g, const struct cp_node *m)
{
    for (size_t k = 0; k < m->n_inputs; k++) {
        const struct cp_tensor *t = cp_graph_tensor(g, m->inputs[k]);
        const struct cp_node *p = t && t->producer >= 0 ? cp_graph_node(g, t->producer) : NULL;
        if (p && !p->dead && p->op == CP_OP_SOFTMAX)
            return true;
    }
    return reaches_softmax(g, m->outputs[0], 3);
}

/* MatMul node i: fold a last-two-dims Transpose of either operand. OUT:
 * *done. */
static enum cp_status fold_into_matmul(struct cp_pass_ctx *ctx, int32_t i, bool *done)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *m = cp_graph_node(g, i);
    *done = false;
    if (m->n_inputs != 2 || m->n_outputs != 1 || m->inputs[0] < 0 || m->inputs[1] < 0)
        return CP_OK;
    if (rank_of(g, m->inputs[0]) < 2 || rank_of(g, m->inputs[1]) < 2)
        return CP_OK;
    int32_t ins[2] = {m->inputs[0], m->inputs[1]}, tr[2] = {-1, -1};
    for (int k = 0; k < 2; k++) {
        int32_t t = transpose_producer(g, ins[k]);
        int64_t perm[CP_MAX_RANK];
        if (t < 0)
            continue;
        const struct cp_node *tn = cp_graph_node(g, t);
        int r = rank_of(g, tn->inputs[0]);
        if (r < 2 || !get_perm(tn, r, perm) || !swaps_last_two(perm, r))
            continue;
        tr[k] = t;
        ins[k] = tn->inputs[0];
    }
    if ((tr[0] < 0 && tr[1] < 0) || in_attention(g, m))
        return CP_OK;
    int32_t from[3], nf = 0;
    from[nf++] = i;
    for (int k = 0; k < 2; k++)
        if (tr[k] >= 0)
            from[nf++] = tr[k];
    int32_t y = m->outputs[0], ni;
    cp_rw_kill(g, i);
    enum cp_status st = cp_rw_add_node(g, m->name, "FusedMatMul", CP_DOMAIN, ins, 2, &y, 1, from,
                                       (size_t)nf, &ni, ctx->d);
    if (st != CP_OK)
        return st;
    if (cp_node_set_int(g, ni, "transA", tr[0] >= 0) != CP_OK ||
        cp_node_set_int(g, ni, "transB", tr[1] >= 0) != CP_OK)
        return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory rewriting node '%s'", m->name);
    for (int k = 0; k < 2; k++)
        if (tr[k] >= 0 && !cp_graph_node(g, tr[k])->dead)
            kill_if_unused(g, tr[k]);
    *done = true;
    return CP_OK;
}

enum cp_status cp_cleanup_transpose(struct cp_pass_ctx *ctx, bool *changed)
{
    *changed = false;
    /* New nodes are appended; walking the growing array reaches them too,
     * so a chain of three Transposes collapses in one run. */
    enum cp_status st = cp_cleanup_each(ctx, CP_OP_TRANSPOSE, simplify_transpose, changed);
    if (st == CP_OK)
        st = cp_cleanup_each(ctx, CP_OP_MATMUL, fold_into_matmul, changed);
    return st == CP_OK ? cp_cleanup_channel_shuffle(ctx, changed) : st;
}
