/* Structural checks: unique names, every input defined, outputs produced, no
 * cycles; the topological order every later pass walks in; and compaction.
 *
 * Producers are recomputed from the live nodes rather than read from
 * tensor->producer, so a pass that marked a node dead but forgot to clear
 * the field cannot fool the checks. */
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *node_label(const struct cp_node *n)
{
    return n->name ? n->name : "(unnamed)";
}

/* Producer of every tensor among live nodes (-1: none). Index errors and a
 * tensor produced twice go into `d`. OUT: *prod (caller frees). */
static enum cp_status compute_producers(const struct cp_graph *g, int32_t **prod, struct cp_diag *d)
{
    size_t nt = cp_graph_n_tensors(g), nn = cp_graph_n_nodes(g);
    int32_t *p = cp_calloc(nt ? nt : 1, sizeof *p);
    *prod = NULL;
    if (!p)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory verifying the graph");
    for (size_t i = 0; i < nt; i++)
        p[i] = -1;
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++) {
            int32_t t = n->inputs[j];
            if (t < -1 || (t >= 0 && (size_t)t >= nt)) {
                free(p);
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "node '%s' (%s): input %zu refers to tensor index %d, "
                                   "which does not exist",
                                   node_label(n), n->op_type, j, t);
            }
        }
        for (size_t j = 0; j < n->n_outputs; j++) {
            int32_t t = n->outputs[j];
            if (t == -1)
                continue;
            if (t < 0 || (size_t)t >= nt) {
                free(p);
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "node '%s' (%s): output %zu refers to tensor index %d, "
                                   "which does not exist",
                                   node_label(n), n->op_type, j, t);
            }
            if (p[t] >= 0) {
                const struct cp_node *other = cp_graph_node(g, p[t]);
                free(p);
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "tensor '%s' is produced by both node '%s' (%s) and node "
                                   "'%s' (%s)",
                                   cp_graph_tensor(g, t)->name, node_label(other), other->op_type,
                                   node_label(n), n->op_type);
            }
            p[t] = (int32_t)i;
        }
    }
    *prod = p;
    return CP_OK;
}

/* ---- topological order ---------------------------------------------------- */

/* A binary min-heap of node indices: among ready nodes the earliest inserted
 * goes first, which keeps an already ordered graph unchanged. */
struct heap {
    int32_t *v;
    size_t n;
};

static void heap_push(struct heap *h, int32_t x)
{
    size_t i = h->n++;
    h->v[i] = x;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (h->v[parent] <= h->v[i])
            break;
        int32_t tmp = h->v[parent];
        h->v[parent] = h->v[i];
        h->v[i] = tmp;
        i = parent;
    }
}

static int32_t heap_pop(struct heap *h)
{
    int32_t top = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && h->v[l] < h->v[m])
            m = l;
        if (r < h->n && h->v[r] < h->v[m])
            m = r;
        if (m == i)
            break;
        int32_t tmp = h->v[m];
        h->v[m] = h->v[i];
        h->v[i] = tmp;
        i = m;
    }
    return top;
}

/* Some node still waiting after Kahn's algorithm is on a cycle or downstream
 * of one; walking producers backwards from it for n steps must end on the
 * cycle itself, which is the node worth naming. */
static enum cp_status report_cycle(const struct cp_graph *g, const int32_t *prod,
                                   const int32_t *indeg, struct cp_diag *d)
{
    size_t nn = cp_graph_n_nodes(g);
    int32_t cur = -1;
    for (size_t i = 0; i < nn; i++)
        if (!cp_graph_node(g, (int32_t)i)->dead && indeg[i] > 0) {
            cur = (int32_t)i;
            break;
        }
    int32_t via = -1;
    for (size_t step = 0; step <= nn && cur >= 0; step++) {
        const struct cp_node *n = cp_graph_node(g, cur);
        int32_t next = -1;
        for (size_t j = 0; j < n->n_inputs && next < 0; j++) {
            int32_t t = n->inputs[j];
            if (t >= 0 && prod[t] >= 0 && indeg[prod[t]] > 0) {
                next = prod[t];
                via = t;
            }
        }
        if (next < 0)
            break;
        cur = next;
    }
    const struct cp_node *n = cp_graph_node(g, cur);
    return cp_diag_set(d, CP_ERR_INVALID, "node '%s' (%s) is on a cycle (through tensor '%s')",
                       node_label(n), n->op_type, via >= 0 ? cp_graph_tensor(g, via)->name : "?");
}

