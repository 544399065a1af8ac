/* ONNX import: models are built here with protobuf-c structs, packed into a
 * scratch folder and imported. */
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

static void teardown(void)
{
    for (size_t i = 0; i < n_kept; i++)
        free(kept[i]);
    free(kept);
    kept = NULL;
    n_kept = cap_kept = 0;
    cp_t_scratch_close();
}

TestSuite(onnx_import, .init = cp_t_scratch_setup, .fini = teardown);

static void *tcalloc(size_t n, size_t size)
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

static char *tstr(const char *s)
{
    char *p = tcalloc(strlen(s) + 1, 1);
    strcpy(p, s);
    return p;
}

static char *path_in(const char *name)
{
    char *p = tcalloc(strlen(cp_t_dir) + strlen(name) + 2, 1);
    sprintf(p, "%s/%s", cp_t_dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot write %s", path);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* Split "a,,b" into {"a", "", "b"}; "" gives no items. */
static char **split(const char *spec, size_t *n)
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

static Onnx__ModelProto *model_new(int64_t opset)
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

static Onnx__NodeProto *node_add(Onnx__GraphProto *g, const char *op, const char *name,
                                 const char *ins, const char *outs)
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

static Onnx__AttributeProto *attr_new(Onnx__NodeProto *n, const char *name,
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

static void attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr_new(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    a->has_i = 1;
    a->i = v;
}

static void attr_ints(Onnx__NodeProto *n, const char *name, const int64_t *v, size_t k)
{
    Onnx__AttributeProto *a = attr_new(n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->ints = tcalloc(k, sizeof *a->ints);
    memcpy(a->ints, v, k * sizeof *v);
    a->n_ints = k;
}

static Onnx__TensorProto *tensor_new(const char *name, int dtype, const int64_t *dims, size_t rank)
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

static void tensor_raw(Onnx__TensorProto *t, const void *data, size_t len)
{
    t->has_raw_data = 1;
    t->raw_data.data = tcalloc(len, 1);
    memcpy(t->raw_data.data, data, len);
    t->raw_data.len = len;
}

static Onnx__TensorProto *tensor_f32(const char *name, const int64_t *dims, size_t rank,
                                     const float *v, size_t n, bool raw)
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

static Onnx__TensorProto *tensor_i64(const char *name, const int64_t *dims, size_t rank,
                                     const int64_t *v, size_t n, bool raw)
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

static void init_add(Onnx__GraphProto *g, Onnx__TensorProto *t)
{
    cr_assert(g->n_initializer < CAP);
    g->initializer[g->n_initializer++] = t;
}

static void ext_entry(Onnx__TensorProto *t, const char *key, const char *value)
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
static Onnx__ValueInfoProto *vi_new(const char *name, int elem, const char *dims)
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

#define F32 ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT
#define I64 ONNX__TENSOR_PROTO__DATA_TYPE__INT64

static void input_add(Onnx__GraphProto *g, const char *name, int elem, const char *dims)
{
    g->input[g->n_input++] = vi_new(name, elem, dims);
}

static void output_add(Onnx__GraphProto *g, const char *name, int elem, const char *dims)
{
    g->output[g->n_output++] = vi_new(name, elem, dims);
}

static void write_model(Onnx__ModelProto *m, const char *path)
{
    size_t n = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = tcalloc(n, 1);
    cr_assert_eq(onnx__model_proto__pack(m, buf), n);
    write_bytes(path, buf, n);
}

/* Write `m` as scratch/model.onnx and import it. */
static enum cp_status import_as(Onnx__ModelProto *m, const char *file,
                                const struct cp_input_shape *shapes, size_t n_shapes,
                                struct cp_graph **g, struct cp_diag *d)
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

static enum cp_status import(Onnx__ModelProto *m, struct cp_graph **g, struct cp_diag *d)
{
    return import_as(m, "model.onnx", NULL, 0, g, d);
}

/* Expect failure with `st` and a message containing `part`. */
static void expect_error(Onnx__ModelProto *m, enum cp_status st, const char *part)
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

static const struct cp_tensor *tensor_named(const struct cp_graph *g, const char *name)
{
    int32_t i = cp_graph_find_tensor(g, name);
    cr_assert(i >= 0, "no tensor '%s'", name);
    return cp_graph_tensor(g, i);
}

/* x[1,4] @ W[4,3] + B[3] -> y[1,3] */
static const float W[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static const float B[3] = {0.5f, -1.25f, 3.0f};

static Onnx__ModelProto *matmul_add_model(int64_t opset)
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

/* ---- well-formed models ---------------------------------------------------- */

Test(onnx_import, test_onnx_imports_matmul_add)
{
    Onnx__ModelProto *m = matmul_add_model(13);
    char *path = path_in("mm.onnx");
    write_model(m, path);
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    char hash[33];
    cr_assert_eq(cp_onnx_import(path, NULL, 0, &g, hash, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(strlen(hash), 32);
    cr_assert_eq(cp_graph_opset(g), 13);
    cr_assert_str_eq(cp_graph_name(g), "test_graph");

    cr_assert_eq(cp_graph_n_inputs(g), 1);
    const struct cp_tensor *x = cp_graph_tensor(g, cp_graph_input(g, 0));
    cr_assert_str_eq(x->name, "x");
    cr_assert_eq(x->kind, CP_TENSOR_INPUT);
    cr_assert_eq(x->dtype, CP_DTYPE_F32);
    cr_assert_eq(x->shape.rank, 2);
    cr_assert_eq(x->shape.dims[0].value, 1);
    cr_assert_eq(x->shape.dims[1].value, 4);

    cr_assert_eq(cp_graph_n_outputs(g), 1);
    const struct cp_tensor *y = cp_graph_tensor(g, cp_graph_output(g, 0));
    cr_assert_str_eq(y->name, "y");
    cr_assert_eq(y->dtype, CP_DTYPE_F32); /* declared in graph.output */

    cr_assert_eq(cp_graph_n_nodes(g), 2);
    const struct cp_node *mm = cp_graph_node(g, 0), *add = cp_graph_node(g, 1);
    cr_assert_str_eq(mm->name, "mm");
    cr_assert_eq(mm->op, CP_OP_MATMUL);
    cr_assert_str_eq(mm->domain, "");
    cr_assert_eq(mm->n_origins, 1);
    cr_assert_str_eq(mm->origins[0], "mm");
    cr_assert_eq(mm->n_inputs, 2);
    cr_assert_eq(mm->inputs[0], cp_graph_input(g, 0));
    cr_assert_eq(mm->inputs[1], cp_graph_find_tensor(g, "W"));
    cr_assert_eq(add->op, CP_OP_ADD);
    cr_assert_eq(add->inputs[0], mm->outputs[0]);
    cr_assert_eq(add->outputs[0], cp_graph_output(g, 0));
    cr_assert_eq(cp_graph_tensor(g, mm->outputs[0])->producer, 0);

    const struct cp_tensor *w = tensor_named(g, "W");
    cr_assert_eq(w->kind, CP_TENSOR_INITIALIZER);
    cr_assert_eq(w->dtype, CP_DTYPE_F32);
    cr_assert_eq(w->shape.rank, 2);
    cr_assert_eq(w->shape.dims[0].value, 4);
    cr_assert_eq(w->shape.dims[1].value, 3);
    cr_assert_eq(w->nbytes, sizeof W);
    cr_assert_eq(memcmp(w->data, W, sizeof W), 0);
    const struct cp_tensor *b = tensor_named(g, "B");
    cr_assert_eq(b->nbytes, sizeof B);
    cr_assert_eq(memcmp(b->data, B, sizeof B), 0);

    /* The content hash is that of the file's bytes. */
    uint8_t *bytes;
    size_t len;
    cr_assert_eq(cp_file_read(path, &bytes, &len, NULL), CP_OK);
    char want[33];
    cp_hash128_hex(bytes, len, want);
    free(bytes);
    cr_assert_str_eq(hash, want);

    cr_assert_eq(cp_graph_verify(g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
}

Test(onnx_import, test_onnx_raw_data_and_float_data_give_the_same_bytes)
{
    Onnx__ModelProto *m = model_new(17);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "4,3");
    init_add(g, tensor_f32("typed", (int64_t[]){4, 3}, 2, W, 12, false));
    init_add(g, tensor_f32("raw", (int64_t[]){4, 3}, 2, W, 12, true));
    node_add(g, "Add", "a", "x,typed", "t");
    node_add(g, "Add", "b", "t,raw", "y");
    output_add(g, "y", F32, NULL);
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    const struct cp_tensor *a = tensor_named(gr, "typed"), *b = tensor_named(gr, "raw");
    cr_assert_eq(a->nbytes, 48);
    cr_assert_eq(b->nbytes, 48);
    cr_assert_eq(memcmp(a->data, b->data, 48), 0);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_int_initializers_from_typed_fields)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    const int64_t shape[] = {2, -1};
    input_add(g, "x", F32, "2,3");
    init_add(g, tensor_i64("shape_typed", (int64_t[]){2}, 1, shape, 2, false));
    init_add(g, tensor_i64("shape_raw", (int64_t[]){2}, 1, shape, 2, true));
    /* f16 and i8 live in int32_data, one value per element. */
    Onnx__TensorProto *h =
        tensor_new("half", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16, (int64_t[]){2}, 1);
    h->int32_data = tcalloc(2, sizeof(int32_t));
    h->int32_data[0] = 0x3c00; /* 1.0 */
    h->int32_data[1] = 0xc000; /* -2.0 */
    h->n_int32_data = 2;
    init_add(g, h);
    Onnx__TensorProto *q = tensor_new("q", ONNX__TENSOR_PROTO__DATA_TYPE__INT8, (int64_t[]){3}, 1);
    q->int32_data = tcalloc(3, sizeof(int32_t));
    q->int32_data[0] = -1;
    q->int32_data[1] = 127;
    q->int32_data[2] = -128;
    q->n_int32_data = 3;
    init_add(g, q);
    Onnx__TensorProto *s = tensor_new("scalar", I64, NULL, 0);
    s->int64_data = tcalloc(1, sizeof(int64_t));
    s->int64_data[0] = 42;
    s->n_int64_data = 1;
    init_add(g, s);
    node_add(g, "Reshape", "r", "x,shape_typed", "y");
    output_add(g, "y", F32, NULL);

    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    const struct cp_tensor *a = tensor_named(gr, "shape_typed"), *b = tensor_named(gr, "shape_raw");
    cr_assert_eq(a->dtype, CP_DTYPE_I64);
    cr_assert_eq(a->nbytes, 16);
    cr_assert_eq(memcmp(a->data, shape, 16), 0);
    cr_assert_eq(memcmp(b->data, shape, 16), 0);
    const struct cp_tensor *ht = tensor_named(gr, "half");
    cr_assert_eq(ht->dtype, CP_DTYPE_F16);
    cr_assert_eq(ht->nbytes, 4);
    const uint16_t hw[2] = {0x3c00, 0xc000};
    cr_assert_eq(memcmp(ht->data, hw, 4), 0);
    const struct cp_tensor *qt = tensor_named(gr, "q");
    const int8_t qw[3] = {-1, 127, -128};
    cr_assert_eq(qt->nbytes, 3);
    cr_assert_eq(memcmp(qt->data, qw, 3), 0);
    const struct cp_tensor *st = tensor_named(gr, "scalar");
    cr_assert_eq(st->shape.rank, 0);
    cr_assert_eq(*(const int64_t *)st->data, 42);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_constant_nodes_become_initializers)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "3");
    Onnx__NodeProto *c1 = node_add(g, "Constant", "c_tensor", "", "k");
    Onnx__AttributeProto *a = attr_new(c1, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = tensor_f32("", (int64_t[]){3}, 1, B, 3, true);
    Onnx__NodeProto *c2 = node_add(g, "Constant", "c_ints", "", "axes");
    attr_ints(c2, "value_ints", (int64_t[]){0, 2}, 2);
    Onnx__NodeProto *c3 = node_add(g, "Constant", NULL, "", "f");
    Onnx__AttributeProto *af =
        attr_new(c3, "value_float", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    af->has_f = 1;
    af->f = 2.5f;
    node_add(g, "Add", "add", "x,k", "t");
    node_add(g, "Mul", "mul", "t,f", "y");
    output_add(g, "y", F32, NULL);

    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_n_nodes(gr), 2, "Constant adds no node");
    const struct cp_tensor *k = tensor_named(gr, "k");
    cr_assert_eq(k->kind, CP_TENSOR_INITIALIZER);
    cr_assert_eq(k->producer, -1);
    cr_assert_eq(k->dtype, CP_DTYPE_F32);
    cr_assert_eq(memcmp(k->data, B, sizeof B), 0);
    const struct cp_tensor *axes = tensor_named(gr, "axes");
    cr_assert_eq(axes->dtype, CP_DTYPE_I64);
    cr_assert_eq(axes->shape.rank, 1);
    cr_assert_eq(axes->shape.dims[0].value, 2);
    cr_assert_eq(((const int64_t *)axes->data)[1], 2);
    const struct cp_tensor *f = tensor_named(gr, "f");
    cr_assert_eq(f->shape.rank, 0);
    cr_assert_float_eq(*(const float *)f->data, 2.5f, 0);
    cr_assert_eq(cp_graph_verify(gr, &d), CP_OK, "%s", d.msg);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_constant_sparse_value_is_refused)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__NodeProto *c = node_add(m->graph, "Constant", "c", "", "k");
    Onnx__AttributeProto *a =
        attr_new(c, "sparse_value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR);
    Onnx__SparseTensorProto *sp = tcalloc(1, sizeof *sp);
    onnx__sparse_tensor_proto__init(sp);
    a->sparse_tensor = sp;
    output_add(m->graph, "k", F32, NULL);
    expect_error(m, CP_ERR_UNSUPPORTED, "node 'c' (Constant): sparse_value is not supported");
}

Test(onnx_import, test_onnx_dim_param_becomes_symbolic_dim)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "batch,3,?");
    node_add(g, "Relu", "r", "x", "y");
    output_add(g, "y", F32, "batch,3,?");
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    const struct cp_tensor *x = tensor_named(gr, "x");
    cr_assert_eq(x->shape.rank, 3);
    cr_assert_eq(x->shape.dims[0].value, -1);
    cr_assert_str_eq(x->shape.dims[0].sym, "batch");
    cr_assert_eq(x->shape.dims[1].value, 3);
    cr_assert_null(x->shape.dims[1].sym);
    cr_assert_eq(x->shape.dims[2].value, -1);
    cr_assert_null(x->shape.dims[2].sym);
    cp_graph_free(gr);
}

static Onnx__ModelProto *two_input_model(void)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "batch,3,4");
    input_add(g, "z", F32, "batch,3,4");
    /* An initializer listed among the inputs is no runtime input. */
    input_add(g, "W", F32, "3,4");
    init_add(g, tensor_f32("W", (int64_t[]){3, 4}, 2, W, 12, false));
    node_add(g, "Add", "a", "x,z", "t");
    node_add(g, "Add", "b", "t,W", "y");
    output_add(g, "y", F32, "batch,3,4");
    return m;
}

Test(onnx_import, test_onnx_initializers_listed_as_inputs_are_not_runtime_inputs)
{
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(two_input_model(), &gr, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_n_inputs(gr), 2);
    cr_assert_eq(tensor_named(gr, "W")->kind, CP_TENSOR_INITIALIZER);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_input_shape_overrides_declared_shape)
{
    struct cp_input_shape s = {.name = "x", .rank = 3, .dims = {8, 3, -1}};
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import_as(two_input_model(), "m.onnx", &s, 1, &gr, &d), CP_OK, "%s", d.msg);
    const struct cp_tensor *x = tensor_named(gr, "x");
    cr_assert_eq(x->shape.rank, 3);
    cr_assert_eq(x->shape.dims[0].value, 8);
    cr_assert_null(x->shape.dims[0].sym);
    cr_assert_eq(x->shape.dims[2].value, -1);
    const struct cp_tensor *z = tensor_named(gr, "z");
    cr_assert_str_eq(z->shape.dims[0].sym, "batch", "inputs not named keep their shape");
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_input_shape_with_unknown_name_lists_inputs)
{
    struct cp_input_shape s = {.name = "foo", .rank = 1, .dims = {1}};
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import_as(two_input_model(), "m.onnx", &s, 1, &gr, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "--input_shape names 'foo', but the model's inputs are: x, z"), "%s",
              d.msg);
}

