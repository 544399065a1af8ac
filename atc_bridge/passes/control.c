/* Control flow at conversion: an If whose condition is known (an
 * initializer, or a value inference propagated) is replaced by the nodes of
 * the branch it takes, run as part of ConstantFoldingPass. The inlined
 * nodes keep their own ONNX names as origins, plus the If's. Branch tensors
 * get names unique in the graph; the branch's outputs become the If's
 * outputs (through an Identity when a branch output is not made by a node
 * of the branch). A branch that holds control flow itself is left alone
 * for now. The pass manager cleans subgraphs afterwards (manager.c's
 * clean_subgraphs), with the constants they read from outside borrowed
 * (cp_control_borrow_constants, below). */
#include "atc_bridge/passes/cleanup_internal.h"
#include "atc_bridge/passes/rewrite.h"

#include <stdlib.h>
#include <string.h>

/* The condition when conversion knows it: an initializer, or with
 * `values` a value inference propagated. */
static bool cond_value(const struct cp_graph *g, const struct cp_node *n, bool values, bool *v)
{
    const struct cp_tensor *t = n->n_inputs ? cp_graph_tensor(g, n->inputs[0]) : NULL;
    if (!t)
        return false;
    if (values && t->value && t->value_len == 1) {
        *v = t->value[0] != 0;
        return true;
    }
    if (t->kind == CP_TENSOR_INITIALIZER && t->data && cp_shape_numel(&t->shape) == 1) {
        *v = cp_elem_load_i64(t->data, t->dtype, 0) != 0;
        return true;
    }
    return false;
}

static bool has_subgraphs(const struct cp_graph *b)
{
    for (size_t i = 0; i < cp_graph_n_nodes(b); i++) {
        const struct cp_node *n = cp_graph_node(b, (int32_t)i);
        for (size_t j = 0; !n->dead && j < n->n_attrs; j++)
            if (n->attrs[j].type == CP_ATTR_GRAPH)
                return true;
    }
    return false;
}

static enum cp_status nomem(struct cp_pass_ctx *ctx, const char *node)
{
    return cp_diag_set(ctx->d, CP_ERR_NOMEM, "out of memory inlining the branch of If '%s'", node);
}

/* Tensors of branch b in the graph: outer references, initializers,
 * intermediates (the If's outputs for the branch outputs nodes make). */
static enum cp_status map_tensors(struct cp_pass_ctx *ctx, const struct cp_node *n,
                                  const int32_t *outs, const struct cp_graph *b, int32_t *map)
{
    struct cp_graph *g = ctx->g;
    for (size_t j = 0; j < cp_graph_n_outer(b); j++) {
        int32_t slot = cp_control_outer_slot(g, n, b, j);
        if (slot < 0)
            return cp_diag_set(ctx->d, CP_ERR_INVALID,
                               "If '%s': outer-scope reference %zu has no input", n->name, j);
        map[cp_graph_outer(b, j)] = n->inputs[slot];
    }
    for (size_t i = 0; i < cp_graph_n_outputs(b); i++) {
        int32_t t = cp_graph_output(b, i);
        const struct cp_tensor *T = cp_graph_tensor(b, t);
        if (T->kind == CP_TENSOR_INTERMEDIATE && T->producer >= 0 && map[t] < 0 && outs[i] >= 0)
            map[t] = outs[i];
    }
    for (size_t t = 0; t < cp_graph_n_tensors(b); t++) {
        const struct cp_tensor *T = cp_graph_tensor(b, (int32_t)t);
        if (map[t] >= 0 || T->kind == CP_TENSOR_INPUT)
            continue;
        char name[512];
        cp_rw_unique_tensor_name(g, T->name, name, sizeof name);
        enum cp_status st;
        if (T->kind == CP_TENSOR_INITIALIZER && T->data) {
            void *copy = malloc(T->nbytes ? T->nbytes : 1);
            if (!copy)
                return nomem(ctx, n->name);
            memcpy(copy, T->data, T->nbytes);
            st = cp_rw_add_initializer(g, name, T->dtype, &T->shape, copy, T->nbytes, &map[t],
                                       ctx->d);
        } else {
            st = cp_graph_add_tensor(g, name, T->dtype, &T->shape,
                                     T->kind == CP_TENSOR_INITIALIZER ? CP_TENSOR_INITIALIZER
                                                                      : CP_TENSOR_INTERMEDIATE,
                                     &map[t], ctx->d);
        }
        if (st != CP_OK)
            return st;
    }
    return CP_OK;
}

