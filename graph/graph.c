/* Graph construction: the arena, tensors, nodes, attributes, inputs and
 * outputs. Tensors and nodes are individually allocated in the arena and
 * referenced through index arrays, so growing an array never moves them. */
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

struct cp_arena_chunk {
    struct cp_arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

#define ARENA_CHUNK (64 * 1024)

struct cp_graph *cp_graph_create(void)
{
    struct cp_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->opset = 17;
    return g;
}

void cp_graph_free(struct cp_graph *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n_tensors; i++) {
        struct cp_tensor *t = g->tensors[i];
        if (t->owner == CP_DATA_HEAP)
            free((void *)t->data);
    }
    for (size_t i = 0; i < g->n_maps; i++)
        cp_mmap_close(&g->maps[i]);
    free(g->maps);
    for (size_t i = 0; i < g->n_subs; i++)
        cp_graph_free(g->subs[i]);
    free(g->subs);
    free(g->outer);
    struct cp_arena_chunk *c = g->arena;
    while (c) {
        struct cp_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    free(g->name);
    cp_strmap_release(&g->names);
    free(g->tensors);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g);
}

void *cp_graph_alloc(struct cp_graph *g, size_t size)
{
    const size_t align = sizeof(max_align_t);
    if (size > SIZE_MAX - align)
        return NULL;
    size = (size + align - 1) & ~(align - 1);
    if (size == 0)
        size = align;
    struct cp_arena_chunk *c = g->arena;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > ARENA_CHUNK ? size : ARENA_CHUNK;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        /* A big one-off chunk goes behind the current one so the current
         * chunk's free space is not wasted. */
        if (g->arena && size > ARENA_CHUNK) {
            c->next = g->arena->next;
            g->arena->next = c;
        } else {
            c->next = g->arena;
            g->arena = c;
        }
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

const char *cp_graph_strdup(struct cp_graph *g, const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *p = cp_graph_alloc(g, n);
    if (p)
        memcpy(p, s, n);
    return p;
}

const char *cp_graph_name(const struct cp_graph *g)
{
    return g->name ? g->name : "";
}

void cp_graph_set_name(struct cp_graph *g, const char *name)
{
    char *n = cp_strdup(name ? name : "");
    if (!n)
        return;
    free(g->name);
    g->name = n;
}

int64_t cp_graph_opset(const struct cp_graph *g)
{
    return g->opset;
}

void cp_graph_set_opset(struct cp_graph *g, int64_t opset)
{
    g->opset = opset;
}

static bool grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = cp_realloc_array(*arr, ncap, elem);
    if (!p)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

int32_t cp_graph_find_tensor(const struct cp_graph *g, const char *name)
{
    return (int32_t)cp_strmap_gets(&g->names, name, -1);
}

enum cp_status cp_graph_add_tensor(struct cp_graph *g, const char *name, enum cp_dtype dtype,
                                   const struct cp_shape *shape, enum cp_tensor_kind kind,
                                   int32_t *index, struct cp_diag *d)
{
    if (index)
        *index = -1;
    if (!name)
        return cp_diag_set(d, CP_ERR_INVALID, "tensor without a name");
    if (g->n_tensors >= INT32_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "too many tensors");
    if (cp_graph_find_tensor(g, name) >= 0)
        return cp_diag_set(d, CP_ERR_INVALID, "duplicate tensor name '%s'", name);
    if (!grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof *g->tensors) ||
        cp_strmap_reserve(&g->names, g->n_tensors + 1) != CP_OK)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory adding tensor '%s'", name);
    struct cp_tensor *t = cp_graph_alloc(g, sizeof *t);
    const char *nm = cp_graph_strdup(g, name);
    if (!t || !nm)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory adding tensor '%s'", name);
    t->name = nm;
    t->dtype = dtype;
    if (shape)
        t->shape = *shape;
    else
        cp_shape_set_unknown(&t->shape);
    if (t->shape.rank > CP_MAX_RANK)
        return cp_diag_set(d, CP_ERR_UNSUPPORTED, "tensor '%s': rank %d exceeds the maximum %d",
                           name, t->shape.rank, CP_MAX_RANK);
    t->layout = CP_LAYOUT_UNDEF;
    t->kind = kind;
    t->producer = -1;
    g->tensors[g->n_tensors] = t;
    /* cannot fail: room was reserved above */
    (void)cp_strmap_put(&g->names, nm, strlen(nm), (int64_t)g->n_tensors);
    if (index)
        *index = (int32_t)g->n_tensors;
    g->n_tensors++;
    return CP_OK;
}

