/* The graph section: cp_graph <-> cpom.Graph (protobuf-c).
 *
 * Packing points the protobuf message at the graph's own strings and arrays
 * (nothing is copied but the message structs), so the packed bytes depend on
 * the graph's content only. Unpacking trusts nothing: every enum value,
 * rank, index, name and blob is checked before the graph is rebuilt through
 * the public graph API. */
#include "om/om_internal.h"
#include "core/hashmap.h"

#include "proto/cpom.pb-c.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- name sets ------------------------------------------------------------ */

/* Insert `name` into a set with room reserved for it (so the insert cannot
 * fail); false when it was there already. */
static bool name_is_new(struct cp_strmap *set, const char *name)
{
    bool found = false;
    (void)cp_strmap_add(set, name, strlen(name), 0, &found, NULL);
    return !found;
}

/* ---- packing ---------------------------------------------------------------- */

/* The message structs of one pack: a few arrays, freed together. */
struct pack_arrays {
    Cpom__Tensor *tensors;
    Cpom__Tensor **tensor_ptrs;
    Cpom__Dim *dims;
    Cpom__Dim **dim_ptrs;
    Cpom__Node *nodes;
    Cpom__Node **node_ptrs;
    Cpom__Attr *attrs;
    Cpom__Attr **attr_ptrs;
    struct om_packed_graph *subs; /* per attribute: a packed subgraph */
    size_t n_subs;
};

static void pack_arrays_free(struct pack_arrays *a)
{
    free(a->tensors);
    free(a->tensor_ptrs);
    free(a->dims);
    free(a->dim_ptrs);
    free(a->nodes);
    free(a->node_ptrs);
    free(a->attrs);
    free(a->attr_ptrs);
    for (size_t i = 0; a->subs && i < a->n_subs; i++) {
        free(a->subs[i].bytes);
        free(a->subs[i].blob_offset);
    }
    free(a->subs);
}

static enum cp_status check_tensor(const struct cp_tensor *t, size_t i, struct cp_diag *d)
{
    if (!t->name)
        return cp_diag_set(d, CP_ERR_INVALID, "tensor %zu has no name", i);
    if ((unsigned)t->dtype >= CP_DTYPE_COUNT)
        return cp_diag_set(d, CP_ERR_INVALID, "tensor '%s': dtype %d out of range", t->name,
                           (int)t->dtype);
    if ((unsigned)t->layout >= CP_LAYOUT_COUNT)
        return cp_diag_set(d, CP_ERR_INVALID, "tensor '%s': layout %d out of range", t->name,
                           (int)t->layout);
    if ((unsigned)t->kind > CP_TENSOR_INITIALIZER)
        return cp_diag_set(d, CP_ERR_INVALID, "tensor '%s': kind %d out of range", t->name,
                           (int)t->kind);
    if (t->shape.rank > CP_MAX_RANK)
        return cp_diag_set(d, CP_ERR_INVALID, "tensor '%s': rank %d exceeds %d", t->name,
                           t->shape.rank, CP_MAX_RANK);
    if (t->data) {
        size_t want;
        if (!cp_shape_nbytes(&t->shape, t->dtype, &want) || want != t->nbytes)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "tensor '%s': %zu bytes of data do not match its shape and "
                               "dtype %s",
                               t->name, t->nbytes, cp_dtype_name(t->dtype));
    }
    return CP_OK;
}