static enum cp_status add_copy(struct cp_pass_ctx *ctx, const struct cp_graph *b,
                               const struct cp_node *bn, const int32_t *map,
                               const char *const *if_origins, size_t n_if, struct cp_buf *scratch)
{
    struct cp_graph *g = ctx->g;
    int32_t *ins = cp_calloc(bn->n_inputs + 1, sizeof *ins);
    int32_t *outs = cp_calloc(bn->n_outputs + 1, sizeof *outs);
    const char **orig = cp_calloc(bn->n_origins + n_if + 1, sizeof *orig);
    enum cp_status st = CP_OK;
    if (!ins || !outs || !orig) {
        st = nomem(ctx, bn->name);
        goto out;
    }
    for (size_t j = 0; j < bn->n_inputs; j++)
        ins[j] = bn->inputs[j] >= 0 ? map[bn->inputs[j]] : -1;
    for (size_t j = 0; j < bn->n_outputs; j++)
        outs[j] = bn->outputs[j] >= 0 ? map[bn->outputs[j]] : -1;
    size_t no = 0;
    for (size_t j = 0; j < bn->n_origins; j++)
        orig[no++] = bn->origins[j];
    for (size_t j = 0; j < n_if; j++)
        orig[no++] = if_origins[j];
    char name[512];
    cp_rw_unique_node_name(g, bn->name, name, sizeof name);
    int32_t idx;
    if ((st = cp_graph_add_node(g, name, bn->op_type, bn->domain, ins, bn->n_inputs, outs,
                                bn->n_outputs, orig, no, &idx, ctx->d)) != CP_OK)
        goto out;
    cp_graph_node(g, idx)->op = bn->op;
    if ((st = cp_rw_copy_attrs(g, idx, bn)) != CP_OK) {
        st = nomem(ctx, bn->name);
        goto out;
    }
    for (size_t j = 0; j < bn->n_attrs; j++)
        if (bn->attrs[j].type == CP_ATTR_TENSOR &&
            (st = cp_node_set_tensor(g, idx, bn->attrs[j].name, map[bn->attrs[j].tensor])) != CP_OK)
            goto out;
    (void)b;
    (void)scratch;
out:
    free(ins);
    free(outs);
    free(orig);
    return st;
}

static enum cp_status inline_branch(struct cp_pass_ctx *ctx, int32_t node, const struct cp_graph *b)
{
    struct cp_graph *g = ctx->g;
    const struct cp_node *n = cp_graph_node(g, node);
    size_t nt = cp_graph_n_tensors(b);
    int32_t *map = cp_calloc(nt + 1, sizeof *map);
    int32_t *outs = cp_calloc(n->n_outputs + 1, sizeof *outs);
    int32_t *order = NULL;
    size_t n_order = 0;
    enum cp_status st = CP_OK;
    if (!map || !outs) {
        st = nomem(ctx, n->name);
        goto out;
    }
    for (size_t t = 0; t < nt; t++)
        map[t] = -1;
    memcpy(outs, n->outputs, n->n_outputs * sizeof *outs);
    if ((st = cp_graph_topo_order(b, &order, &n_order, ctx->d)) != CP_OK ||
        (st = map_tensors(ctx, n, outs, b, map)) != CP_OK)
        goto out;
    cp_rw_kill(g, node);
    for (size_t k = 0; k < n_order; k++)
        if ((st = add_copy(ctx, b, cp_graph_node(b, order[k]), map, n->origins, n->n_origins,
                           NULL)) != CP_OK)
            goto out;
    /* Branch outputs no branch node makes: an Identity writes the If's
     * output. */
    for (size_t i = 0; i < cp_graph_n_outputs(b) && i < n->n_outputs; i++) {
        int32_t t = cp_graph_output(b, i);
        if (outs[i] < 0 || map[t] == outs[i])
            continue;
        char name[512];
        cp_rw_unique_node_name(g, n->name, name, sizeof name);
        if ((st = cp_graph_add_node(g, name, "Identity", "", &map[t], 1, &outs[i], 1, n->origins,
                                    n->n_origins, NULL, ctx->d)) != CP_OK)
            goto out;
    }
out:
    free(map);
    free(outs);
    free(order);
    return st;
}