enum cp_status cp_graph_set_data(struct cp_graph *g, int32_t tensor, const void *data,
                                 size_t nbytes, enum cp_data_owner owner, struct cp_diag *d)
{
    if (tensor < 0 || (size_t)tensor >= g->n_tensors) {
        if (owner == CP_DATA_HEAP)
            free((void *)data);
        return cp_diag_set(d, CP_ERR_INVALID, "tensor index %d out of range", tensor);
    }
    struct cp_tensor *t = g->tensors[tensor];
    size_t want;
    if (!cp_shape_nbytes(&t->shape, t->dtype, &want) || want != nbytes) {
        if (owner == CP_DATA_HEAP)
            free((void *)data);
        return cp_diag_set(d, CP_ERR_INVALID,
                           "tensor '%s': %zu bytes of data do not match shape and dtype %s",
                           t->name, nbytes, cp_dtype_name(t->dtype));
    }
    if (t->owner == CP_DATA_HEAP)
        free((void *)t->data);
    t->data = data;
    t->nbytes = nbytes;
    t->owner = data ? owner : CP_DATA_NONE;
    return CP_OK;
}

enum cp_status cp_graph_adopt_mmap(struct cp_graph *g, struct cp_mmap *m)
{
    struct cp_mmap *p = cp_realloc_array(g->maps, g->n_maps + 1, sizeof *p);
    if (!p)
        return CP_ERR_NOMEM;
    g->maps = p;
    g->maps[g->n_maps++] = *m;
    m->data = NULL;
    m->len = 0;
    return CP_OK;
}

static int32_t *copy_i32(struct cp_graph *g, const int32_t *v, size_t n)
{
    int32_t *r = cp_graph_alloc(g, (n ? n : 1) * sizeof *r);
    if (r && n)
        memcpy(r, v, n * sizeof *r);
    return r;
}

enum cp_status cp_graph_add_node(struct cp_graph *g, const char *name, const char *op_type,
                                 const char *domain, const int32_t *inputs, size_t n_inputs,
                                 const int32_t *outputs, size_t n_outputs,
                                 const char *const *origins, size_t n_origins, int32_t *index,
                                 struct cp_diag *d)
{
    if (index)
        *index = -1;
    if (!name || !op_type)
        return cp_diag_set(d, CP_ERR_INVALID, "node without a name or op type");
    if (g->n_nodes >= INT32_MAX)
        return cp_diag_set(d, CP_ERR_INVALID, "too many nodes");
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i] < -1 || inputs[i] >= (int32_t)g->n_tensors)
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': input %zu refers to no tensor", name,
                               i);
    for (size_t i = 0; i < n_outputs; i++) {
        if (outputs[i] == -1)
            continue;
        if (outputs[i] < 0 || outputs[i] >= (int32_t)g->n_tensors)
            return cp_diag_set(d, CP_ERR_INVALID, "node '%s': output %zu refers to no tensor", name,
                               i);
        struct cp_tensor *t = g->tensors[outputs[i]];
        if (t->producer >= 0 || t->kind != CP_TENSOR_INTERMEDIATE)
            return cp_diag_set(d, CP_ERR_INVALID,
                               "node '%s': output '%s' is already produced elsewhere", name,
                               t->name);
    }
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof *g->nodes))
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory adding node '%s'", name);
    struct cp_node *n = cp_graph_alloc(g, sizeof *n);
    if (!n)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory adding node '%s'", name);
    n->name = cp_graph_strdup(g, name);
    n->op_type = cp_graph_strdup(g, op_type);
    n->domain = cp_graph_strdup(g, domain ? domain : "");
    n->inputs = copy_i32(g, inputs, n_inputs);
    n->outputs = copy_i32(g, outputs, n_outputs);
    n->origins = cp_graph_alloc(g, (n_origins ? n_origins : 1) * sizeof *n->origins);
    if (!n->name || !n->op_type || !n->domain || !n->inputs || !n->outputs || !n->origins)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory adding node '%s'", name);
    for (size_t i = 0; i < n_origins; i++) {
        n->origins[i] = cp_graph_strdup(g, origins[i]);
        if (!n->origins[i])
            return cp_diag_set(d, CP_ERR_NOMEM, "out of memory adding node '%s'", name);
    }
    n->n_inputs = n_inputs;
    n->n_outputs = n_outputs;
    n->n_origins = n_origins;
    n->op = cp_op_from_domain_name(n->domain, op_type);
    int32_t idx = (int32_t)g->n_nodes;
    for (size_t i = 0; i < n_outputs; i++)
        if (outputs[i] >= 0)
            g->tensors[outputs[i]]->producer = idx;
    g->nodes[g->n_nodes++] = n;
    if (index)
        *index = idx;
    return CP_OK;
}

