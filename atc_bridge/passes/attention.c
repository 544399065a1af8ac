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
 *
 * The matching is graph/pattern.h's cp_pattern_match_attention, which the
 * rule engine runs on traces too; this file rewrites what it finds.
 */
#include "atc_bridge/passes/pass.h"
#include "atc_bridge/passes/rewrite.h"
#include "graph/pattern.h"

#include <stdio.h>
#include <string.h>

/* "/blk/attn1/MatMul" -> "/blk/attn1/FusedAttention", made unique. */
static void fused_name(const struct cp_graph *g, const char *from, char *out, size_t cap)
{
    char base[512];
    const char *slash = strrchr(from, '/');
    int len = slash ? (int)(slash - from) : 0;
    snprintf(base, sizeof base, "%.*s%sFusedAttention", len, from, slash ? "/" : "");
    cp_rw_unique_node_name(g, base, out, cap);
}

static enum cp_status replace(struct cp_pass_ctx *ctx, const struct cp_pattern_attention *m)
{
    struct cp_graph *g = ctx->g;
    char name[600];
    fused_name(g, cp_graph_node(g, m->qk_node)->name, name, sizeof name);
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
    struct cp_pattern_graph pg;
    enum cp_status st = cp_pattern_graph_init(&pg, ctx->g);
    if (st != CP_OK) {
        cp_pattern_graph_release(&pg);
        return cp_diag_set(ctx->d, st, "out of memory in the attention pass");
    }
    size_t n = cp_graph_n_nodes(ctx->g);
    for (size_t i = 0; i < n && st == CP_OK; i++) {
        const struct cp_node *sm = cp_graph_node(ctx->g, (int32_t)i);
        if (sm->dead || sm->op != CP_OP_SOFTMAX)
            continue;
        struct cp_pattern_attention m;
        if (!cp_pattern_match_attention(&pg.view, (int32_t)i, &m))
            continue;
        if ((st = replace(ctx, &m)) != CP_OK)
            break;
        *changed = true;
        if ((st = cp_pattern_graph_update(&pg)) != CP_OK)
            st = cp_diag_set(ctx->d, st, "out of memory in the attention pass");
    }
    cp_pattern_graph_release(&pg);
    return st;
}

const struct cp_pass cp_attention_passes[] = {
    {CP_PASS_FLASH_ATTENTION, "GraphFusion",
     "MatMul(Q,K^T) -> scale -> [mask Add] -> Softmax -> MatMul(V), with its head split and merge, "
     "to one FusedAttention",
     flash_attention_run},
    {NULL, NULL, NULL, NULL},
};
