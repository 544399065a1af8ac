/* The graph index and rewrite helpers of the layout passes (see
 * layout_internal.h). */
#include "atc_bridge/passes/layout_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_index(struct cp_lay *l)
{
    free(l->use_start);
    free(l->uses);
    free(l->is_output);
    l->use_start = NULL;
    l->uses = NULL;
    l->is_output = NULL;
}

enum cp_status cp_lay_reindex(struct cp_lay *l)
{
    free_index(l);
    struct cp_graph *g = l->g;
    size_t nt = cp_graph_n_tensors(g), nn = cp_graph_n_nodes(g), total = 0;
    l->n_tensors = nt;
    l->use_start = calloc(nt + 1, sizeof *l->use_start);
    l->is_output = calloc(nt + 1, sizeof *l->is_output);
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (!n->dead)
            total += n->n_inputs;
    }
    l->uses = calloc(total + 1, sizeof *l->uses);
    if (!l->use_start || !l->is_output || !l->uses) {
        free_index(l);
        return cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory in a layout pass");
    }
    /* Counting sort of (tensor, node, slot) by tensor, nodes in order. */
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        for (size_t j = 0; !n->dead && j < n->n_inputs; j++)
            if (n->inputs[j] >= 0 && (size_t)n->inputs[j] < nt)
                l->use_start[n->inputs[j] + 1]++;
    }
    for (size_t t = 0; t < nt; t++)
        l->use_start[t + 1] += l->use_start[t];
    int32_t *fill = calloc(nt + 1, sizeof *fill);
    if (!fill) {
        free_index(l);
        return cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory in a layout pass");
    }
    for (size_t i = 0; i < nn; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        for (size_t j = 0; !n->dead && j < n->n_inputs; j++) {
            int32_t t = n->inputs[j];
            if (t < 0 || (size_t)t >= nt)
                continue;
            struct cp_lay_use *u = &l->uses[l->use_start[t] + fill[t]++];
            u->node = (int32_t)i;
            u->slot = (int32_t)j;
        }
    }
    free(fill);
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++) {
        int32_t t = cp_graph_output(g, i);
        if (t >= 0 && (size_t)t < nt)
            l->is_output[t] = true;
    }
    return CP_OK;
}

enum cp_status cp_lay_init(struct cp_lay *l, struct cp_graph *g, struct cp_diag *d)
{
    memset(l, 0, sizeof *l);
    l->g = g;
    l->d = d;
    return cp_lay_reindex(l);
}

void cp_lay_release(struct cp_lay *l)
{
    free_index(l);
}

const struct cp_lay_use *cp_lay_uses(const struct cp_lay *l, int32_t t, size_t *n)
{
    if (t < 0 || (size_t)t >= l->n_tensors) {
        *n = 0;
        return l->uses;
    }
    *n = (size_t)(l->use_start[t + 1] - l->use_start[t]);
    return &l->uses[l->use_start[t]];
}

struct cp_node *cp_lay_producer(const struct cp_lay *l, int32_t t)
{
    if (t < 0)
        return NULL;
    int32_t p = cp_graph_tensor(l->g, t)->producer;
    if (p < 0)
        return NULL;
    struct cp_node *n = cp_graph_node(l->g, p);
    return n && !n->dead ? n : NULL;
}

bool cp_lay_is_const(const struct cp_lay *l, int32_t t)
{
    if (t < 0)
        return false;
    const struct cp_tensor *T = cp_graph_tensor(l->g, t);
    return T->kind == CP_TENSOR_INITIALIZER && T->data && cp_shape_is_static(&T->shape);
}

bool cp_lay_is_plain(enum cp_layout layout)
{
    return layout == CP_LAYOUT_UNDEF || layout == CP_LAYOUT_ND || layout == CP_LAYOUT_NCHW ||
           layout == CP_LAYOUT_NCDHW;
}

enum cp_layout cp_lay_plain_for_rank(int rank)
{
    return rank == 4 ? CP_LAYOUT_NCHW : rank == 5 ? CP_LAYOUT_NCDHW : CP_LAYOUT_ND;
}

static const char *fresh_tensor_name(const struct cp_graph *g, const char *base, const char *suffix,
                                     char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", base, suffix);
    for (int k = 2; cp_graph_find_tensor(g, buf) >= 0; k++)
        snprintf(buf, cap, "%s%s_%d", base, suffix, k);
    return buf;
}

static bool node_name_taken(const struct cp_graph *g, const char *name)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->name && strcmp(n->name, name) == 0)
            return true;
    }
    return false;
}

const char *cp_lay_fresh_node_name(const struct cp_graph *g, const char *base, const char *suffix,
                                   char *buf, size_t cap)
{
    snprintf(buf, cap, "%s%s", base, suffix);
    for (int k = 2; node_name_taken(g, buf); k++)
        snprintf(buf, cap, "%s%s_%d", base, suffix, k);
    return buf;
}

enum cp_status cp_lay_new_tensor_like(struct cp_lay *l, int32_t t, const char *base,
                                      const char *suffix, int32_t *out)
{
    const struct cp_tensor *T = cp_graph_tensor(l->g, t);
    char name[600];
    fresh_tensor_name(l->g, base, suffix, name, sizeof name);
    struct cp_shape s = T->shape;
    enum cp_dtype dt = T->dtype;
    return cp_graph_add_tensor(l->g, name, dt, &s, CP_TENSOR_INTERMEDIATE, out, l->d);
}

enum cp_status cp_lay_new_const(struct cp_lay *l, const char *base, const char *suffix,
                                enum cp_dtype dt, int rank, const int64_t *dims, const void *data,
                                size_t nbytes, int32_t *out)
{
    struct cp_shape s;
    cp_shape_set(&s, rank, dims);
    char name[600];
    fresh_tensor_name(l->g, base, suffix, name, sizeof name);
    enum cp_status st = cp_graph_add_tensor(l->g, name, dt, &s, CP_TENSOR_INITIALIZER, out, l->d);
    if (st != CP_OK)
        return st;
    void *copy = malloc(nbytes ? nbytes : 1);
    if (!copy)
        return cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory making constant '%s'", name);
    memcpy(copy, data, nbytes);
    return cp_graph_set_data(l->g, *out, copy, nbytes, CP_DATA_HEAP, l->d);
}

enum cp_status cp_lay_add_transdata(struct cp_lay *l, int32_t src, enum cp_layout from, int32_t dst,
                                    enum cp_layout to, int32_t origin_of, int32_t *idx)
{
    char name[700];
    cp_lay_fresh_node_name(l->g, cp_graph_tensor(l->g, dst)->name, "/TransData", name, sizeof name);
    const char *const *origins = NULL;
    size_t n_origins = 0;
    if (origin_of >= 0) {
        const struct cp_node *o = cp_graph_node(l->g, origin_of);
        origins = o->origins;
        n_origins = o->n_origins;
    }
    int32_t node;
    enum cp_status st = cp_graph_add_node(l->g, name, "TransData", CP_DOMAIN, &src, 1, &dst, 1,
                                          origins, n_origins, &node, l->d);
    if (st != CP_OK)
        return st;
    if (cp_node_set_string(l->g, node, "src_format", cp_layout_name(from)) != CP_OK ||
        cp_node_set_string(l->g, node, "dst_format", cp_layout_name(to)) != CP_OK)
        return cp_diag_set(l->d, CP_ERR_NOMEM, "out of memory adding TransData '%s'", name);
    cp_graph_tensor(l->g, dst)->layout = to;
    if (idx)
        *idx = node;
    return CP_OK;
}