static enum cp_status topo_with_producers(const struct cp_graph *g, const int32_t *prod,
                                          int32_t **order, size_t *n_order, struct cp_diag *d)
{
    enum cp_status st = CP_ERR_NOMEM;
    size_t nn = cp_graph_n_nodes(g);
    int32_t *indeg = cp_calloc(nn + 1, sizeof *indeg);
    size_t *start = cp_calloc(nn + 2, sizeof *start);
    int32_t *edges = NULL;
    int32_t *out = cp_calloc(nn + 1, sizeof *out);
    struct heap h = {cp_calloc(nn + 1, sizeof *h.v), 0};
    if (!indeg || !start || !out || !h.v)
        goto out_nomem;

    /* Consumer lists in CSR form: start[p]..start[p+1] are the consumers of
     * node p, one entry per (input slot) edge. */
    size_t n_edges = 0;
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++) {
            int32_t t = n->inputs[j];
            if (t >= 0 && prod[t] >= 0) {
                start[prod[t] + 1]++;
                indeg[i]++;
                n_edges++;
            }
        }
    }
    for (size_t i = 0; i < nn; i++)
        start[i + 1] += start[i];
    edges = cp_calloc(n_edges + 1, sizeof *edges);
    size_t *fill = cp_calloc(nn + 1, sizeof *fill);
    if (!edges || !fill) {
        free(fill);
        goto out_nomem;
    }
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++) {
            int32_t t = n->inputs[j];
            if (t >= 0 && prod[t] >= 0) {
                int32_t p = prod[t];
                edges[start[p] + fill[p]++] = (int32_t)i;
            }
        }
    }
    free(fill);

    size_t live = 0;
    for (size_t i = 0; i < nn; i++) {
        if (cp_graph_node(g, (int32_t)i)->dead)
            continue;
        live++;
        if (indeg[i] == 0)
            heap_push(&h, (int32_t)i);
    }
    size_t k = 0;
    while (h.n > 0) {
        int32_t x = heap_pop(&h);
        out[k++] = x;
        for (size_t e = start[x]; e < start[x + 1]; e++)
            if (--indeg[edges[e]] == 0)
                heap_push(&h, edges[e]);
    }
    if (k != live) {
        st = report_cycle(g, prod, indeg, d);
        goto out_free;
    }
    *order = out;
    *n_order = k;
    out = NULL;
    st = CP_OK;
    goto out_free;

out_nomem:
    st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory ordering the graph");
out_free:
    free(h.v);
    free(out);
    free(edges);
    free(start);
    free(indeg);
    return st;
}

enum cp_status cp_graph_topo_order(const struct cp_graph *g, int32_t **order, size_t *n,
                                   struct cp_diag *d)
{
    *order = NULL;
    *n = 0;
    int32_t *prod;
    enum cp_status st = compute_producers(g, &prod, d);
    if (st != CP_OK)
        return st;
    st = topo_with_producers(g, prod, order, n, d);
    free(prod);
    return st;
}

/* ---- verification --------------------------------------------------------- */

/* qsort has no context argument in C11; sort (name, index) pairs instead. */
struct named {
    const char *name;
    int32_t index;
};

static int cmp_named(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return (x->index > y->index) - (x->index < y->index);
}