Test(onnx_import, test_onnx_input_shape_with_wrong_rank_is_refused)
{
    struct cp_input_shape s = {.name = "x", .rank = 2, .dims = {1, 3}};
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import_as(two_input_model(), "m.onnx", &s, 1, &gr, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "--input_shape gives input 'x' rank 2, but the model declares rank 3"),
              "%s", d.msg);
}

Test(onnx_import, test_onnx_unnamed_nodes_get_unique_generated_names)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "3");
    node_add(g, "Relu", NULL, "x", "a");
    node_add(g, "Relu", "", "a", "b");
    node_add(g, "Relu", "Relu_0", "b", "c"); /* clashes with a generated name */
    node_add(g, "Relu", "Relu_0", "c", "y"); /* a duplicate in the model itself */
    output_add(g, "y", F32, NULL);
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    cr_assert_str_eq(cp_graph_node(gr, 0)->name, "Relu_0");
    cr_assert_str_eq(cp_graph_node(gr, 0)->origins[0], "Relu_0");
    cr_assert_str_eq(cp_graph_node(gr, 1)->name, "Relu_1");
    cr_assert_str_eq(cp_graph_node(gr, 2)->name, "Relu_0_2");
    cr_assert_str_eq(cp_graph_node(gr, 2)->origins[0], "Relu_0");
    cr_assert_str_eq(cp_graph_node(gr, 3)->name, "Relu_0_3");
    cr_assert_eq(cp_graph_verify(gr, &d), CP_OK, "%s", d.msg);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_empty_input_names_are_absent_optional_inputs)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "3");
    init_add(g, tensor_f32("hi", NULL, 0, B, 1, false));
    node_add(g, "Clip", "clip", "x,,hi", "t");
    node_add(g, "Dropout", "drop", "t", "y,"); /* no mask output */
    output_add(g, "y", F32, NULL);
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    const struct cp_node *n = cp_graph_node(gr, 0);
    cr_assert_eq(n->n_inputs, 3);
    cr_assert_eq(n->inputs[1], -1);
    cr_assert_eq(n->inputs[2], cp_graph_find_tensor(gr, "hi"));
    const struct cp_node *drop = cp_graph_node(gr, 1);
    cr_assert_eq(drop->n_outputs, 2);
    cr_assert_eq(drop->outputs[1], -1);
    cr_assert_eq(cp_graph_verify(gr, &d), CP_OK, "%s", d.msg);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_nodes_out_of_file_order_are_accepted)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "3");
    node_add(g, "Add", "second", "t,k", "y");
    node_add(g, "Sigmoid", "first", "x", "t");
    Onnx__NodeProto *c = node_add(g, "Constant", "late_constant", "", "k");
    Onnx__AttributeProto *a = attr_new(c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    a->t = tensor_f32("", (int64_t[]){3}, 1, B, 3, false);
    output_add(g, "y", F32, NULL);
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(tensor_named(gr, "t")->producer, 1);
    const struct cp_tensor *k = tensor_named(gr, "k");
    cr_assert_eq(k->kind, CP_TENSOR_INITIALIZER);
    cr_assert_eq(k->dtype, CP_DTYPE_F32);
    cr_assert_eq(memcmp(k->data, B, sizeof B), 0);
    cr_assert_eq(cp_graph_verify(gr, &d), CP_OK, "%s", d.msg);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_attributes_are_copied_with_types)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "1,3,8,8");
    Onnx__NodeProto *n = node_add(g, "MaxPool", "pool", "x", "y");
    attr_ints(n, "kernel_shape", (int64_t[]){2, 2}, 2);
    attr_ints(n, "strides", (int64_t[]){2, 2}, 2);
    Onnx__AttributeProto *s =
        attr_new(n, "auto_pad", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    s->has_s = 1;
    s->s.data = (uint8_t *)tstr("VALID");
    s->s.len = 5;
    Onnx__NodeProto *lr = node_add(g, "LeakyRelu", "lr", "y", "z");
    Onnx__AttributeProto *al = attr_new(lr, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    al->has_f = 1;
    al->f = 0.25f;
    Onnx__NodeProto *cos = node_add(g, "ConstantOfShape", "cos", "shp", "w");
    Onnx__AttributeProto *av =
        attr_new(cos, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
    av->t = tensor_f32("", (int64_t[]){1}, 1, B, 1, false);
    init_add(g, tensor_i64("shp", (int64_t[]){1}, 1, (int64_t[]){4}, 1, false));
    output_add(g, "z", F32, NULL);
    output_add(g, "w", F32, NULL);
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    const struct cp_node *pool = cp_graph_node(gr, 0);
    const struct cp_attr *k = cp_node_attr(pool, "kernel_shape");
    cr_assert_not_null(k);
    cr_assert_eq(k->type, CP_ATTR_INTS);
    cr_assert_eq(k->n, 2);
    cr_assert_eq(k->ints[1], 2);
    cr_assert_str_eq(cp_node_attr_string(pool, "auto_pad", ""), "VALID");
    cr_assert_float_eq(cp_node_attr_float(cp_graph_node(gr, 1), "alpha", 0), 0.25f, 0);
    const struct cp_attr *v = cp_node_attr(cp_graph_node(gr, 2), "value");
    cr_assert_eq(v->type, CP_ATTR_TENSOR);
    const struct cp_tensor *vt = cp_graph_tensor(gr, v->tensor);
    cr_assert_eq(vt->kind, CP_TENSOR_INITIALIZER);
    cr_assert_float_eq(*(const float *)vt->data, B[0], 0);
    cp_graph_free(gr);
}

/* ---- unsupported models ------------------------------------------------------- */

Test(onnx_import, test_onnx_unsupported_ops_are_listed_at_once)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "3");
    node_add(g, "Foo", "f1", "x", "a");
    node_add(g, "Relu", "r", "a", "b");
    node_add(g, "Bar", "b1", "b", "c");
    node_add(g, "Foo", "f2", "c", "d");
    Onnx__NodeProto *fg = node_add(g, "FusedGemm", "fg", "d", "e");
    fg->domain = tstr("com.microsoft");
    node_add(g, "Foo", "f3", "e", "y");
    output_add(g, "y", F32, NULL);
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_ERR_UNSUPPORTED);
    char want[1024];
    snprintf(want, sizeof want,
             "%s/model.onnx: unsupported ops: Foo (3 nodes), Bar (1 node), "
             "com.microsoft.FusedGemm (1 node); first nodes: 'f1' (Foo), 'b1' (Bar), "
             "'fg' (com.microsoft.FusedGemm)",
             cp_t_dir);
    cr_assert_str_eq(d.msg, want);
}