static enum cp_status push_index(int32_t **arr, size_t *n, size_t *cap, int32_t v);

static struct cp_attr *attr_slot(struct cp_graph *g, int32_t node, const char *name)
{
    if (node < 0 || (size_t)node >= g->n_nodes || !name)
        return NULL;
    struct cp_node *n = g->nodes[node];
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) {
            memset(&n->attrs[i], 0, sizeof n->attrs[i]);
            n->attrs[i].name = cp_graph_strdup(g, name);
            return n->attrs[i].name ? &n->attrs[i] : NULL;
        }
    /* Attributes are few per node: grow by copying into the arena. */
    struct cp_attr *a = cp_graph_alloc(g, (n->n_attrs + 1) * sizeof *a);
    const char *nm = cp_graph_strdup(g, name);
    if (!a || !nm)
        return NULL;
    if (n->n_attrs)
        memcpy(a, n->attrs, n->n_attrs * sizeof *a);
    n->attrs = a;
    struct cp_attr *r = &a[n->n_attrs++];
    r->name = nm;
    r->tensor = -1;
    return r;
}

enum cp_status cp_node_set_int(struct cp_graph *g, int32_t node, const char *name, int64_t v)
{
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    a->type = CP_ATTR_INT;
    a->i = v;
    return CP_OK;
}

enum cp_status cp_node_set_float(struct cp_graph *g, int32_t node, const char *name, float v)
{
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    a->type = CP_ATTR_FLOAT;
    a->f = v;
    return CP_OK;
}

enum cp_status cp_node_set_string(struct cp_graph *g, int32_t node, const char *name, const char *v)
{
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    a->type = CP_ATTR_STRING;
    a->s = cp_graph_strdup(g, v ? v : "");
    return a->s ? CP_OK : CP_ERR_NOMEM;
}

enum cp_status cp_node_set_ints(struct cp_graph *g, int32_t node, const char *name,
                                const int64_t *v, size_t n)
{
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    int64_t *p = cp_graph_alloc(g, (n ? n : 1) * sizeof *p);
    if (!p)
        return CP_ERR_NOMEM;
    if (n)
        memcpy(p, v, n * sizeof *p);
    a->type = CP_ATTR_INTS;
    a->ints = p;
    a->n = n;
    return CP_OK;
}

enum cp_status cp_node_set_floats(struct cp_graph *g, int32_t node, const char *name,
                                  const float *v, size_t n)
{
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    float *p = cp_graph_alloc(g, (n ? n : 1) * sizeof *p);
    if (!p)
        return CP_ERR_NOMEM;
    if (n)
        memcpy(p, v, n * sizeof *p);
    a->type = CP_ATTR_FLOATS;
    a->floats = p;
    a->n = n;
    return CP_OK;
}

