/* Node attributes: checking that each attribute's declared type matches what
 * it carries, and copying it onto the graph node with its type. */
#include "onnx/onnx_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Which payload fields an AttributeProto fills, one bit each. */
enum {
    P_F = 1u << 0,
    P_I = 1u << 1,
    P_S = 1u << 2,
    P_T = 1u << 3,
    P_G = 1u << 4,
    P_SPARSE = 1u << 5,
    P_TP = 1u << 6,
    P_FLOATS = 1u << 7,
    P_INTS = 1u << 8,
    P_STRINGS = 1u << 9,
    P_TENSORS = 1u << 10,
    P_GRAPHS = 1u << 11,
    P_SPARSES = 1u << 12,
    P_TPS = 1u << 13,
};

struct attr_kind {
    int onnx_type; /* AttributeProto.AttributeType */
    const char *name;
    unsigned bit; /* the payload field it lives in */
    const char *field;
    bool list;            /* an empty list carries no payload at all */
    enum cp_attr_type cp; /* 0: we cannot hold it */
};

static const struct attr_kind kinds[] = {
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "FLOAT", P_F, "f", false, CP_ATTR_FLOAT},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "INT", P_I, "i", false, CP_ATTR_INT},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING, "STRING", P_S, "s", false, CP_ATTR_STRING},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, "TENSOR", P_T, "t", false, CP_ATTR_TENSOR},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, "GRAPH", P_G, "g", false, CP_ATTR_GRAPH},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR, "SPARSE_TENSOR", P_SPARSE,
     "sparse_tensor", false, 0},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO, "TYPE_PROTO", P_TP, "tp", false, 0},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS, "FLOATS", P_FLOATS, "floats", true,
     CP_ATTR_FLOATS},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, "INTS", P_INTS, "ints", true, CP_ATTR_INTS},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS, "STRINGS", P_STRINGS, "strings", true,
     CP_ATTR_STRINGS},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS, "TENSORS", P_TENSORS, "tensors", true, 0},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS, "GRAPHS", P_GRAPHS, "graphs", true, 0},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS, "SPARSE_TENSORS", P_SPARSES,
     "sparse_tensors", true, 0},
    {ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS, "TYPE_PROTOS", P_TPS, "type_protos", true,
     0},
};
#define N_KINDS (sizeof kinds / sizeof kinds[0])

static const struct attr_kind *kind_of_type(int t)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (kinds[i].onnx_type == t)
            return &kinds[i];
    return NULL;
}

static const struct attr_kind *kind_of_bit(unsigned bit)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (kinds[i].bit == bit)
            return &kinds[i];
    return NULL;
}

static unsigned payload_mask(const Onnx__AttributeProto *a)
{
    unsigned m = 0;
    m |= a->has_f ? P_F : 0;
    m |= a->has_i ? P_I : 0;
    m |= a->has_s ? P_S : 0;
    m |= a->t ? P_T : 0;
    m |= a->g ? P_G : 0;
    m |= a->sparse_tensor ? P_SPARSE : 0;
    m |= a->tp ? P_TP : 0;
    m |= a->n_floats ? P_FLOATS : 0;
    m |= a->n_ints ? P_INTS : 0;
    m |= a->n_strings ? P_STRINGS : 0;
    m |= a->n_tensors ? P_TENSORS : 0;
    m |= a->n_graphs ? P_GRAPHS : 0;
    m |= a->n_sparse_tensors ? P_SPARSES : 0;
    m |= a->n_type_protos ? P_TPS : 0;
    return m;
}

static unsigned lowest_bit(unsigned m)
{
    return m & (~m + 1u);
}