enum cp_status cp_control_fold_if(struct cp_pass_ctx *ctx, bool *changed)
{
    struct cp_graph *g = ctx->g;
    *changed = false;
    size_t nn = cp_graph_n_nodes(g);
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        bool v;
        if (n->dead || n->op != CP_OP_IF || !cond_value(g, n, !ctx->in_subgraph, &v))
            continue;
        const struct cp_attr *a = cp_node_attr(n, v ? "then_branch" : "else_branch");
        if (!a || a->type != CP_ATTR_GRAPH || has_subgraphs(a->graph))
            continue;
        if (cp_graph_n_outputs(a->graph) != n->n_outputs)
            continue;
        enum cp_status st = inline_branch(ctx, (int32_t)i, a->graph);
        if (st != CP_OK)
            return st;
        cp_log_msg(ctx->log, CP_LOG_DEBUG, "ConstantFoldingPass: If '%s' replaced by its %s",
                   n->name, v ? "then_branch" : "else_branch");
        *changed = true;
    }
    return CP_OK;
}

/* ---- constants an If branch or a loop body reads from outside ---------------------- */

static bool moves_data(enum cp_op op)
{
    switch (op) {
    case CP_OP_SLICE:
    case CP_OP_GATHER:
    case CP_OP_CONCAT:
    case CP_OP_TRANSPOSE:
    case CP_OP_RESHAPE:
    case CP_OP_SQUEEZE:
    case CP_OP_UNSQUEEZE:
    case CP_OP_CAST:
        return true;
    default:
        return false;
    }
}

/* Whether every reader of t in sub moves data and reads initializers
 * otherwise (or t itself), and there is one. */
static bool only_foldable_readers(const struct cp_graph *sub, int32_t t)
{
    size_t readers = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(sub); i++) {
        const struct cp_node *m = cp_graph_node(sub, (int32_t)i);
        bool reads = false, others_const = true;
        for (size_t j = 0; !m->dead && j < m->n_inputs; j++) {
            if (m->inputs[j] == t) {
                reads = true;
                continue;
            }
            const struct cp_tensor *o =
                m->inputs[j] >= 0 ? cp_graph_tensor(sub, m->inputs[j]) : NULL;
            if (o && o->kind != CP_TENSOR_INITIALIZER)
                others_const = false;
        }
        if (!reads)
            continue;
        if (!moves_data(m->op) || !others_const)
            return false;
        readers++;
    }
    return readers > 0;
}

enum cp_status cp_control_borrow_constants(struct cp_graph *g, const struct cp_node *n,
                                           struct cp_graph *sub, bool *changed, struct cp_diag *d)
{
    for (size_t j = 0; j < cp_graph_n_outer(sub); j++) {
        int32_t st_slot = cp_control_outer_slot(g, n, sub, j);
        int32_t s = cp_graph_outer(sub, j);
        if (st_slot < 0 || s < 0 || n->inputs[st_slot] < 0)
            continue;
        const struct cp_tensor *P = cp_graph_tensor(g, n->inputs[st_slot]);
        if (P->kind != CP_TENSOR_INITIALIZER || !P->data || !cp_shape_is_static(&P->shape) ||
            !only_foldable_readers(sub, s))
            continue;
        void *copy = malloc(P->nbytes ? P->nbytes : 1);
        if (!copy)
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory copying '%s' into a subgraph",
                               P->name);
        memcpy(copy, P->data, P->nbytes);
        int32_t c;
        enum cp_status st = cp_rw_add_initializer(sub, cp_graph_tensor(sub, s)->name, P->dtype,
                                                  &P->shape, copy, P->nbytes, &c, d);
        if (st != CP_OK)
            return st;
        cp_rw_replace_uses(sub, s, c);
        *changed = true;
    }
    return CP_OK;
}