static enum cp_status check_node(const struct cp_graph *g, const struct cp_node *n, size_t i,
                                 uint8_t *produced, struct cp_diag *d)
{
    int32_t nt = (int32_t)cp_graph_n_tensors(g);
    if (!n->name || !n->op_type)
        return cp_diag_set(d, CP_ERR_INVALID, "node %zu has no name or op type", i);
    if ((unsigned)n->op >= CP_OP_COUNT)
        return cp_diag_set(d, CP_ERR_INVALID, "node '%s': op %d out of range", n->name, (int)n->op);
    for (size_t k = 0; k < n->n_inputs; k++)
        if (n->inputs[k] < -1 || n->inputs[k] >= nt)
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': input %zu refers to no tensor",
                               n->name, k);
    for (size_t k = 0; k < n->n_outputs; k++) {
        int32_t o = n->outputs[k];
        if (o == -1)
            continue;
        if (o < 0 || o >= nt)
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': output %zu refers to no tensor",
                               n->name, k);
        const struct cp_tensor *t = cp_graph_tensor(g, o);
        if (t->kind != CP_TENSOR_INTERMEDIATE || produced[o])
            return cp_diag_set(d, CP_ERR_INVALID,
                               "node '%s': output '%s' is not an intermediate tensor of its "
                               "own",
                               n->name, t->name);
        produced[o] = 1;
    }
    for (size_t k = 0; k < n->n_origins; k++)
        if (!n->origins[k])
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': origin %zu is NULL", n->name, k);
    for (size_t k = 0; k < n->n_attrs; k++) {
        const struct cp_attr *a = &n->attrs[k];
        if (!a->name || a->type < CP_ATTR_INT || a->type > CP_ATTR_GRAPH ||
            (a->type == CP_ATTR_GRAPH && !a->graph))
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': attribute %zu is malformed", n->name,
                               k);
        for (size_t j = 0; j < k; j++)
            if (strcmp(n->attrs[j].name, a->name) == 0)
                return cp_diag_set(d, CP_ERR_INVALID, "node '%s': attribute '%s' appears twice",
                                   n->name, a->name);
        if (a->type == CP_ATTR_TENSOR && (a->tensor < 0 || a->tensor >= nt))
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': attribute '%s' refers to no tensor",
                               n->name, a->name);
        if (a->type == CP_ATTR_STRINGS)
            for (size_t j = 0; j < a->n; j++)
                if (!a->strings[j])
                    return cp_diag_set(d, CP_ERR_INVALID,
                                       "node '%s': attribute '%s': string %zu is NULL", n->name,
                                       a->name, j);
    }
    return CP_OK;
}

/* Every check the reader makes, so that what we write can be read back. */
static enum cp_status check_graph(const struct cp_graph *g, struct cp_diag *d)
{
    size_t nt = cp_graph_n_tensors(g), nn = cp_graph_n_nodes(g);
    struct cp_strmap names;
    cp_strmap_init(&names);
    uint8_t *produced = cp_calloc(nt ? nt : 1, 1);
    if (!produced || cp_strmap_reserve(&names, nt > nn ? nt : nn) != CP_OK) {
        free(produced);
        cp_strmap_release(&names);
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory checking the graph");
    }
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < nt && st == CP_OK; i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        st = check_tensor(t, i, d);
        if (st == CP_OK && !name_is_new(&names, t->name))
            st = cp_diag_set(d, CP_ERR_INVALID, "two tensors are named '%s'", t->name);
    }
    /* Node names live in their own namespace. */
    cp_strmap_clear(&names);
    for (size_t i = 0; i < nn && st == CP_OK; i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        st = check_node(g, n, i, produced, d);
        if (st == CP_OK && !name_is_new(&names, n->name))
            st = cp_diag_set(d, CP_ERR_INVALID, "two nodes are named '%s'", n->name);
    }
    for (size_t i = 0; i < cp_graph_n_inputs(g) && st == CP_OK; i++)
        if (cp_graph_input(g, i) < 0 || (size_t)cp_graph_input(g, i) >= nt)
            st = cp_diag_set(d, CP_ERR_INVALID, "graph input %zu refers to no tensor", i);
    for (size_t i = 0; i < cp_graph_n_outputs(g) && st == CP_OK; i++)
        if (cp_graph_output(g, i) < 0 || (size_t)cp_graph_output(g, i) >= nt)
            st = cp_diag_set(d, CP_ERR_INVALID, "graph output %zu refers to no tensor", i);
    cp_strmap_release(&names);
    free(produced);
    return st;
}

/* Blob offsets: each blob at the next multiple of 64. */
static enum cp_status layout_blobs(const struct cp_graph *g, uint64_t *offs, uint64_t *end,
                                   struct cp_diag *d)
{
    uint64_t cursor = 0;
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        offs[i] = UINT64_MAX;
        if (!t->data)
            continue;
        uint64_t off;
        if (!om_align_up(cursor, &off) || t->nbytes > UINT64_MAX - off)
            return cp_diag_set(d, CP_ERR_INVALID, "weights are too large for a .om");
        offs[i] = off;
        cursor = off + t->nbytes;
    }
    *end = cursor;
    return CP_OK;
}

