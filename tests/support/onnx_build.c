/* Test support: ONNX models built one piece at a time (see onnx_build.h). */
#include "support/onnx_build.h"

#include "proto/onnx.pb-c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Attributes per node: more marks the builder failed. */
#define MAX_ATTRS 16

struct cp_t_onnx {
    Onnx__ModelProto model;
    Onnx__GraphProto graph;
    Onnx__OperatorSetIdProto opset;
    Onnx__OperatorSetIdProto *opsets[1];
    size_t cap_node, cap_init, cap_input, cap_output, cap_vi;
    void **kept; /* every allocation, freed with the builder */
    size_t n_kept, cap_kept;
    bool failed;
};

/* ---- memory ---------------------------------------------------------------- */

static void *keep(struct cp_t_onnx *m, void *p)
{
    if (!p) {
        m->failed = true;
        return NULL;
    }
    if (m->n_kept == m->cap_kept) {
        size_t cap = m->cap_kept ? 2 * m->cap_kept : 64;
        void **k = realloc(m->kept, cap * sizeof *k);
        if (!k) {
            free(p);
            m->failed = true;
            return NULL;
        }
        m->kept = k;
        m->cap_kept = cap;
    }
    m->kept[m->n_kept++] = p;
    return p;
}

static void *alloc(struct cp_t_onnx *m, size_t n, size_t size)
{
    return m->failed ? NULL : keep(m, calloc(n ? n : 1, size ? size : 1));
}

static char *str(struct cp_t_onnx *m, const char *s)
{
    char *p = alloc(m, strlen(s) + 1, 1);
    if (p)
        memcpy(p, s, strlen(s) + 1);
    return p;
}

static void *dup(struct cp_t_onnx *m, const void *src, size_t n)
{
    void *p = alloc(m, n, 1);
    if (p && n)
        memcpy(p, src, n);
    return p;
}

/* Append `item` to the array `*arr` of `*n` pointers with room for `*cap`.
 * The array itself is realloc'ed, not kept, and freed with the builder. */
static bool push(struct cp_t_onnx *m, void ***arr, size_t *n, size_t *cap, void *item)
{
    if (m->failed || !item)
        return false;
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 8;
        void **a = realloc(*arr, c * sizeof *a);
        if (!a) {
            m->failed = true;
            return false;
        }
        *arr = a;
        *cap = c;
    }
    (*arr)[(*n)++] = item;
    return true;
}

/* ---- the model --------------------------------------------------------------- */

struct cp_t_onnx *cp_t_onnx_new(int64_t opset)
{
    struct cp_t_onnx *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    onnx__model_proto__init(&m->model);
    onnx__graph_proto__init(&m->graph);
    onnx__operator_set_id_proto__init(&m->opset);
    m->opset.domain = (char *)"";
    m->opset.has_version = 1;
    m->opset.version = opset;
    m->opsets[0] = &m->opset;
    m->model.has_ir_version = 1;
    m->model.ir_version = 8;
    m->model.n_opset_import = 1;
    m->model.opset_import = m->opsets;
    m->model.producer_name = (char *)"cannprof-test";
    m->model.graph = &m->graph;
    m->graph.name = (char *)"crafted";
    return m;
}

void cp_t_onnx_free(struct cp_t_onnx *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n_kept; i++)
        free(m->kept[i]);
    free(m->kept);
    free(m->graph.node);
    free(m->graph.initializer);
    free(m->graph.input);
    free(m->graph.output);
    free(m->graph.value_info);
    free(m);
}

/* ---- values ------------------------------------------------------------------ */