Test(onnx_import, test_onnx_op_outside_its_opset_range_is_unsupported)
{
    Onnx__ModelProto *m = model_new(14);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "2,3");
    init_add(g, tensor_f32("s", (int64_t[]){3}, 1, B, 3, false));
    node_add(g, "LayerNormalization", "ln", "x,s", "y");
    output_add(g, "y", F32, NULL);
    expect_error(m, CP_ERR_UNSUPPORTED,
                 "unsupported ops: LayerNormalization (1 node; needs opset 17\u201321)");
}

Test(onnx_import, test_onnx_opset_outside_1_to_21_is_rejected)
{
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(matmul_add_model(22), &gr, &d), CP_ERR_UNSUPPORTED);
    char want[1024];
    snprintf(want, sizeof want,
             "%s/model.onnx: opset 22 of the default ONNX domain is not supported (1\u201321)",
             cp_t_dir);
    cr_assert_str_eq(d.msg, want);
    cr_assert_eq(import(matmul_add_model(0), &gr, &d), CP_ERR_UNSUPPORTED);
    cr_assert_eq(import(matmul_add_model(11), &gr, &d), CP_OK, "%s", d.msg);
    cp_graph_free(gr);
    Onnx__ModelProto *m = matmul_add_model(17);
    m->opset_import[0]->domain = tstr("ai.onnx");
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_graph_opset(gr), 17);
    cp_graph_free(gr);
    m->n_opset_import = 0;
    expect_error(m, CP_ERR_INVALID, "does not import the default ONNX domain");
}