enum cp_status onnx_attr_type(struct onnx_ctx *c, const Onnx__NodeProto *np, const char *name,
                              const Onnx__AttributeProto *a, int *type)
{
    *type = 0;
    const char *an = a->name ? a->name : "";
    unsigned mask = payload_mask(a);
    const struct attr_kind *k;
    if (!a->has_type || a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) {
        /* Old exporters leave the type out: the one payload present decides. */
        if (mask == 0 || lowest_bit(mask) != mask)
            return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): attribute '%s' has no type and %s",
                            name, np->op_type, an, mask ? "several values" : "no value");
        *type = kind_of_bit(mask)->onnx_type;
        return CP_OK;
    }
    k = kind_of_type(a->type);
    if (!k)
        return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): attribute '%s' has unknown type %d",
                        name, np->op_type, an, (int)a->type);
    unsigned other = mask & ~k->bit;
    if (other) {
        const struct attr_kind *o = kind_of_bit(lowest_bit(other));
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (%s): attribute '%s' is declared %s but holds %s (field '%s') "
                        "instead of field '%s'",
                        name, np->op_type, an, k->name, o->name, o->field, k->field);
    }
    if (!(mask & k->bit) && !k->list)
        return onnx_err(c, CP_ERR_INVALID,
                        "node '%s' (%s): attribute '%s' is declared %s but carries no value "
                        "(field '%s' is missing)",
                        name, np->op_type, an, k->name, k->field);
    *type = k->onnx_type;
    return CP_OK;
}

static const char *cp_attr_type_name(enum cp_attr_type t)
{
    switch (t) {
    case CP_ATTR_INT:
        return "INT";
    case CP_ATTR_FLOAT:
        return "FLOAT";
    case CP_ATTR_STRING:
        return "STRING";
    case CP_ATTR_INTS:
        return "INTS";
    case CP_ATTR_FLOATS:
        return "FLOATS";
    case CP_ATTR_STRINGS:
        return "STRINGS";
    case CP_ATTR_TENSOR:
        return "TENSOR";
    case CP_ATTR_GRAPH:
        return "GRAPH";
    }
    return "?";
}

/* Bytes (not NUL-terminated, maybe with embedded NULs) as a C string. */
static char *bytes_str(const ProtobufCBinaryData *b)
{
    char *s = malloc(b->len + 1);
    if (!s)
        return NULL;
    if (b->len)
        memcpy(s, b->data, b->len);
    s[b->len] = 0;
    return s;
}

static enum cp_status set_strings(struct onnx_ctx *c, int32_t node, const Onnx__AttributeProto *a)
{
    enum cp_status st = CP_OK;
    char **v = cp_calloc(a->n_strings ? a->n_strings : 1, sizeof *v);
    if (!v)
        return CP_ERR_NOMEM;
    for (size_t i = 0; i < a->n_strings; i++) {
        v[i] = bytes_str(&a->strings[i]);
        if (!v[i]) {
            st = CP_ERR_NOMEM;
            goto out;
        }
    }
    st = cp_node_set_strings(c->g, node, a->name, (const char *const *)v, a->n_strings);
out:
    for (size_t i = 0; i < a->n_strings; i++)
        free(v[i]);
    free(v);
    return st;
}

/* A TENSOR attribute becomes a detached initializer named after its node and
 * attribute, made unique against every tensor name in the model. */
static enum cp_status set_tensor(struct onnx_ctx *c, int32_t node, const char *name,
                                 const Onnx__AttributeProto *a)
{
    char what[600];
    snprintf(what, sizeof what, "node '%.200s' attribute '%.200s'", name, a->name);
    enum cp_dtype dt;
    struct cp_shape shape;
    void *data;
    size_t nbytes;
    enum cp_status st = onnx_tensor_decode(c, a->t, what, &dt, &shape, &data, &nbytes);
    if (st != CP_OK)
        return st;
    struct cp_buf tn;
    cp_buf_init(&tn);
    cp_buf_printf(&tn, "%s.%s", name, a->name);
    for (int k = 2;
         cp_buf_status(&tn) == CP_OK && (int32_t)cp_strmap_gets(&c->tensors, tn.data, -1) >= 0;
         k++) {
        cp_buf_reset(&tn);
        cp_buf_printf(&tn, "%s.%s_%d", name, a->name, k);
    }
    if (cp_buf_status(&tn) != CP_OK) {
        free(data);
        cp_buf_release(&tn);
        return onnx_err(c, CP_ERR_NOMEM, "out of memory");
    }
    int32_t idx;
    st = onnx_set_initializer(c, tn.data, dt, &shape, data, nbytes, what, &idx);
    cp_buf_release(&tn);
    if (st != CP_OK)
        return st;
    return cp_node_set_tensor(c->g, node, a->name, idx);
}