enum cp_status cp_node_set_strings(struct cp_graph *g, int32_t node, const char *name,
                                   const char *const *v, size_t n)
{
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    const char **p = cp_graph_alloc(g, (n ? n : 1) * sizeof *p);
    if (!p)
        return CP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        p[i] = cp_graph_strdup(g, v[i]);
        if (!p[i])
            return CP_ERR_NOMEM;
    }
    a->type = CP_ATTR_STRINGS;
    a->strings = p;
    a->n = n;
    return CP_OK;
}

enum cp_status cp_node_set_tensor(struct cp_graph *g, int32_t node, const char *name,
                                  int32_t tensor)
{
    if (tensor < 0 || (size_t)tensor >= g->n_tensors)
        return CP_ERR_INVALID;
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    a->type = CP_ATTR_TENSOR;
    a->tensor = tensor;
    return CP_OK;
}

enum cp_status cp_node_set_graph(struct cp_graph *g, int32_t node, const char *name,
                                 struct cp_graph *sub)
{
    if (!sub)
        return CP_ERR_INVALID;
    struct cp_graph **p = cp_realloc_array(g->subs, g->n_subs + 1, sizeof *p);
    if (!p) {
        cp_graph_free(sub);
        return CP_ERR_NOMEM;
    }
    g->subs = p;
    g->subs[g->n_subs++] = sub;
    struct cp_attr *a = attr_slot(g, node, name);
    if (!a)
        return CP_ERR_NOMEM;
    a->type = CP_ATTR_GRAPH;
    a->graph = sub;
    return CP_OK;
}

enum cp_status cp_graph_add_outer(struct cp_graph *g, int32_t tensor)
{
    if (tensor < 0 || (size_t)tensor >= g->n_tensors)
        return CP_ERR_INVALID;
    return push_index(&g->outer, &g->n_outer, &g->cap_outer, tensor);
}

size_t cp_graph_n_outer(const struct cp_graph *g)
{
    return g->n_outer;
}

int32_t cp_graph_outer(const struct cp_graph *g, size_t i)
{
    return i < g->n_outer ? g->outer[i] : -1;
}

bool cp_op_is_control(enum cp_op op)
{
    return op == CP_OP_IF || op == CP_OP_LOOP || op == CP_OP_SCAN;
}

size_t cp_control_n_formal(const struct cp_graph *g, const struct cp_node *n)
{
    (void)g;
    const struct cp_attr *a;
    size_t k = n->n_inputs;
    switch (n->op) {
    case CP_OP_IF:
        k = 1;
        break;
    case CP_OP_LOOP:
        a = cp_node_attr(n, "body");
        if (a && a->type == CP_ATTR_GRAPH)
            k = cp_graph_n_inputs(a->graph);
        break;
    case CP_OP_SCAN:
        a = cp_node_attr(n, "body");
        if (a && a->type == CP_ATTR_GRAPH)
            k = cp_graph_n_inputs(a->graph) + (cp_graph_opset(g) < 9 ? 1 : 0);
        break;
    default:
        break;
    }
    return k < n->n_inputs ? k : n->n_inputs;
}

static const struct cp_graph *graph_attr(const struct cp_node *n, size_t a)
{
    return n->attrs[a].type == CP_ATTR_GRAPH ? n->attrs[a].graph : NULL;
}

/* Whether outer reference (a, j) of node n is the first of its name. */
static bool first_of_name(const struct cp_node *n, size_t a, size_t j, const char *nm)
{
    for (size_t b = 0; b <= a; b++) {
        const struct cp_graph *t = graph_attr(n, b);
        size_t lim = b == a ? j : (t ? t->n_outer : 0);
        for (size_t k = 0; t && k < lim; k++)
            if (strcmp(t->tensors[t->outer[k]]->name, nm) == 0)
                return false;
    }
    return true;
}