/* Report the first duplicated name in `v` (sorted by name, then index). */
static const struct named *first_duplicate(struct named *v, size_t n)
{
    if (n < 2)
        return NULL;
    qsort(v, n, sizeof *v, cmp_named);
    for (size_t i = 1; i < n; i++)
        if (strcmp(v[i - 1].name, v[i].name) == 0)
            return &v[i - 1];
    return NULL;
}

static enum cp_status check_unique_names(const struct cp_graph *g, struct cp_diag *d)
{
    size_t nt = cp_graph_n_tensors(g), nn = cp_graph_n_nodes(g);
    struct named *v = cp_calloc((nt > nn ? nt : nn) + 1, sizeof *v);
    if (!v)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory verifying the graph");
    enum cp_status st = CP_OK;
    size_t k = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        if (!t->name || !t->name[0]) {
            st = cp_diag_set(d, CP_ERR_INVALID, "tensor %zu has no name", i);
            goto out_free;
        }
        v[k++] = (struct named){t->name, (int32_t)i};
    }
    const struct named *dup = first_duplicate(v, k);
    if (dup) {
        st = cp_diag_set(d, CP_ERR_INVALID, "tensor name '%s' is used by tensors %d and %d",
                         dup->name, dup[0].index, dup[1].index);
        goto out_free;
    }
    k = 0;
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        if (!n->name || !n->name[0]) {
            st = cp_diag_set(d, CP_ERR_INVALID, "node %zu (%s) has no name", i, n->op_type);
            goto out_free;
        }
        v[k++] = (struct named){n->name, (int32_t)i};
    }
    dup = first_duplicate(v, k);
    if (dup) {
        const struct cp_node *a = cp_graph_node(g, dup[0].index);
        const struct cp_node *b = cp_graph_node(g, dup[1].index);
        st = cp_diag_set(d, CP_ERR_INVALID, "node name '%s' is used by two nodes (%s and %s)",
                         dup->name, a->op_type, b->op_type);
    }
out_free:
    free(v);
    return st;
}

static bool is_source(const struct cp_tensor *t)
{
    return t->kind == CP_TENSOR_INPUT || t->kind == CP_TENSOR_INITIALIZER;
}

static bool is_graph_input(const struct cp_graph *g, int32_t t)
{
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++)
        if (cp_graph_input(g, i) == t)
            return true;
    /* A subgraph's outer-scope references are inputs too (graph.h). */
    for (size_t i = 0; i < cp_graph_n_outer(g); i++)
        if (cp_graph_outer(g, i) == t)
            return true;
    return false;
}

static enum cp_status check_edges(const struct cp_graph *g, const int32_t *prod, struct cp_diag *d)
{
    size_t nt = cp_graph_n_tensors(g), nn = cp_graph_n_nodes(g);
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++) {
            int32_t ti = n->inputs[j];
            if (ti < 0)
                continue;
            const struct cp_tensor *t = cp_graph_tensor(g, ti);
            if (!is_source(t) && prod[ti] < 0)
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "node '%s' (%s): input %zu '%s' is dangling: it is not a "
                                   "graph input, an initializer or the output of any node",
                                   node_label(n), n->op_type, j, t->name);
            if (t->kind == CP_TENSOR_INPUT && !is_graph_input(g, ti))
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "node '%s' (%s): input %zu '%s' is marked as a graph input "
                                   "but is not in the graph's input list",
                                   node_label(n), n->op_type, j, t->name);
        }
        for (size_t j = 0; j < n->n_outputs; j++) {
            int32_t ti = n->outputs[j];
            if (ti < 0)
                continue;
            const struct cp_tensor *t = cp_graph_tensor(g, ti);
            if (is_source(t))
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "node '%s' (%s): output %zu '%s' is a graph %s and cannot "
                                   "be produced by a node",
                                   node_label(n), n->op_type, j, t->name,
                                   t->kind == CP_TENSOR_INPUT ? "input" : "initializer");
        }
        for (size_t j = 0; j < n->n_attrs; j++) {
            const struct cp_attr *a = &n->attrs[j];
            if (a->type == CP_ATTR_TENSOR && (a->tensor < 0 || (size_t)a->tensor >= nt))
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "node '%s' (%s): attribute '%s' refers to tensor index %d, "
                                   "which does not exist",
                                   node_label(n), n->op_type, a->name, a->tensor);
        }
    }
    for (size_t i = 0; i < cp_graph_n_inputs(g); i++) {
        int32_t ti = cp_graph_input(g, i);
        if (ti < 0 || (size_t)ti >= nt)
            return cp_diag_set(d, CP_ERR_INVALID, "graph input %zu refers to no tensor", i);
        const struct cp_tensor *t = cp_graph_tensor(g, ti);
        if (prod[ti] >= 0)
            return cp_diag_set(d, CP_ERR_INVALID, "graph input '%s' is also produced by node '%s'",
                               t->name, node_label(cp_graph_node(g, prod[ti])));
    }
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++) {
        int32_t ti = cp_graph_output(g, i);
        if (ti < 0 || (size_t)ti >= nt)
            return cp_diag_set(d, CP_ERR_INVALID, "graph output %zu refers to no tensor", i);
        const struct cp_tensor *t = cp_graph_tensor(g, ti);
        if (!is_source(t) && prod[ti] < 0)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "graph output '%s' is not produced by any live node", t->name);
    }
    return CP_OK;
}