static void fill_tensor(Cpom__Tensor *m, const struct cp_tensor *t, Cpom__Dim *dims,
                        Cpom__Dim **dim_ptrs, uint64_t blob_offset, bool nested)
{
    cpom__tensor__init(m);
    m->name = (char *)t->name;
    m->has_dtype = true;
    m->dtype = (uint32_t)t->dtype;
    m->has_rank = true;
    m->rank = t->shape.rank < 0 ? -1 : t->shape.rank;
    m->has_layout = true;
    m->layout = (uint32_t)t->layout;
    m->has_kind = true;
    m->kind = (uint32_t)t->kind;
    for (int k = 0; k < m->rank; k++) {
        cpom__dim__init(&dims[k]);
        dims[k].has_value = true;
        dims[k].value = t->shape.dims[k].value;
        dims[k].sym = (char *)t->shape.dims[k].sym;
        dim_ptrs[k] = &dims[k];
    }
    m->n_dims = m->rank > 0 ? (size_t)m->rank : 0;
    m->dims = m->n_dims ? dim_ptrs : NULL;
    if (t->data && nested) {
        m->has_inline_data = true;
        m->inline_data.len = t->nbytes;
        m->inline_data.data = (uint8_t *)t->data;
    } else if (t->data) {
        m->has_data_offset = true;
        m->data_offset = blob_offset;
        m->has_data_bytes = true;
        m->data_bytes = t->nbytes;
    }
}

static void fill_attr(Cpom__Attr *m, const struct cp_attr *a, const struct om_packed_graph *sub)
{
    cpom__attr__init(m);
    m->name = (char *)a->name;
    m->has_type = true;
    m->type = (uint32_t)a->type;
    switch (a->type) {
    case CP_ATTR_INT:
        m->has_i = true;
        m->i = a->i;
        break;
    case CP_ATTR_FLOAT:
        m->has_f = true;
        m->f = a->f;
        break;
    case CP_ATTR_STRING:
        m->s = (char *)(a->s ? a->s : "");
        break;
    case CP_ATTR_INTS:
        m->n_ints = a->n;
        m->ints = (int64_t *)a->ints;
        break;
    case CP_ATTR_FLOATS:
        m->n_floats = a->n;
        m->floats = (float *)a->floats;
        break;
    case CP_ATTR_STRINGS:
        m->n_strings = a->n;
        m->strings = (char **)a->strings;
        break;
    case CP_ATTR_TENSOR:
        m->has_tensor = true;
        m->tensor = a->tensor;
        break;
    case CP_ATTR_GRAPH:
        m->has_graph = true;
        m->graph.len = sub->len;
        m->graph.data = sub->bytes;
        break;
    }
}

static void fill_node(Cpom__Node *m, const struct cp_node *n, Cpom__Attr *attrs,
                      Cpom__Attr **attr_ptrs, const struct om_packed_graph *subs)
{
    cpom__node__init(m);
    m->name = (char *)n->name;
    m->has_op = true;
    m->op = (uint32_t)n->op;
    m->op_type = (char *)n->op_type;
    m->domain = (char *)(n->domain ? n->domain : "");
    for (size_t k = 0; k < n->n_attrs; k++) {
        fill_attr(&attrs[k], &n->attrs[k], &subs[k]);
        attr_ptrs[k] = &attrs[k];
    }
    m->n_attrs = n->n_attrs;
    m->attrs = n->n_attrs ? attr_ptrs : NULL;
    m->n_inputs = n->n_inputs;
    m->inputs = n->inputs;
    m->n_outputs = n->n_outputs;
    m->outputs = n->outputs;
    m->n_origins = n->n_origins;
    m->origins = (char **)n->origins;
}