Test(onnx_import, test_onnx_unsupported_dtypes_name_the_tensor)
{
    Onnx__ModelProto *m = matmul_add_model(13);
    Onnx__TensorProto *t =
        tensor_new("cpx", ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX64, (int64_t[]){1}, 1);
    t->float_data = tcalloc(2, sizeof(float));
    t->n_float_data = 2;
    init_add(m->graph, t);
    expect_error(m, CP_ERR_UNSUPPORTED, "initializer 'cpx' has dtype COMPLEX64");

    m = matmul_add_model(13);
    m->graph->input[0]->type->tensor_type->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__COMPLEX128;
    expect_error(m, CP_ERR_UNSUPPORTED, "input 'x' has dtype COMPLEX128");

    m = matmul_add_model(13);
    Onnx__NodeProto *c = node_add(m->graph, "Cast", "cast", "y", "y64");
    attr_int(c, "to", ONNX__TENSOR_PROTO__DATA_TYPE__STRING);
    expect_error(m, CP_ERR_UNSUPPORTED, "node 'cast' (Cast): a cast to STRING is not supported");
}

/* ---- malformed models ----------------------------------------------------------- */

Test(onnx_import, test_onnx_truncated_files_fail_cleanly)
{
    Onnx__ModelProto *m = matmul_add_model(13);
    size_t n = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = tcalloc(n, 1);
    onnx__model_proto__pack(m, buf);
    char *path = path_in("trunc.onnx");
    for (size_t len = 0; len < n; len++) {
        write_bytes(path, buf, len);
        struct cp_graph *g = NULL;
        struct cp_diag d;
        cp_diag_init(&d);
        enum cp_status st = cp_onnx_import(path, NULL, 0, &g, NULL, &d);
        cr_assert_neq(st, CP_OK, "a prefix of %zu of %zu bytes imported", len, n);
        cr_assert_null(g);
        cr_assert(strncmp(d.msg, path, strlen(path)) == 0, "%s", d.msg);
    }
    write_bytes(path, buf, n);
    struct cp_graph *g = NULL;
    cr_assert_eq(cp_onnx_import(path, NULL, 0, &g, NULL, NULL), CP_OK);
    cp_graph_free(g);
}