int32_t cp_control_outer_slot(const struct cp_graph *g, const struct cp_node *n,
                              const struct cp_graph *sub, size_t i)
{
    if (!sub || i >= sub->n_outer)
        return -1;
    const char *want = sub->tensors[sub->outer[i]]->name;
    size_t q = 0, formal = cp_control_n_formal(g, n);
    for (size_t a = 0; a < n->n_attrs; a++) {
        const struct cp_graph *s = graph_attr(n, a);
        for (size_t j = 0; s && j < s->n_outer; j++) {
            const char *nm = s->tensors[s->outer[j]]->name;
            if (!first_of_name(n, a, j, nm))
                continue;
            if (strcmp(nm, want) == 0)
                return formal + q < n->n_inputs ? (int32_t)(formal + q) : -1;
            q++;
        }
    }
    return -1;
}

const struct cp_attr *cp_node_attr(const struct cp_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0)
            return &n->attrs[i];
    return NULL;
}

int64_t cp_node_attr_int(const struct cp_node *n, const char *name, int64_t dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    return a && a->type == CP_ATTR_INT ? a->i : dflt;
}

float cp_node_attr_float(const struct cp_node *n, const char *name, float dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    return a && a->type == CP_ATTR_FLOAT ? a->f : dflt;
}

const char *cp_node_attr_string(const struct cp_node *n, const char *name, const char *dflt)
{
    const struct cp_attr *a = cp_node_attr(n, name);
    return a && a->type == CP_ATTR_STRING ? a->s : dflt;
}

static enum cp_status push_index(int32_t **arr, size_t *n, size_t *cap, int32_t v)
{
    if (!grow((void **)arr, cap, *n + 1, sizeof **arr))
        return CP_ERR_NOMEM;
    (*arr)[(*n)++] = v;
    return CP_OK;
}

enum cp_status cp_graph_add_input(struct cp_graph *g, int32_t tensor)
{
    if (tensor < 0 || (size_t)tensor >= g->n_tensors)
        return CP_ERR_INVALID;
    return push_index(&g->inputs, &g->n_inputs, &g->cap_inputs, tensor);
}

enum cp_status cp_graph_add_output(struct cp_graph *g, int32_t tensor)
{
    if (tensor < 0 || (size_t)tensor >= g->n_tensors)
        return CP_ERR_INVALID;
    return push_index(&g->outputs, &g->n_outputs, &g->cap_outputs, tensor);
}

size_t cp_graph_n_tensors(const struct cp_graph *g)
{
    return g->n_tensors;
}

size_t cp_graph_n_nodes(const struct cp_graph *g)
{
    return g->n_nodes;
}

struct cp_tensor *cp_graph_tensor(const struct cp_graph *g, int32_t i)
{
    return i >= 0 && (size_t)i < g->n_tensors ? g->tensors[i] : NULL;
}

struct cp_node *cp_graph_node(const struct cp_graph *g, int32_t i)
{
    return i >= 0 && (size_t)i < g->n_nodes ? g->nodes[i] : NULL;
}

size_t cp_graph_n_inputs(const struct cp_graph *g)
{
    return g->n_inputs;
}

size_t cp_graph_n_outputs(const struct cp_graph *g)
{
    return g->n_outputs;
}

int32_t cp_graph_input(const struct cp_graph *g, size_t i)
{
    return i < g->n_inputs ? g->inputs[i] : -1;
}

int32_t cp_graph_output(const struct cp_graph *g, size_t i)
{
    return i < g->n_outputs ? g->outputs[i] : -1;
}

size_t cp_graph_n_live_nodes(const struct cp_graph *g)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
        n += !g->nodes[i]->dead;
    return n;
}

enum cp_status cp_graph_reorder_nodes_(struct cp_graph *g, const int32_t *order, size_t n)
{
    struct cp_node **nodes = cp_calloc(n ? n : 1, sizeof *nodes);
    if (!nodes)
        return CP_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (order[i] < 0 || (size_t)order[i] >= g->n_nodes) {
            free(nodes);
            return CP_ERR_INVALID;
        }
        nodes[i] = g->nodes[order[i]];
    }
    for (size_t i = 0; i < g->n_tensors; i++)
        g->tensors[i]->producer = -1;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < nodes[i]->n_outputs; j++)
            if (nodes[i]->outputs[j] >= 0)
                g->tensors[nodes[i]->outputs[j]]->producer = (int32_t)i;
    free(g->nodes);
    g->nodes = nodes;
    g->n_nodes = n;
    g->cap_nodes = n ? n : 1;
    return CP_OK;
}