static enum cp_status alloc_arrays(const struct cp_graph *g, struct pack_arrays *a)
{
    size_t nt = cp_graph_n_tensors(g), nn = 0, n_dims = 0, n_attrs = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        n_dims += t->shape.rank > 0 ? (size_t)t->shape.rank : 0;
    }
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        nn++;
        n_attrs += n->n_attrs;
    }
    a->tensors = cp_calloc(nt + 1, sizeof *a->tensors);
    a->tensor_ptrs = cp_calloc(nt + 1, sizeof *a->tensor_ptrs);
    a->dims = cp_calloc(n_dims + 1, sizeof *a->dims);
    a->dim_ptrs = cp_calloc(n_dims + 1, sizeof *a->dim_ptrs);
    a->nodes = cp_calloc(nn + 1, sizeof *a->nodes);
    a->node_ptrs = cp_calloc(nn + 1, sizeof *a->node_ptrs);
    a->attrs = cp_calloc(n_attrs + 1, sizeof *a->attrs);
    a->attr_ptrs = cp_calloc(n_attrs + 1, sizeof *a->attr_ptrs);
    a->subs = cp_calloc(n_attrs + 1, sizeof *a->subs);
    a->n_subs = n_attrs;
    if (!a->subs || !a->tensors || !a->tensor_ptrs || !a->dims || !a->dim_ptrs || !a->nodes ||
        !a->node_ptrs || !a->attrs || !a->attr_ptrs)
        return CP_ERR_NOMEM;
    return CP_OK;
}

static int32_t *copy_io(const struct cp_graph *g, bool inputs, size_t *n)
{
    *n = inputs ? cp_graph_n_inputs(g) : cp_graph_n_outputs(g);
    int32_t *v = cp_calloc(*n + 1, sizeof *v);
    for (size_t i = 0; v && i < *n; i++)
        v[i] = inputs ? cp_graph_input(g, i) : cp_graph_output(g, i);
    return v;
}

static enum cp_status pack_graph(const struct cp_graph *g, bool nested, struct om_packed_graph *out,
                                 struct cp_diag *d);

enum cp_status om_graph_pack(const struct cp_graph *g, struct om_packed_graph *out,
                             struct cp_diag *d)
{
    return pack_graph(g, false, out, d);
}

/* A nested graph (a subgraph) keeps its initializers inline: no blobs. */
static enum cp_status pack_graph(const struct cp_graph *g, bool nested, struct om_packed_graph *out,
                                 struct cp_diag *d)
{
    memset(out, 0, sizeof *out);
    enum cp_status st = check_graph(g, d);
    if (st != CP_OK)
        return st;
    size_t nt = cp_graph_n_tensors(g);
    struct pack_arrays a;
    memset(&a, 0, sizeof a);
    Cpom__Graph gm;
    cpom__graph__init(&gm);
    uint64_t *offs = cp_calloc(nt + 1, sizeof *offs);
    int32_t *ins = copy_io(g, true, &gm.n_inputs);
    int32_t *outs = copy_io(g, false, &gm.n_outputs);
    if (!offs || !ins || !outs || alloc_arrays(g, &a) != CP_OK) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory packing the graph");
        goto out_free;
    }
    if (!nested && (st = layout_blobs(g, offs, &out->weights_len, d)) != CP_OK)
        goto out_free;
    gm.n_outer = cp_graph_n_outer(g);
    gm.outer = cp_calloc(gm.n_outer + 1, sizeof *gm.outer);
    if (!gm.outer) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory packing the graph");
        goto out_free;
    }
    for (size_t i = 0; i < gm.n_outer; i++)
        gm.outer[i] = cp_graph_outer(g, i);

    gm.name = (char *)cp_graph_name(g);
    gm.has_opset = true;
    gm.opset = cp_graph_opset(g);
    size_t next_dim = 0;
    for (size_t i = 0; i < nt; i++) {
        const struct cp_tensor *t = cp_graph_tensor(g, (int32_t)i);
        fill_tensor(&a.tensors[i], t, &a.dims[next_dim], &a.dim_ptrs[next_dim], offs[i], nested);
        next_dim += a.tensors[i].n_dims;
        a.tensor_ptrs[i] = &a.tensors[i];
    }
    gm.n_tensors = nt;
    gm.tensors = a.tensor_ptrs;
    size_t nn = 0, next_attr = 0;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (n->dead)
            continue;
        for (size_t k = 0; k < n->n_attrs; k++)
            if (n->attrs[k].type == CP_ATTR_GRAPH &&
                (st = pack_graph(n->attrs[k].graph, true, &a.subs[next_attr + k], d)) != CP_OK)
                goto out_free;
        fill_node(&a.nodes[nn], n, &a.attrs[next_attr], &a.attr_ptrs[next_attr],
                  &a.subs[next_attr]);
        next_attr += n->n_attrs;
        a.node_ptrs[nn] = &a.nodes[nn];
        nn++;
    }
    gm.n_nodes = nn;
    gm.nodes = a.node_ptrs;
    gm.inputs = ins;
    gm.outputs = outs;

    out->len = cpom__graph__get_packed_size(&gm);
    out->bytes = malloc(out->len ? out->len : 1);
    if (!out->bytes) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "out of memory packing the graph");
        goto out_free;
    }
    cpom__graph__pack(&gm, out->bytes);
    out->blob_offset = offs;
    offs = NULL;
