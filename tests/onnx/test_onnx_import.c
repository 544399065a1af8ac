/* ONNX import of well-formed models, the op table and the example models:
 * models are built with onnx_test.h's builders, packed into a scratch
 * folder and imported. */
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

TestSuite(onnx_import, .init = cp_t_scratch_setup, .fini = onnx_test_teardown);

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