enum cp_status cp_graph_remove_unused_tensors(struct cp_graph *g, size_t *n_removed,
                                              struct cp_diag *d)
{
    if (n_removed)
        *n_removed = 0;
    size_t nt = g->n_tensors;
    int32_t *map = cp_calloc(nt ? nt : 1, sizeof *map);
    if (!map)
        return cp_diag_set(d, CP_ERR_NOMEM, "out of memory removing unused tensors");
    /* map[i]: 1 when used, then the new index (or -1). */
    for (size_t i = 0; i < g->n_nodes; i++) {
        const struct cp_node *n = g->nodes[i];
        if (n->dead)
            continue;
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] >= 0 && (size_t)n->inputs[j] < nt)
                map[n->inputs[j]] = 1;
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0 && (size_t)n->outputs[j] < nt)
                map[n->outputs[j]] = 1;
        for (size_t j = 0; j < n->n_attrs; j++)
            if (n->attrs[j].type == CP_ATTR_TENSOR && n->attrs[j].tensor >= 0 &&
                (size_t)n->attrs[j].tensor < nt)
                map[n->attrs[j].tensor] = 1;
    }
    for (size_t i = 0; i < g->n_inputs; i++)
        if (g->inputs[i] >= 0 && (size_t)g->inputs[i] < nt)
            map[g->inputs[i]] = 1;
    for (size_t i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] >= 0 && (size_t)g->outputs[i] < nt)
            map[g->outputs[i]] = 1;
    for (size_t i = 0; i < g->n_outer; i++)
        if (g->outer[i] >= 0 && (size_t)g->outer[i] < nt)
            map[g->outer[i]] = 1;
    size_t kept = 0;
    for (size_t i = 0; i < nt; i++) {
        struct cp_tensor *t = g->tensors[i];
        if (map[i]) {
            map[i] = (int32_t)kept;
            g->tensors[kept++] = t;
            continue;
        }
        map[i] = -1;
        /* The tensor itself stays in the arena; only its heap bytes go. */
        if (t->owner == CP_DATA_HEAP)
            free((void *)t->data);
        t->data = NULL;
        t->nbytes = 0;
        t->owner = CP_DATA_NONE;
    }
    if (n_removed)
        *n_removed = nt - kept;
    if (kept == nt) {
        free(map);
        return CP_OK;
    }
    g->n_tensors = kept;
    for (size_t i = 0; i < g->n_nodes; i++) {
        struct cp_node *n = g->nodes[i];
        for (size_t j = 0; j < n->n_inputs; j++)
            if (n->inputs[j] >= 0)
                n->inputs[j] = (size_t)n->inputs[j] < nt ? map[n->inputs[j]] : -1;
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0)
                n->outputs[j] = (size_t)n->outputs[j] < nt ? map[n->outputs[j]] : -1;
        for (size_t j = 0; j < n->n_attrs; j++)
            if (n->attrs[j].type == CP_ATTR_TENSOR && n->attrs[j].tensor >= 0)
                n->attrs[j].tensor = (size_t)n->attrs[j].tensor < nt ? map[n->attrs[j].tensor] : -1;
    }
    for (size_t i = 0; i < g->n_inputs; i++)
        g->inputs[i] = map[g->inputs[i]];
    for (size_t i = 0; i < g->n_outputs; i++)
        g->outputs[i] = map[g->outputs[i]];
    for (size_t i = 0; i < g->n_outer; i++)
        g->outer[i] = map[g->outer[i]];
    free(map);
    /* fewer names than before: re-inserting them into the same room
     * cannot fail */
    cp_strmap_clear(&g->names);
    for (size_t i = 0; i < g->n_tensors; i++)
        (void)cp_strmap_put(&g->names, g->tensors[i]->name, strlen(g->tensors[i]->name),
                            (int64_t)i);
    return CP_OK;
}