Test(onnx_import, test_onnx_garbage_bytes_fail_cleanly)
{
    uint8_t junk[512];
    uint32_t s = 12345;
    for (int round = 0; round < 64; round++) {
        for (size_t i = 0; i < sizeof junk; i++) {
            s = s * 1103515245u + 12345u;
            junk[i] = (uint8_t)(s >> 16);
        }
        size_t len = 1 + (size_t)round * 7;
        struct cp_graph *g = NULL;
        struct cp_diag d;
        cp_diag_init(&d);
        cr_assert_neq(cp_onnx_import_buffer(junk, len, NULL, "junk.onnx", NULL, 0, &g, &d), CP_OK);
        cr_assert_null(g);
        cr_assert(strncmp(d.msg, "junk.onnx: ", 11) == 0, "%s", d.msg);
    }
    const char *text = "this is not an onnx model at all\n";
    char *path = path_in("text.onnx");
    write_bytes(path, text, strlen(text));
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_neq(cp_onnx_import(path, NULL, 0, &g, NULL, &d), CP_OK);
    write_bytes(path, "", 0);
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import(path, NULL, 0, &g, NULL, &d), CP_ERR_PARSE);
    cr_assert(strstr(d.msg, "empty"), "%s", d.msg);
}

Test(onnx_import, test_onnx_field_with_wrong_wire_type_is_a_parse_error)
{
    /* ir_version = 8 (field 1, varint), then field 7 (graph) as a varint
     * where a length-delimited message belongs. */
    const uint8_t bytes[] = {0x08, 0x08, 0x38, 0x01};
    char *path = path_in("wire.onnx");
    write_bytes(path, bytes, sizeof bytes);
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import(path, NULL, 0, &g, NULL, &d), CP_ERR_PARSE);
    cr_assert(strstr(d.msg, "not a valid ONNX model"), "%s", d.msg);
    cr_assert_null(g);
}

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

/* Messages built from the inside out at the end of buf: the encoding so far
 * is buf[*pos..cap); wrap it as length-delimited field `field`. */
static void wrap(uint8_t *buf, size_t cap, size_t *pos, unsigned field)
{
    uint8_t head[16];
    size_t h = put_varint(head, (uint64_t)field << 3 | 2);
    h += put_varint(head + h, cap - *pos);
    cr_assert(*pos >= h);
    *pos -= h;
    memcpy(buf + *pos, head, h);
}