static enum cp_status copy_one(struct onnx_ctx *c, int32_t node, const char *name,
                               const Onnx__AttributeProto *a, int type)
{
    struct cp_graph *g = c->g;
    switch (type) {
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        return cp_node_set_float(g, node, a->name, a->f);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        return cp_node_set_int(g, node, a->name, a->i);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
        char *s = bytes_str(&a->s);
        if (!s)
            return CP_ERR_NOMEM;
        enum cp_status st = cp_node_set_string(g, node, a->name, s);
        free(s);
        return st;
    }
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        return cp_node_set_floats(g, node, a->name, a->floats, a->n_floats);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        return cp_node_set_ints(g, node, a->name, a->ints, a->n_ints);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        return set_strings(c, node, a);
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
        return set_tensor(c, node, name, a);
    default:
        return CP_ERR_INTERNAL;
    }
}

enum cp_status onnx_copy_attrs(struct onnx_ctx *c, const struct onnx_op_def *def,
                               const Onnx__NodeProto *np, int32_t node, const char *name)
{
    for (size_t i = 0; i < np->n_attribute; i++) {
        const Onnx__AttributeProto *a = np->attribute[i];
        if (!a->name || !*a->name)
            return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): attribute %zu has no name", name,
                            np->op_type, i);
        if (a->ref_attr_name && *a->ref_attr_name)
            return onnx_err(c, CP_ERR_UNSUPPORTED,
                            "node '%s' (%s): attribute '%s' refers to a function attribute, "
                            "which is not supported",
                            name, np->op_type, a->name);
        int type;
        enum cp_status st = onnx_attr_type(c, np, name, a, &type);
        if (st != CP_OK)
            return st;
        const struct attr_kind *k = kind_of_type(type);
        if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH) {
            /* Subgraphs are imported by the control-flow loaders (control.c)
             * before the attributes are copied. */
            const struct cp_attr *have = cp_node_attr(cp_graph_node(c->g, node), a->name);
            if (have && have->type == CP_ATTR_GRAPH)
                continue;
            return onnx_err(c, CP_ERR_UNSUPPORTED,
                            "node '%s' (%s): attribute '%s' is a GRAPH, which only If, Loop and "
                            "Scan may carry",
                            name, np->op_type, a->name);
        }
        if (!k->cp)
            return onnx_err(c, CP_ERR_UNSUPPORTED,
                            "node '%s' (%s): attribute '%s' of type %s is not supported", name,
                            np->op_type, a->name, k->name);
        st = copy_one(c, node, name, a, type);
        if (st != CP_OK)
            /* Errors inside set_tensor are already reported; this adds nothing
             * then, since the first message wins. */
            return onnx_err(c, st, "node '%s' (%s): attribute '%s' could not be stored (%s)", name,
                            np->op_type, a->name, cp_status_str(st));
    }
    const struct cp_node *n = cp_graph_node(c->g, node);
    for (const struct onnx_attr_spec *s = def->attrs; s && s->name; s++) {
        const struct cp_attr *a = cp_node_attr(n, s->name);
        if (!a && s->required)
            return onnx_err(c, CP_ERR_INVALID,
                            "node '%s' (%s): required attribute '%s' (%s) is missing", name,
                            np->op_type, s->name, cp_attr_type_name(s->type));
        if (a && a->type != s->type)
            return onnx_err(c, CP_ERR_INVALID, "node '%s' (%s): attribute '%s' must be %s, not %s",
                            name, np->op_type, s->name, cp_attr_type_name(s->type),
                            cp_attr_type_name(a->type));
    }
    return CP_OK;
}