/* Each subgraph is a graph of its own; its outer-scope references must
 * each have an input of the node to read. */
static enum cp_status verify_subgraphs(const struct cp_graph *g, struct cp_diag *d)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        for (size_t j = 0; !n->dead && j < n->n_attrs; j++) {
            const struct cp_attr *a = &n->attrs[j];
            if (a->type != CP_ATTR_GRAPH)
                continue;
            if (!cp_op_is_control(n->op))
                return cp_diag_set(d, CP_ERR_INVALID,
                                   "node '%s' (%s): attribute '%s' is a subgraph, which only If, "
                                   "Loop and Scan may carry",
                                   node_label(n), n->op_type, a->name);
            struct cp_diag local;
            cp_diag_init(&local);
            enum cp_status st = cp_graph_verify(a->graph, &local);
            if (st != CP_OK)
                return cp_diag_set(d, st, "node '%s' (%s), attribute '%s': %s", node_label(n),
                                   n->op_type, a->name, local.msg);
            for (size_t k = 0; k < cp_graph_n_outer(a->graph); k++)
                if (cp_control_outer_slot(g, n, a->graph, k) < 0)
                    return cp_diag_set(
                        d, CP_ERR_INVALID,
                        "node '%s' (%s), attribute '%s': outer-scope reference '%s' has no input "
                        "of the node to read",
                        node_label(n), n->op_type, a->name,
                        cp_graph_tensor(a->graph, cp_graph_outer(a->graph, k))->name);
        }
    }
    return CP_OK;
}

enum cp_status cp_graph_verify(const struct cp_graph *g, struct cp_diag *d)
{
    enum cp_status st = check_unique_names(g, d);
    if (st != CP_OK)
        return st;
    int32_t *prod;
    st = compute_producers(g, &prod, d);
    if (st != CP_OK)
        return st;
    st = check_edges(g, prod, d);
    if (st == CP_OK) {
        int32_t *order;
        size_t n;
        st = topo_with_producers(g, prod, &order, &n, d);
        if (st == CP_OK)
            free(order);
    }
    free(prod);
    if (st == CP_OK)
        st = verify_subgraphs(g, d);
    return st;
}

/* ---- compaction ------------------------------------------------------------ */

enum cp_status cp_graph_compact(struct cp_graph *g, struct cp_diag *d)
{
    int32_t *order;
    size_t n;
    enum cp_status st = cp_graph_topo_order(g, &order, &n, d);
    if (st != CP_OK)
        return st;
    st = cp_graph_reorder_nodes_(g, order, n);
    free(order);
    if (st != CP_OK)
        return cp_diag_set(d, st, "compacting the graph: %s", cp_status_str(st));
    return CP_OK;
}