static void nest(uint8_t *buf, size_t cap, size_t *pos, int levels)
{
    *pos = cap;
    for (int i = 0; i < levels; i++) {
        wrap(buf, cap, pos, 6); /* AttributeProto.g */
        wrap(buf, cap, pos, 5); /* NodeProto.attribute */
        wrap(buf, cap, pos, 1); /* GraphProto.node */
    }
    wrap(buf, cap, pos, 7); /* ModelProto.graph */
}

Test(onnx_import, test_onnx_deeply_nested_messages_fail_cleanly)
{
    /* graph -> node -> attribute.g -> graph -> ...: 300,000 levels in about
     * a megabyte; protobuf-c recurses once per level and overflowed the
     * stack before the nesting guard. */
    const int levels = 100000;
    size_t cap = (size_t)levels * 3 * 4 + 64, pos;
    uint8_t *buf = tcalloc(cap, 1);
    nest(buf, cap, &pos, levels);
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import_buffer(buf + pos, cap - pos, NULL, "deep.onnx", NULL, 0, &g, &d),
                 CP_ERR_PARSE);
    cr_assert_str_eq(d.msg, "deep.onnx: not a valid ONNX model: messages nest more than 100 "
                            "levels deep");
    cr_assert_null(g);

    /* A few levels are within bounds and reach the importer proper. */
    nest(buf, cap, &pos, 5);
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import_buffer(buf + pos, cap - pos, NULL, "deep.onnx", NULL, 0, &g, &d),
                 CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "does not import the default ONNX domain"), "%s", d.msg);
}

Test(onnx_import, test_onnx_attribute_type_mismatch_names_node_and_attribute)
{
    Onnx__ModelProto *m = model_new(11);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "3");
    Onnx__NodeProto *n = node_add(g, "Unsqueeze", "unsq", "x", "y");
    Onnx__AttributeProto *a = attr_new(n, "axes", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    a->has_i = 1; /* an INT where INTS was declared */
    a->i = 0;
    output_add(g, "y", F32, NULL);
    expect_error(m, CP_ERR_INVALID,
                 "node 'unsq' (Unsqueeze): attribute 'axes' is declared INTS but holds INT");

    m = model_new(13);
    input_add(m->graph, "x", F32, "3");
    n = node_add(m->graph, "Concat", "cat", "x,x", "y");
    attr_new(n, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT); /* no i */
    output_add(m->graph, "y", F32, NULL);
    expect_error(m, CP_ERR_INVALID,
                 "node 'cat' (Concat): attribute 'axis' is declared INT but carries no value");

    m = model_new(13);
    input_add(m->graph, "x", F32, "3");
    n = node_add(m->graph, "Concat", "cat", "x,x", "y");
    Onnx__AttributeProto *f = attr_new(n, "axis", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    f->has_f = 1;
    output_add(m->graph, "y", F32, NULL);
    expect_error(m, CP_ERR_INVALID, "node 'cat' (Concat): attribute 'axis' must be INT, not FLOAT");

    m = model_new(13);
    input_add(m->graph, "x", F32, "3");
    node_add(m->graph, "Concat", "cat", "x,x", "y");
    output_add(m->graph, "y", F32, NULL);
    expect_error(m, CP_ERR_INVALID, "node 'cat' (Concat): required attribute 'axis'");
}

Test(onnx_import, test_onnx_missing_fields_are_reported)
{
    Onnx__ModelProto *m = matmul_add_model(13);
    m->graph = NULL;
    expect_error(m, CP_ERR_INVALID, "the model has no graph");

    m = matmul_add_model(13);
    m->graph->node[1]->op_type = NULL;
    expect_error(m, CP_ERR_INVALID, "node 1 ('add') has no op_type");

    m = matmul_add_model(13);
    m->graph->initializer[0]->has_data_type = 0;
    expect_error(m, CP_ERR_INVALID, "initializer 'W' has no data type");

    m = matmul_add_model(13);
    m->graph->initializer[0]->n_float_data = 5;
    expect_error(m, CP_ERR_INVALID, "initializer 'W': float_data has 5 values, but shape 4x3");

    m = matmul_add_model(13);
    m->graph->initializer[1]->raw_data.len = 7;
    expect_error(m, CP_ERR_INVALID, "initializer 'B': raw_data has 7 bytes");

    m = matmul_add_model(13);
    m->graph->initializer[0]->n_dims = 0; /* a scalar with 12 values */
    expect_error(m, CP_ERR_INVALID, "initializer 'W': float_data has 12 values");

    m = matmul_add_model(13);
    m->graph->input[0]->type = NULL;
    expect_error(m, CP_ERR_INVALID, "input 'x' has no type");

    m = matmul_add_model(13);
    m->graph->node[0]->n_input = 1;
    expect_error(m, CP_ERR_INVALID, "node 'mm' (MatMul) has 1 input; MatMul takes exactly 2");
}

Test(onnx_import, test_onnx_dangling_input_names_node_and_input)
{
    Onnx__ModelProto *m = matmul_add_model(13);
    m->graph->node[1]->input[1] = tstr("nowhere");
    expect_error(m, CP_ERR_INVALID,
                 "node 'add' (Add): input 'nowhere' is not a graph input, an initializer or the "
                 "output of any node");
}

Test(onnx_import, test_onnx_duplicate_outputs_are_refused)
{
    Onnx__ModelProto *m = matmul_add_model(13);
    node_add(m->graph, "Relu", "again", "x", "h");
    expect_error(m, CP_ERR_INVALID,
                 "node 'again' (Relu): output 'h' is already the output of "
                 "node 'mm'");

    m = matmul_add_model(13);
    node_add(m->graph, "Relu", "shadow", "y", "W");
    expect_error(m, CP_ERR_INVALID, "node 'shadow' (Relu): output 'W' is also an initializer");

    m = matmul_add_model(13);
    init_add(m->graph, tensor_f32("W", (int64_t[]){3}, 1, B, 3, false));
    expect_error(m, CP_ERR_INVALID, "initializer 'W': the name 'W' is already taken");
}

Test(onnx_import, test_onnx_cycle_imports_but_fails_verification)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "3");
    node_add(g, "Add", "A", "x,b_out", "a_out");
    node_add(g, "Relu", "B", "a_out", "b_out");
    output_add(g, "a_out", F32, NULL);
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(m, &gr, &d), CP_OK, "%s", d.msg);
    cp_diag_init(&d);
    cr_assert_eq(cp_graph_verify(gr, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "node 'A'") || strstr(d.msg, "node 'B'"), "%s", d.msg);
    cp_graph_free(gr);
}