out_free:
    free(gm.outer);
    pack_arrays_free(&a);
    free(ins);
    free(outs);
    free(offs);
    if (st != CP_OK) {
        free(out->bytes);
        memset(out, 0, sizeof *out);
    }
    return st;
}

/* ---- unpacking -------------------------------------------------------------- */

/* Everything that goes wrong below names the file and the section. */
static enum cp_status corrupt(struct cp_diag *d, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum cp_status corrupt(struct cp_diag *d, const char *name, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return cp_diag_set(d, CP_ERR_CORRUPT, "%s: graph section: %s", name, msg);
}

/* A failure of the graph API while rebuilding: out of memory stays NOMEM,
 * anything else means the file described an impossible graph. */
static enum cp_status api_failed(struct cp_diag *d, const char *name, enum cp_status st,
                                 const struct cp_diag *local, const char *what)
{
    if (st == CP_ERR_NOMEM)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
    return corrupt(d, name, "%s: %s", what, local->msg[0] ? local->msg : cp_status_str(st));
}

static enum cp_status read_shape(const char *name, const Cpom__Tensor *m, struct cp_shape *s,
                                 struct cp_graph *g, struct cp_diag *d)
{
    if (!m->has_rank)
        return corrupt(d, name, "tensor '%s' has no rank", m->name);
    if (m->rank < -1 || m->rank > CP_MAX_RANK)
        return corrupt(d, name, "tensor '%s': rank %d is out of range (-1..%d)", m->name,
                       (int)m->rank, CP_MAX_RANK);
    size_t want = m->rank < 0 ? 0 : (size_t)m->rank;
    if (m->n_dims != want)
        return corrupt(d, name, "tensor '%s': rank %d but %zu dimensions", m->name, (int)m->rank,
                       m->n_dims);
    memset(s, 0, sizeof *s);
    s->rank = m->rank;
    for (size_t k = 0; k < m->n_dims; k++) {
        const Cpom__Dim *dm = m->dims[k];
        if (!dm->has_value)
            return corrupt(d, name, "tensor '%s': dimension %zu has no value", m->name, k);
        s->dims[k].value = dm->value;
        if (dm->sym) {
            s->dims[k].sym = cp_graph_strdup(g, dm->sym);
            if (!s->dims[k].sym)
                return CP_ERR_NOMEM;
        }
    }
    return CP_OK;
}

static enum cp_status read_data(const char *name, const Cpom__Tensor *m, struct cp_graph *g,
                                int32_t idx, const uint8_t *weights, uint64_t weights_len,
                                struct cp_diag *d)
{
    if (m->has_inline_data) {
        /* A subgraph's constant: copied out of the message. */
        const struct cp_tensor *t = cp_graph_tensor(g, idx);
        size_t want;
        if (!cp_shape_nbytes(&t->shape, t->dtype, &want) || want != m->inline_data.len)
            return corrupt(d, name, "tensor '%s': %zu bytes of inline data do not fit its shape",
                           m->name, m->inline_data.len);
        void *copy = malloc(want ? want : 1);
        if (!copy)
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
        if (want)
            memcpy(copy, m->inline_data.data, want);
        struct cp_diag local;
        cp_diag_init(&local);
        enum cp_status st = cp_graph_set_data(g, idx, copy, want, CP_DATA_HEAP, &local);
        return st == CP_OK ? CP_OK : api_failed(d, name, st, &local, "tensor data");
    }
    if (!m->has_data_offset && !m->has_data_bytes)
        return CP_OK;
    if (!m->has_data_offset || !m->has_data_bytes)
        return corrupt(d, name, "tensor '%s': data offset or size missing", m->name);
    const struct cp_tensor *t = cp_graph_tensor(g, idx);
    size_t want;
    if (!cp_shape_nbytes(&t->shape, t->dtype, &want))
        return corrupt(d, name, "tensor '%s' has data but no static shape and dtype", m->name);
    if (m->data_bytes != (uint64_t)want)
        return corrupt(d, name, "tensor '%s': %llu bytes of data, shape and dtype need %zu",
                       m->name, (unsigned long long)m->data_bytes, want);
    if (m->data_offset % CP_OM_ALIGN != 0)
        return corrupt(d, name, "tensor '%s': data offset %llu is not a multiple of %d", m->name,
                       (unsigned long long)m->data_offset, CP_OM_ALIGN);
    if (m->data_offset > weights_len || m->data_bytes > weights_len - m->data_offset)
        return corrupt(d, name,
                       "tensor '%s': data [%llu, +%llu) lies outside the weights section "
                       "(%llu bytes)",
                       m->name, (unsigned long long)m->data_offset,
                       (unsigned long long)m->data_bytes, (unsigned long long)weights_len);
    struct cp_diag local;
    cp_diag_init(&local);
    enum cp_status st = cp_graph_set_data(g, idx, weights + m->data_offset, (size_t)m->data_bytes,
                                          CP_DATA_MMAP, &local);
    return st == CP_OK ? CP_OK : api_failed(d, name, st, &local, "tensor data");
}

static enum cp_status read_tensors(const char *name, const Cpom__Graph *gm, struct cp_graph *g,
                                   const uint8_t *weights, uint64_t weights_len, struct cp_diag *d)
{
    struct cp_strmap names;
    cp_strmap_init(&names);
    if (cp_strmap_reserve(&names, gm->n_tensors) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < gm->n_tensors && st == CP_OK; i++) {
        const Cpom__Tensor *m = gm->tensors[i];
        if (!m->name) {
            st = corrupt(d, name, "tensor %zu has no name", i);
            break;
        }
        if (!name_is_new(&names, m->name)) {
            st = corrupt(d, name, "two tensors are named '%s'", m->name);
            break;
        }
        if (m->dtype >= CP_DTYPE_COUNT || m->layout >= CP_LAYOUT_COUNT ||
            m->kind > CP_TENSOR_INITIALIZER) {
            st = corrupt(d, name,
                         "tensor '%s': dtype %u, layout %u or kind %u is out of range "
                         "(this cannprof knows < %d, < %d, <= %d)",
                         m->name, m->dtype, m->layout, m->kind, CP_DTYPE_COUNT, CP_LAYOUT_COUNT,
                         CP_TENSOR_INITIALIZER);
            break;
        }
        struct cp_shape shape;
        if ((st = read_shape(name, m, &shape, g, d)) != CP_OK) {
            if (st == CP_ERR_NOMEM)
                cp_diag_set(d, st, "%s: out of memory loading the graph", name);
            break;
        }
        struct cp_diag local;
        cp_diag_init(&local);
        int32_t idx;
        st = cp_graph_add_tensor(g, m->name, (enum cp_dtype)m->dtype, &shape,
                                 (enum cp_tensor_kind)m->kind, &idx, &local);
        if (st != CP_OK) {
            st = api_failed(d, name, st, &local, "adding a tensor");
            break;
        }
        cp_graph_tensor(g, idx)->layout = (enum cp_layout)m->layout;
        st = read_data(name, m, g, idx, weights, weights_len, d);
    }
    cp_strmap_release(&names);
    return st;
}

/* Subgraph nesting while unpacking (a corrupt file may nest without end). */
#define OM_MAX_SUBGRAPH_DEPTH 16
static _Thread_local int unpack_depth;

static enum cp_status read_attr(const char *name, const char *node, const Cpom__Attr *m,
                                struct cp_graph *g, int32_t idx, struct cp_diag *d)
{
    int32_t nt = (int32_t)cp_graph_n_tensors(g);
    enum cp_status st = CP_ERR_CORRUPT;
    switch (m->has_type ? m->type : 0) {
    case CP_ATTR_INT:
        if (m->has_i)
            st = cp_node_set_int(g, idx, m->name, m->i);
        break;
    case CP_ATTR_FLOAT:
        if (m->has_f)
            st = cp_node_set_float(g, idx, m->name, m->f);
        break;
    case CP_ATTR_STRING:
        if (m->s)
            st = cp_node_set_string(g, idx, m->name, m->s);
        break;
    case CP_ATTR_INTS:
        st = cp_node_set_ints(g, idx, m->name, m->ints, m->n_ints);
        break;
    case CP_ATTR_FLOATS:
        st = cp_node_set_floats(g, idx, m->name, m->floats, m->n_floats);
        break;
    case CP_ATTR_STRINGS:
        st = CP_OK;
        for (size_t k = 0; k < m->n_strings; k++)
            if (!m->strings[k])
                st = CP_ERR_CORRUPT;
        if (st == CP_OK)
            st =
                cp_node_set_strings(g, idx, m->name, (const char *const *)m->strings, m->n_strings);
        break;
    case CP_ATTR_TENSOR:
        if (m->has_tensor && m->tensor >= 0 && m->tensor < nt)
            st = cp_node_set_tensor(g, idx, m->name, m->tensor);
        break;
    case CP_ATTR_GRAPH: {
        if (!m->has_graph)
            break;
        if (unpack_depth >= OM_MAX_SUBGRAPH_DEPTH)
            return corrupt(d, name, "node '%s': attribute '%s': subgraphs nest deeper than %d",
                           node, m->name, OM_MAX_SUBGRAPH_DEPTH);
        struct cp_graph *sub = NULL;
        unpack_depth++;
        st = om_graph_unpack(name, m->graph.data, m->graph.len, NULL, 0, &sub, d);
        unpack_depth--;
        if (st != CP_OK)
            return st;
        st = cp_node_set_graph(g, idx, m->name, sub);
        break;
    }
    default:
        return corrupt(d, name, "node '%s': attribute '%s' has unknown type %u", node, m->name,
                       m->type);
    }
    if (st == CP_ERR_NOMEM)
        return cp_diag_set(d, st, "%s: out of memory loading the graph", name);
    if (st != CP_OK)
        return corrupt(d, name, "node '%s': attribute '%s' (type %u) has no valid value", node,
                       m->name, m->type);
    return CP_OK;
}

static enum cp_status read_node(const char *name, const Cpom__Node *m, struct cp_graph *g,
                                struct cp_diag *d)
{
    int32_t nt = (int32_t)cp_graph_n_tensors(g);
    if (m->op >= CP_OP_COUNT)
        return corrupt(d, name, "node '%s': op %u is out of range (this cannprof knows < %d)",
                       m->name, m->op, CP_OP_COUNT);
    if (!m->op_type)
        return corrupt(d, name, "node '%s' has no op type", m->name);
    for (size_t k = 0; k < m->n_inputs; k++)
        if (m->inputs[k] < -1 || m->inputs[k] >= nt)
            return corrupt(d, name, "node '%s': input %zu is tensor %d, out of range", m->name, k,
                           (int)m->inputs[k]);
    for (size_t k = 0; k < m->n_outputs; k++)
        if (m->outputs[k] < -1 || m->outputs[k] >= nt)
            return corrupt(d, name, "node '%s': output %zu is tensor %d, out of range", m->name, k,
                           (int)m->outputs[k]);
    for (size_t k = 0; k < m->n_origins; k++)
        if (!m->origins[k])
            return corrupt(d, name, "node '%s': origin %zu is missing", m->name, k);
    struct cp_diag local;
    cp_diag_init(&local);
    int32_t idx;
    enum cp_status st = cp_graph_add_node(
        g, m->name, m->op_type, m->domain ? m->domain : "", m->inputs, m->n_inputs, m->outputs,
        m->n_outputs, (const char *const *)m->origins, m->n_origins, &idx, &local);
    if (st != CP_OK)
        return api_failed(d, name, st, &local, "adding a node");
    /* Passes may set an op that op_type alone would not give (fused ops). */
    cp_graph_node(g, idx)->op = (enum cp_op)m->op;

    struct cp_strmap attrs;
    cp_strmap_init(&attrs);
    if (cp_strmap_reserve(&attrs, m->n_attrs) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
    for (size_t k = 0; k < m->n_attrs && st == CP_OK; k++) {
        const Cpom__Attr *a = m->attrs[k];
        if (!a->name)
            st = corrupt(d, name, "node '%s': attribute %zu has no name", m->name, k);
        else if (!name_is_new(&attrs, a->name))
            st = corrupt(d, name, "node '%s': attribute '%s' appears twice", m->name, a->name);
        else
            st = read_attr(name, m->name, a, g, idx, d);
    }
    cp_strmap_release(&attrs);
    return st;
}

static enum cp_status read_nodes(const char *name, const Cpom__Graph *gm, struct cp_graph *g,
                                 struct cp_diag *d)
{
    struct cp_strmap names;
    cp_strmap_init(&names);
    if (cp_strmap_reserve(&names, gm->n_nodes) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
    enum cp_status st = CP_OK;
    for (size_t i = 0; i < gm->n_nodes && st == CP_OK; i++) {
        const Cpom__Node *m = gm->nodes[i];
        if (!m->name)
            st = corrupt(d, name, "node %zu has no name", i);
        else if (!name_is_new(&names, m->name))
            st = corrupt(d, name, "two nodes are named '%s'", m->name);
        else
            st = read_node(name, m, g, d);
    }
    cp_strmap_release(&names);
    return st;
}

static enum cp_status read_io(const char *name, const Cpom__Graph *gm, struct cp_graph *g,
                              struct cp_diag *d)
{
    size_t nt = cp_graph_n_tensors(g);
    for (size_t i = 0; i < gm->n_inputs; i++) {
        if (gm->inputs[i] < 0 || (size_t)gm->inputs[i] >= nt)
            return corrupt(d, name, "graph input %zu is tensor %d, out of range", i,
                           (int)gm->inputs[i]);
        if (cp_graph_add_input(g, gm->inputs[i]) != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
    }
    for (size_t i = 0; i < gm->n_outputs; i++) {
        if (gm->outputs[i] < 0 || (size_t)gm->outputs[i] >= nt)
            return corrupt(d, name, "graph output %zu is tensor %d, out of range", i,
                           (int)gm->outputs[i]);
        if (cp_graph_add_output(g, gm->outputs[i]) != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
    }
    for (size_t i = 0; i < gm->n_outer; i++) {
        if (gm->outer[i] < 0 || (size_t)gm->outer[i] >= nt ||
            cp_graph_tensor(g, gm->outer[i])->kind != CP_TENSOR_INPUT)
            return corrupt(d, name, "outer-scope reference %zu is tensor %d, not an input", i,
                           (int)gm->outer[i]);
        if (cp_graph_add_outer(g, gm->outer[i]) != CP_OK)
            return cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
    }
    return CP_OK;
}

enum cp_status om_graph_unpack(const char *name, const uint8_t *p, size_t n, const uint8_t *weights,
                               uint64_t weights_len, struct cp_graph **g, struct cp_diag *d)
{
    *g = NULL;
    Cpom__Graph *gm = cpom__graph__unpack(NULL, n, p);
    if (!gm)
        return cp_diag_set(d, CP_ERR_CORRUPT,
                           "%s: graph section: not a valid cpom.Graph protobuf (%zu bytes)", name,
                           n);
    enum cp_status st = CP_OK;
    struct cp_graph *out = cp_graph_create();
    if (!out) {
        st = cp_diag_set(d, CP_ERR_NOMEM, "%s: out of memory loading the graph", name);
        goto out_free_msg;
    }
    if (gm->n_tensors > INT32_MAX || gm->n_nodes > INT32_MAX) {
        st = corrupt(d, name, "%zu tensors and %zu nodes: too many", gm->n_tensors, gm->n_nodes);
        goto out_free_graph;
    }
    cp_graph_set_name(out, gm->name ? gm->name : "");
    if (gm->has_opset)
        cp_graph_set_opset(out, gm->opset);
    if ((st = read_tensors(name, gm, out, weights, weights_len, d)) != CP_OK)
        goto out_free_graph;
    if ((st = read_nodes(name, gm, out, d)) != CP_OK)
        goto out_free_graph;
    if ((st = read_io(name, gm, out, d)) != CP_OK)
        goto out_free_graph;
    *g = out;
    goto out_free_msg;
out_free_graph:
    cp_graph_free(out);
out_free_msg:
    cpom__graph__free_unpacked(gm, NULL);
    return st;
}