static Onnx__ValueInfoProto *value_info(struct cp_t_onnx *m, const char *name, int elem_type,
                                        int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = alloc(m, 1, sizeof *v);
    Onnx__TypeProto *tp = alloc(m, 1, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = alloc(m, 1, sizeof *tt);
    char *nm = str(m, name);
    if (!v || !tp || !tt || !nm)
        return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem_type;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->name = nm;
    v->type = tp;
    if (rank < 0)
        return v;
    Onnx__TensorShapeProto *sp = alloc(m, 1, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dp = alloc(m, (size_t)rank, sizeof *dp);
    if (!sp || !dp)
        return NULL;
    onnx__tensor_shape_proto__init(sp);
    for (int k = 0; k < rank; k++) {
        Onnx__TensorShapeProto__Dimension *dm = alloc(m, 1, sizeof *dm);
        if (!dm)
            return NULL;
        onnx__tensor_shape_proto__dimension__init(dm);
        if (dims[k] >= 0) {
            dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dm->dim_value = dims[k];
        }
        dp[k] = dm;
    }
    sp->n_dim = (size_t)rank;
    sp->dim = dp;
    tt->shape = sp;
    return v;
}

void cp_t_onnx_input(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                     const int64_t *dims)
{
    push(m, (void ***)&m->graph.input, &m->graph.n_input, &m->cap_input,
         value_info(m, name, elem_type, rank, dims));
}

void cp_t_onnx_output(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                      const int64_t *dims)
{
    push(m, (void ***)&m->graph.output, &m->graph.n_output, &m->cap_output,
         value_info(m, name, elem_type, rank, dims));
}

void cp_t_onnx_value_info(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                          const int64_t *dims)
{
    push(m, (void ***)&m->graph.value_info, &m->graph.n_value_info, &m->cap_vi,
         value_info(m, name, elem_type, rank, dims));
}

/* ---- initializers ---------------------------------------------------------------- */

void cp_t_onnx_init(struct cp_t_onnx *m, const char *name, int elem_type, int rank,
                    const int64_t *dims, const void *data, size_t nbytes)
{
    Onnx__TensorProto *t = alloc(m, 1, sizeof *t);
    char *nm = str(m, name);
    int64_t *d = rank > 0 ? dup(m, dims, (size_t)rank * sizeof *dims) : NULL;
    uint8_t *raw = dup(m, data, nbytes);
    if (!t || !nm || (rank > 0 && !d) || !raw)
        return;
    onnx__tensor_proto__init(t);
    t->name = nm;
    t->has_data_type = 1;
    t->data_type = elem_type;
    t->n_dims = rank > 0 ? (size_t)rank : 0;
    t->dims = d;
    t->has_raw_data = 1;
    t->raw_data.data = raw;
    t->raw_data.len = nbytes;
    push(m, (void ***)&m->graph.initializer, &m->graph.n_initializer, &m->cap_init, t);
}

void cp_t_onnx_init_i64(struct cp_t_onnx *m, const char *name, int rank, const int64_t *dims,
                        const int64_t *v, size_t n)
{
    cp_t_onnx_init(m, name, CP_T_I64, rank, dims, v, n * sizeof *v);
}

void cp_t_onnx_init_f32(struct cp_t_onnx *m, const char *name, int rank, const int64_t *dims,
                        const float *v, size_t n)
{
    cp_t_onnx_init(m, name, CP_T_F32, rank, dims, v, n * sizeof *v);
}

/* ---- nodes --------------------------------------------------------------------------- */

/* "a,,b" into {"a", "", "b"}; "" gives none. */
static char **split(struct cp_t_onnx *m, const char *spec, size_t *n)
{
    *n = 0;
    size_t cnt = *spec ? 1 : 0;
    for (const char *p = spec; *p; p++)
        cnt += *p == ',';
    char **v = alloc(m, cnt, sizeof *v);
    if (!v)
        return NULL;
    const char *p = spec;
    for (size_t i = 0; i < cnt; i++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        v[i] = alloc(m, len + 1, 1);
        if (!v[i])
            return NULL;
        memcpy(v[i], p, len);
        p = e ? e + 1 : p + len;
    }
    *n = cnt;
    return v;
}

int cp_t_onnx_node(struct cp_t_onnx *m, const char *op, const char *name, const char *ins,
                   const char *outs)
{
    Onnx__NodeProto *n = alloc(m, 1, sizeof *n);
    if (!n)
        return -1;
    onnx__node_proto__init(n);
    n->op_type = str(m, op);
    n->name = str(m, name);
    n->input = split(m, ins, &n->n_input);
    n->output = split(m, outs, &n->n_output);
    n->attribute = alloc(m, MAX_ATTRS, sizeof *n->attribute);
    if (m->failed)
        return -1;
    if (!push(m, (void ***)&m->graph.node, &m->graph.n_node, &m->cap_node, n))
        return -1;
    return (int)m->graph.n_node - 1;
}

static Onnx__AttributeProto *attr_new(struct cp_t_onnx *m, int node, const char *name,
                                      Onnx__AttributeProto__AttributeType type)
{
    if (m->failed || node < 0 || (size_t)node >= m->graph.n_node)
        return NULL;
    Onnx__NodeProto *n = m->graph.node[node];
    if (n->n_attribute == MAX_ATTRS) {
        m->failed = true;
        return NULL;
    }
    Onnx__AttributeProto *a = alloc(m, 1, sizeof *a);
    char *nm = str(m, name);
    if (!a || !nm)
        return NULL;
    onnx__attribute_proto__init(a);
    a->name = nm;
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

void cp_t_onnx_attr_int(struct cp_t_onnx *m, int node, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr_new(m, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (!a)
        return;
    a->has_i = 1;
    a->i = v;
}

void cp_t_onnx_attr_ints(struct cp_t_onnx *m, int node, const char *name, const int64_t *v,
                         size_t n)
{
    Onnx__AttributeProto *a = attr_new(m, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *copy = a ? dup(m, v, n * sizeof *v) : NULL;
    if (!copy)
        return;
    a->ints = copy;
    a->n_ints = n;
}

void cp_t_onnx_attr_floats(struct cp_t_onnx *m, int node, const char *name, const float *v,
                           size_t n)
{
    Onnx__AttributeProto *a =
        attr_new(m, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    float *copy = a ? dup(m, v, n * sizeof *v) : NULL;
    if (!copy)
        return;
    a->floats = copy;
    a->n_floats = n;
}

void cp_t_onnx_attr_string(struct cp_t_onnx *m, int node, const char *name, const char *v)
{
    Onnx__AttributeProto *a =
        attr_new(m, node, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    char *copy = a ? str(m, v) : NULL;
    if (!copy)
        return;
    a->has_s = 1;
    a->s.data = (uint8_t *)copy;
    a->s.len = strlen(v);
}

/* ---- output ------------------------------------------------------------------------------ */

uint8_t *cp_t_onnx_bytes(struct cp_t_onnx *m, size_t *len)
{
    *len = 0;
    if (m->failed)
        return NULL;
    size_t n = onnx__model_proto__get_packed_size(&m->model);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf || onnx__model_proto__pack(&m->model, buf) != n) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

bool cp_t_onnx_write(struct cp_t_onnx *m, const char *path)
{
    size_t len;
    uint8_t *buf = cp_t_onnx_bytes(m, &len);
    if (!buf) {
        fprintf(stderr, "cp_t_onnx_write %s: the model could not be built (out of memory)\n", path);
        return false;
    }
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(buf, 1, len, f) == len;
    int err = errno;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "cp_t_onnx_write %s: %s\n", path, strerror(err));
    free(buf);
    return ok;
}
