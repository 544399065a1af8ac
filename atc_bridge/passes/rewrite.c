/* Graph-rewriting helpers shared by the passes (see rewrite.h). */
#include "atc_bridge/passes/rewrite.h"
#include "graph/op_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cp_rw_is_graph_output(const struct cp_graph *g, int32_t t)
{
    for (size_t i = 0; i < cp_graph_n_outputs(g); i++)
        if (cp_graph_output(g, i) == t)
            return true;
    return false;
}

size_t cp_rw_n_uses(const struct cp_graph *g, int32_t t)
{
    size_t uses = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            uses += n->inputs[j] == t;
    }
    return uses;
}

int32_t cp_rw_sole_consumer(const struct cp_graph *g, int32_t t)
{
    if (cp_rw_is_graph_output(g, t))
        return -1;
    int32_t found = -1;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == t) {
                if (found >= 0 && found != (int32_t)i)
                    return -1;
                found = (int32_t)i;
            }
    }
    return found;
}

size_t cp_rw_replace_uses(struct cp_graph *g, int32_t from, int32_t to)
{
    size_t k = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] == from) {
                n->inputs[j] = to;
                k++;
            }
    }
    return k;
}

void cp_rw_kill(struct cp_graph *g, int32_t node)
{
    struct cp_node *n = cp_graph_node(g, node);
    if (!n)
        return;
    n->dead = true;
    for (size_t j = 0; j < n->n_outputs; j++) {
        struct cp_tensor *t = cp_graph_tensor(g, n->outputs[j]);
        if (t && t->producer == node)
            t->producer = -1;
    }
}

void cp_rw_unique_tensor_name(const struct cp_graph *g, const char *base, char *out, size_t cap)
{
    snprintf(out, cap, "%s", base);
    for (unsigned k = 1; cp_graph_find_tensor(g, out) >= 0; k++)
        snprintf(out, cap, "%s_%u", base, k);
}

static bool node_name_taken(const struct cp_graph *g, const char *name)
{
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (!n->dead && n->name && strcmp(n->name, name) == 0)
            return true;
    }
    return false;
}

void cp_rw_unique_node_name(const struct cp_graph *g, const char *base, char *out, size_t cap)
{
    snprintf(out, cap, "%s", base);
    for (unsigned k = 1; node_name_taken(g, out); k++)
        snprintf(out, cap, "%s_%u", base, k);
}

enum cp_status cp_rw_add_initializer(struct cp_graph *g, const char *base, enum cp_dtype dtype,
                                     const struct cp_shape *shape, void *data, size_t nbytes,
                                     int32_t *index, struct cp_diag *d)
{
    char name[512];
    cp_rw_unique_tensor_name(g, base, name, sizeof name);
    enum cp_status st = cp_graph_add_tensor(g, name, dtype, shape, CP_TENSOR_INITIALIZER, index, d);
    if (st != CP_OK) {
        free(data);
        return st;
    }
    return cp_graph_set_data(g, *index, data, nbytes, CP_DATA_HEAP, d);
}

/* Append the origins of `n` not yet in v[0..*k). */
static void add_origins(const char **v, size_t *k, const struct cp_node *n)
{
    for (size_t i = 0; i < n->n_origins; i++) {
        bool dup = false;
        for (size_t j = 0; j < *k && !dup; j++)
            dup = strcmp(v[j], n->origins[i]) == 0;
        if (!dup)
            v[(*k)++] = n->origins[i];
    }
}

enum cp_status cp_rw_add_node(struct cp_graph *g, const char *name, const char *op_type,
                              const char *domain, const int32_t *inputs, size_t n_inputs,
                              const int32_t *outputs, size_t n_outputs, const int32_t *from,
                              size_t n_from, int32_t *index, struct cp_diag *d)
{
    size_t total = 0;
    for (size_t i = 0; i < n_from; i++)
        total += cp_graph_node(g, from[i])->n_origins;
    const char **origins = cp_calloc(total + 1, sizeof *origins);
    if (!origins)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory adding node '%s'", name);
    size_t k = 0;
    for (size_t i = 0; i < n_from; i++)
        add_origins(origins, &k, cp_graph_node(g, from[i]));
    enum cp_status st = cp_graph_add_node(g, name, op_type, domain, inputs, n_inputs, outputs,
                                          n_outputs, origins, k, index, d);
    free(origins);
    return st;
}

