/* The importer tests' scratch state and model builders (onnx_test.h). */
#include "onnx_test.h"

#include <criterion/criterion.h>

#include "atc_bridge/convert.h"
#include "onnx/onnx_internal.h"
#include "proto/onnx.pb-c.h"
#include "support/cli.h"
#include "support/run.h"

#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- scratch state: a folder and every allocation made for a model ------- */

static void **kept;
static size_t n_kept, cap_kept;

void onnx_test_teardown(void)
{
    for (size_t i = 0; i < n_kept; i++)
        free(kept[i]);
    free(kept);
    kept = NULL;
    n_kept = cap_kept = 0;
    cp_t_scratch_close();
}

void *tcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    cr_assert(p);
    if (n_kept == cap_kept) {
        cap_kept = cap_kept ? cap_kept * 2 : 256;
        kept = realloc(kept, cap_kept * sizeof *kept);
        cr_assert(kept);
    }
    kept[n_kept++] = p;
    return p;
}

char *tstr(const char *s)
{
    char *p = tcalloc(strlen(s) + 1, 1);
    strcpy(p, s);
    return p;
}

char *path_in(const char *name)
{
    char *p = tcalloc(strlen(cp_t_dir) + strlen(name) + 2, 1);
    sprintf(p, "%s/%s", cp_t_dir, name);
    return p;
}

void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot write %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* Split "a,,b" into {"a", "", "b"}; "" gives no items. */
char **split(const char *spec, size_t *n)
{
    *n = 0;
    if (!spec || !*spec)
        return tcalloc(1, sizeof(char *));
    size_t cnt = 1;
    for (const char *p = spec; *p; p++)
        cnt += *p == ',';
    char **v = tcalloc(cnt, sizeof *v);
    const char *p = spec;
    for (size_t i = 0; i < cnt; i++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        v[i] = tcalloc(len + 1, 1);
        memcpy(v[i], p, len);
        p = e ? e + 1 : p + len;
    }
    *n = cnt;
    return v;
}

/* ---- model builders -------------------------------------------------------- */

#define CAP 64

Onnx__ModelProto *model_new(int64_t opset)
{
    Onnx__ModelProto *m = tcalloc(1, sizeof *m);
    onnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = 8;
    m->producer_name = tstr("cannprof-test");
    Onnx__OperatorSetIdProto *o = tcalloc(1, sizeof *o);
    onnx__operator_set_id_proto__init(o);
    o->domain = tstr("");
    o->has_version = 1;
    o->version = opset;
    m->opset_import = tcalloc(4, sizeof *m->opset_import);
    m->opset_import[0] = o;
    m->n_opset_import = 1;
    Onnx__GraphProto *g = tcalloc(1, sizeof *g);
    onnx__graph_proto__init(g);
    g->name = tstr("test_graph");
    g->node = tcalloc(CAP, sizeof *g->node);
    g->initializer = tcalloc(CAP, sizeof *g->initializer);
    g->input = tcalloc(CAP, sizeof *g->input);
    g->output = tcalloc(CAP, sizeof *g->output);
    g->value_info = tcalloc(CAP, sizeof *g->value_info);
    m->graph = g;
    return m;
}

Onnx__NodeProto *node_add(Onnx__GraphProto *g, const char *op, const char *name, const char *ins,
                          const char *outs)
{
    Onnx__NodeProto *n = tcalloc(1, sizeof *n);
    onnx__node_proto__init(n);
    n->op_type = op ? tstr(op) : NULL;
    n->name = name ? tstr(name) : NULL;
    n->input = split(ins, &n->n_input);
    n->output = split(outs, &n->n_output);
    n->attribute = tcalloc(8, sizeof *n->attribute);
    cr_assert(g->n_node < CAP);
    g->node[g->n_node++] = n;
    return n;
}

Onnx__AttributeProto *attr_new(Onnx__NodeProto *n, const char *name,
                               Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = tcalloc(1, sizeof *a);
    onnx__attribute_proto__init(a);
    a->name = tstr(name);
    a->has_type = 1;
    a->type = type;
    n->attribute[n->n_attribute++] = a;
    return a;
}

void attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr_new(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

void attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t k)
{
    Onnx__AttributeProto *a = attr_new(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = tcalloc(k, sizeof *a->ints);
    memcpy(a->ints, v, k * sizeof *v);
    a->n_ints = k;
}

Onnx__TensorProto *tensor_new(const char *name, int dtype, const int64_t *dims, size_t rank)
{
    Onnx__TensorProto *t = tcalloc(1, sizeof *t);
    onnx__tensor_proto__init(t);
    t->name = name ? tstr(name) : NULL;
    t->has_data_type = dtype != 0;
    t->data_type = dtype;
    t->dims = tcalloc(rank, sizeof *t->dims);
    if (rank)
        memcpy(t->dims, dims, rank * sizeof *dims);
    t->n_dims = rank;
    return t;
}

void tensor_raw(Onnx__TensorProto *t, const void *data, size_t len)
{
    t->has_raw_data = 1;
    t->raw_data.data = tcalloc(len, 1);
    memcpy(t->raw_data.data, data, len);
    t->raw_data.len = len;
}

Onnx__TensorProto *tensor_f32(const char *name, const int64_t *dims, size_t rank, const float *v,
                              size_t n, bool raw)
{
    Onnx__TensorProto *t = tensor_new(name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, dims, rank);
    if (raw) {
        tensor_raw(t, v, n * sizeof *v);
    } else {
        t->float_data = tcalloc(n, sizeof *v);
        memcpy(t->float_data, v, n * sizeof *v);
        t->n_float_data = n;
    }
    return t;
}

Onnx__TensorProto *tensor_i64(const char *name, const int64_t *dims, size_t rank, const int64_t *v,
                              size_t n, bool raw)
{
    Onnx__TensorProto *t = tensor_new(name, ONNX__TENSOR_PROTO__DATA_TYPE__INT64, dims, rank);
    if (raw) {
        tensor_raw(t, v, n * sizeof *v);
    } else {
        t->int64_data = tcalloc(n, sizeof *v);
        memcpy(t->int64_data, v, n * sizeof *v);
        t->n_int64_data = n;
    }
    return t;
}

void init_add(Onnx__GraphProto *g, Onnx__TensorProto *t)
{
    cr_assert(g->n_initializer < CAP);
    g->initializer[g->n_initializer++] = t;
}

void ext_entry(Onnx__TensorProto *t, const char *key, const char *value)
{
    if (!t->external_data)
        t->external_data = tcalloc(8, sizeof *t->external_data);
    Onnx__StringStringEntryProto *e = tcalloc(1, sizeof *e);
    onnx__string_string_entry_proto__init(e);
    e->key = tstr(key);
    e->value = tstr(value);
    t->external_data[t->n_external_data++] = e;
    t->has_data_location = 1;
    t->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
}

/* dims: "1,batch,?" (number: dim_value; "?": no value; else dim_param);
 * "" is a scalar; NULL leaves the shape out. */
Onnx__ValueInfoProto *vi_new(const char *name, int elem, const char *dims)
{
    Onnx__ValueInfoProto *v = tcalloc(1, sizeof *v);
    onnx__value_info_proto__init(v);
    v->name = tstr(name);
    Onnx__TypeProto *tp = tcalloc(1, sizeof *tp);
    onnx__type_proto__init(tp);
    Onnx__TypeProto__Tensor *tt = tcalloc(1, sizeof *tt);
    onnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    if (!dims)
        return v;
    Onnx__TensorShapeProto *sp = tcalloc(1, sizeof *sp);
    onnx__tensor_shape_proto__init(sp);
    size_t n;
    char **parts = split(dims, &n);
    sp->dim = tcalloc(n, sizeof *sp->dim);
    for (size_t i = 0; i < n; i++) {
        Onnx__TensorShapeProto__Dimension *dm = tcalloc(1, sizeof *dm);
        onnx__tensor_shape_proto__dimension__init(dm);
        if (parts[i][0] >= '0' && parts[i][0] <= '9') {
            dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
            dm->dim_value = atoll(parts[i]);
        } else if (strcmp(parts[i], "?") != 0) {
            dm->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
            dm->dim_param = parts[i];
        }
        sp->dim[i] = dm;
    }
    sp->n_dim = n;
    tt->shape = sp;
    return v;
}

void input_add(Onnx__GraphProto *g, const char *name, int elem, const char *dims)
{
    g->input[g->n_input++] = vi_new(name, elem, dims);
}

void output_add(Onnx__GraphProto *g, const char *name, int elem, const char *dims)
{
    g->output[g->n_output++] = vi_new(name, elem, dims);
}

void write_model(Onnx__ModelProto *m, const char *path)
{
    size_t n = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = tcalloc(n, 1);
    cr_assert_eq(onnx__model_proto__pack(m, buf), n);
    write_bytes(path, buf, n);
}

/* Write `m` as scratch/model.onnx and import it. */
enum cp_status import_as(Onnx__ModelProto *m, const char *file, const struct cp_input_shape *shapes,
                         size_t n_shapes, struct cp_graph **g, struct cp_diag *d)
{
    char *path = path_in(file);
    write_model(m, path);
    cp_diag_init(d);
    enum cp_status st = cp_onnx_import(path, shapes, n_shapes, g, NULL, d);
    if (st == CP_OK)
        cr_assert_not_null(*g);
    else
        cr_assert_null(*g);
    return st;
}

enum cp_status import(Onnx__ModelProto *m, struct cp_graph **g, struct cp_diag *d)
{
    return import_as(m, "model.onnx", NULL, 0, g, d);
}

/* Expect failure with `st` and a message containing `part`. */
void expect_error(Onnx__ModelProto *m, enum cp_status st, const char *part)
{
    struct cp_graph *g = NULL;
    struct cp_diag d;
    enum cp_status got = import(m, &g, &d);
    cr_assert_eq(got, st, "status %d (%s), wanted %d", got, d.msg, st);
    cr_assert(strstr(d.msg, part), "message '%s' lacks '%s'", d.msg, part);
    cr_assert(strncmp(d.msg, cp_t_dir, strlen(cp_t_dir)) == 0,
              "message '%s' does not start with "
              "the path",
              d.msg);
}

const struct cp_tensor *tensor_named(const struct cp_graph *g, const char *name)
{
    int32_t i = cp_graph_find_tensor(g, name);
    cr_assert(i >= 0, "no tensor '%s'", name);
    return cp_graph_tensor(g, i);
}

/* x[1,4] @ W[4,3] + B[3] -> y[1,3] */
const float W[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
const float B[3] = {0.5f, -1.25f, 3.0f};

Onnx__ModelProto *matmul_add_model(int64_t opset)
{
    Onnx__ModelProto *m = model_new(opset);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "1,4");
    init_add(g, tensor_f32("W", (int64_t[]){4, 3}, 2, W, 12, false));
    init_add(g, tensor_f32("B", (int64_t[]){3}, 1, B, 3, true));
    node_add(g, "MatMul", "mm", "x,W", "h");
    node_add(g, "Add", "add", "h,B", "y");
    output_add(g, "y", F32, "1,3");
    return m;
}