/* ---- external data ---------------------------------------------------------------- */

static Onnx__ModelProto *external_model(const char *location, const char *offset,
                                        const char *length)
{
    Onnx__ModelProto *m = model_new(13);
    Onnx__GraphProto *g = m->graph;
    input_add(g, "x", F32, "4,3");
    Onnx__TensorProto *t = tensor_new("ext_w", F32, (int64_t[]){4, 3}, 2);
    ext_entry(t, "location", location);
    if (offset)
        ext_entry(t, "offset", offset);
    if (length)
        ext_entry(t, "length", length);
    init_add(g, t);
    node_add(g, "Add", "a", "x,ext_w", "y");
    output_add(g, "y", F32, NULL);
    return m;
}

static void write_weights(const char *rel)
{
    uint8_t buf[16 + sizeof W];
    memset(buf, 0xee, 16);
    memcpy(buf + 16, W, sizeof W);
    write_bytes(path_in(rel), buf, sizeof buf);
}

Test(onnx_import, test_onnx_external_data_is_loaded)
{
    write_weights("weights.bin");
    struct cp_graph *gr;
    struct cp_diag d;
    cr_assert_eq(import(external_model("weights.bin", "16", "48"), &gr, &d), CP_OK, "%s", d.msg);
    const struct cp_tensor *t = tensor_named(gr, "ext_w");
    cr_assert_eq(t->nbytes, sizeof W);
    cr_assert_eq(memcmp(t->data, W, sizeof W), 0);
    cp_graph_free(gr);

    /* A subfolder, and no length (the shape decides). */
    cr_assert_eq(mkdir(path_in("data"), 0755), 0);
    write_weights("data/w.bin");
    cr_assert_eq(import(external_model("data/w.bin", "16", NULL), &gr, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(memcmp(tensor_named(gr, "ext_w")->data, W, sizeof W), 0);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_external_data_absolute_path_is_refused)
{
    write_weights("weights.bin");
    expect_error(external_model(path_in("weights.bin"), "16", NULL), CP_ERR_INVALID,
                 "initializer 'ext_w': external data path '/");
    expect_error(external_model("/etc/passwd", NULL, NULL), CP_ERR_INVALID, "is absolute");
}

Test(onnx_import, test_onnx_external_data_dotdot_is_refused)
{
    expect_error(external_model("../x", NULL, NULL), CP_ERR_INVALID,
                 "initializer 'ext_w': external data path '../x' escapes the model's folder");
    expect_error(external_model("sub/../../x", NULL, NULL), CP_ERR_INVALID, "escapes");
}

Test(onnx_import, test_onnx_external_data_symlink_escaping_is_refused)
{
    /* scratch/outside/secret.bin, and scratch/model/link.bin -> it. */
    cr_assert_eq(mkdir(path_in("outside"), 0755), 0);
    cr_assert_eq(mkdir(path_in("model"), 0755), 0);
    write_weights("outside/secret.bin");
    cr_assert_eq(symlink(path_in("outside/secret.bin"), path_in("model/link.bin")), 0);
    struct cp_graph *gr;
    struct cp_diag d;
    enum cp_status st =
        import_as(external_model("link.bin", "16", NULL), "model/m.onnx", NULL, 0, &gr, &d);
    cr_assert_eq(st, CP_ERR_INVALID, "%s", d.msg);
    cr_assert(strstr(d.msg, "initializer 'ext_w': external data path 'link.bin' resolves to"), "%s",
              d.msg);
    cr_assert(strstr(d.msg, "outside the model's folder"), "%s", d.msg);

    /* A symlink that stays inside is fine. */
    write_weights("model/real.bin");
    cr_assert_eq(symlink("real.bin", path_in("model/inner.bin")), 0);
    st = import_as(external_model("inner.bin", "16", NULL), "model/m.onnx", NULL, 0, &gr, &d);
    cr_assert_eq(st, CP_OK, "%s", d.msg);
    cp_graph_free(gr);
}

Test(onnx_import, test_onnx_external_data_out_of_bounds_is_refused)
{
    write_weights("weights.bin"); /* 64 bytes */
    expect_error(external_model("weights.bin", "17", "48"), CP_ERR_INVALID,
                 "initializer 'ext_w': external data 'weights.bin' at offset 17 with length 48 "
                 "runs past the end of the file (64 bytes)");
    expect_error(external_model("weights.bin", "1000", NULL), CP_ERR_INVALID, "runs past the end");
    expect_error(external_model("weights.bin", "0", "40"), CP_ERR_INVALID,
                 "external data length 40 does not match the 48 bytes");
    expect_error(external_model("weights.bin", "-4", NULL), CP_ERR_INVALID,
                 "not a non-negative integer");
    expect_error(external_model("missing.bin", NULL, NULL), CP_ERR_IO, "cannot be opened");
    /* A FIFO must not block the import. */
    cr_assert_eq(mkfifo(path_in("pipe"), 0600), 0);
    expect_error(external_model("pipe", NULL, NULL), CP_ERR_IO,
                 "external data 'pipe' is not a regular file");
    Onnx__ModelProto *m = external_model("weights.bin", "16", NULL);
    m->graph->initializer[0]->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT;
    expect_error(m, CP_ERR_INVALID, "data_location is not EXTERNAL");
}

Test(onnx_import, test_onnx_external_data_from_memory_without_folder_is_refused)
{
    Onnx__ModelProto *m = external_model("weights.bin", NULL, NULL);
    size_t n = onnx__model_proto__get_packed_size(m);
    uint8_t *buf = tcalloc(n, 1);
    onnx__model_proto__pack(m, buf);
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cp_diag_init(&d);
    cr_assert_eq(cp_onnx_import_buffer(buf, n, NULL, "mem.onnx", NULL, 0, &g, &d), CP_ERR_INVALID);
    cr_assert(strstr(d.msg, "mem.onnx: initializer 'ext_w' keeps its data in external file"), "%s",
              d.msg);
}

/* ---- the op table and the example models ------------------------------------------ */

Test(onnx_import, test_onnx_op_table_covers_every_op_once)
{
    /* Every ONNX op of the table; cannprof's own ops are made by passes and
     * imported only where ONNX has the same op. */
    size_t n_onnx = 0;
    for (int op = 1; op < CP_OP_COUNT; op++) {
        if (cp_op_is_own((enum cp_op)op)) {
            /* Only where ONNX has an op of the same name and function. */
            const struct onnx_op_def *def = onnx_op_find(cp_op_name((enum cp_op)op));
            if (def) {
                cr_assert_eq(def->op, (enum cp_op)op, "%s", def->name);
                n_onnx++;
            }
            continue;
        }
        n_onnx++;
        const struct onnx_op_def *def = onnx_op_find(cp_op_name((enum cp_op)op));
        cr_assert_not_null(def, "no ONNX row for %s", cp_op_name((enum cp_op)op));
        cr_assert_eq(def->op, (enum cp_op)op);
        cr_assert_not_null(def->load);
        cr_assert(def->min_opset >= 1 && def->min_opset <= def->max_opset && def->max_opset <= 21,
                  "%s: opsets %d..%d", def->name, def->min_opset, def->max_opset);
    }
    /* Rows that import an ONNX op onto another op (Upsample onto Resize). */
    size_t n_alias = 0;
    for (size_t i = 0; i < onnx_op_count(); i++)
        if (strcmp(onnx_op_at(i)->name, cp_op_name(onnx_op_at(i)->op)) != 0) {
            n_alias++;
            cr_assert(cp_onnx_op_known(onnx_op_at(i)->name));
        }
    cr_assert_eq(onnx_op_count(), n_onnx + n_alias);
    for (size_t i = 0; i < onnx_op_count(); i++)
        for (size_t j = 0; j < i; j++)
            cr_assert(strcmp(onnx_op_at(i)->name, onnx_op_at(j)->name) != 0, "%s twice",
                      onnx_op_at(i)->name);
    cr_assert_null(onnx_op_find("Foo"));
}

Test(onnx_import, test_onnx_example_models_import)
{
    glob_t gl;
    int rc = glob(CP_SOURCE_DIR "/examples/models/*.onnx", 0, NULL, &gl);
    if (rc == GLOB_NOMATCH)
        cr_skip_test("no example models yet");
    cr_assert_eq(rc, 0);
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        struct cp_graph *g = NULL;
        struct cp_diag d;
        cp_diag_init(&d);
        char hash[33];
        enum cp_status st = cp_onnx_import(gl.gl_pathv[i], NULL, 0, &g, hash, &d);
        cr_expect_eq(st, CP_OK, "%s: %s", gl.gl_pathv[i], d.msg);
        if (st != CP_OK)
            continue;
        cr_expect_gt(cp_graph_n_inputs(g), 0, "%s", gl.gl_pathv[i]);
        cr_expect_gt(cp_graph_n_outputs(g), 0, "%s", gl.gl_pathv[i]);
        cr_expect_gt(cp_graph_n_nodes(g), 0, "%s", gl.gl_pathv[i]);
        cr_expect_eq(cp_graph_verify(g, &d), CP_OK, "%s: %s", gl.gl_pathv[i], d.msg);
        cp_graph_free(g);
    }
    globfree(&gl);
}

/* ---- [elementwise] ---- */

/* x -> op -> y, f32 [1, 4]. */
static Onnx__ModelProto *unary_model(int64_t opset, const char *op)
{
    Onnx__ModelProto *m = model_new(opset);
    input_add(m->graph, "x", F32, "1,4");
    node_add(m->graph, op, "n", "x", "y");
    output_add(m->graph, "y", F32, "1,4");
    return m;
}

Test(onnx_import, test_onnx_gelu_20_imports_as_our_gelu)
{
    Onnx__ModelProto *m = unary_model(20, "Gelu");
    struct cp_graph *g = NULL;
    struct cp_diag d;
    cr_assert_eq(import(m, &g, &d), CP_OK, "%s", d.msg);
    bool found = false;
    for (size_t i = 0; i < cp_graph_n_nodes(g); i++) {
        const struct cp_node *n = cp_graph_node(g, (int32_t)i);
        if (strcmp(n->op_type, "Gelu") == 0) {
            cr_expect_eq(n->op, CP_OP_GELU);
            found = true;
        }
    }
    cr_expect(found);
    cp_graph_free(g);

    m = unary_model(19, "Gelu");
    expect_error(m, CP_ERR_UNSUPPORTED, "Gelu");
}

Test(onnx_import, test_onnx_cast_to_float8_is_refused_by_name)
{
    Onnx__ModelProto *m = unary_model(19, "Neg");
    Onnx__NodeProto *c = node_add(m->graph, "Cast", "cast", "x", "x8");
    attr_int(c, "to", 17); /* FLOAT8E4M3FN */
    attr_int(c, "saturate", 1);
    expect_error(m, CP_ERR_UNSUPPORTED, "float8 types are not supported");
}