enum cp_status cp_rw_copy_attrs(struct cp_graph *g, int32_t dst, const struct cp_node *src)
{
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < src->n_attrs && st == CP_OK; i++) {
        const struct cp_attr *a = &src->attrs[i];
        switch (a->type) {
        case CP_ATTR_INT:
            st = cp_node_set_int(g, dst, a->name, a->i);
            break;
        case CP_ATTR_FLOAT:
            st = cp_node_set_float(g, dst, a->name, a->f);
            break;
        case CP_ATTR_STRING:
            st = cp_node_set_string(g, dst, a->name, a->s);
            break;
        case CP_ATTR_INTS:
            st = cp_node_set_ints(g, dst, a->name, a->ints, a->n);
            break;
        case CP_ATTR_FLOATS:
            st = cp_node_set_floats(g, dst, a->name, a->floats, a->n);
            break;
        case CP_ATTR_STRINGS:
            st = cp_node_set_strings(g, dst, a->name, a->strings, a->n);
            break;
        case CP_ATTR_TENSOR:
            st = cp_node_set_tensor(g, dst, a->name, a->tensor);
            break;
        case CP_ATTR_GRAPH:
            /* Subgraphs have one owner; passes do not copy them. */
            st = CP_ERR_UNSUPPORTED;
            break;
        }
    }
    return st;
}

enum cp_status cp_rw_merge_origins(struct cp_graph *g, int32_t dst, const struct cp_node *src)
{
    struct cp_node *n = cp_graph_node(g, dst);
    const char **v = cp_graph_alloc(g, (n->n_origins + src->n_origins + 1) * sizeof *v);
    if (!v)
        return CP_ERR_NOMEM;
    size_t k = 0;
    add_origins(v, &k, n);
    add_origins(v, &k, src);
    n->origins = v;
    n->n_origins = k;
    return CP_OK;
}

bool cp_rw_attr_ints(const struct cp_node *n, const char *name, int64_t *out, size_t cap,
                     size_t *len)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    if (!a || a->type != CP_ATTR_INTS || a->n > cap)
        return false;
    for (size_t i = 0; i < a->n; i++)
        out[i] = a->ints[i];
    *len = a->n;
    return true;
}

const void *cp_rw_const_data(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = cp_graph_tensor(g, t);
    if (!T || T->kind != CP_TENSOR_INITIALIZER || !T->data)
        return NULL;
    return T->data;
}

const struct cp_tensor *cp_rw_static4(const struct cp_graph *g, int32_t t)
{
    const struct cp_tensor *T = t >= 0 ? cp_graph_tensor(g, t) : NULL;
    return T && T->shape.rank == 4 && cp_shape_is_static(&T->shape) ? T : NULL;
}

const struct cp_tensor *cp_rw_channel_gather(const struct cp_graph *g, const struct cp_node *n)
{
    if (n->dead || n->op != CP_OP_GATHER || n->n_inputs != 2 || n->n_outputs != 1 ||
        !cp_rw_static4(g, n->inputs[0]) || !cp_rw_static4(g, n->outputs[0]))
        return NULL;
    int64_t axis = cp_node_attr_int(n, "axis", 0);
    const struct cp_tensor *it = cp_graph_tensor(g, n->inputs[1]);
    if ((axis != 1 && axis != -3) || !it ||
        (it->dtype != CP_DTYPE_I64 && it->dtype != CP_DTYPE_I32) || it->shape.rank != 1 ||
        !cp_shape_is_static(&it->shape) || !cp_rw_const_data(g, n->inputs[1]))
        return NULL;
    return it;
}

bool cp_rw_channel_slice(const struct cp_graph *g, const struct cp_node *n, int64_t *first,
                         int64_t *step)
{
    if (n->dead || n->op != CP_OP_SLICE || n->n_outputs != 1 || n->n_inputs < 1 || n->n_inputs > 5)
        return false;
    const struct cp_tensor *x = cp_rw_static4(g, n->inputs[0]),
                           *y = cp_rw_static4(g, n->outputs[0]);
    if (!x || !y)
        return false;
    const void *in_data[5] = {NULL};
    for (size_t k = 1; k < n->n_inputs; k++)
        if (n->inputs[k] >= 0 && !(in_data[k] = cp_rw_const_data(g, n->inputs[k])))
            return false;
    if (!cp_eval_slice_plan(g, n, in_data, &x->shape, &y->shape, first, step))
        return false;
    for (int a = 0; a < 4; a++)
        if (a != 1 &&
            (first[a] != 0 || step[a] != 1 || y->shape.dims[a].value != x->shape.dims[a].value))
            return false;
    return true;
}
