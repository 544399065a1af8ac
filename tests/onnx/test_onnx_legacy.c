/* The opset 1-10 forms of ops the table has (onnx/ops_legacy.c and
 * graph/infer_legacy.c): old attributes loaded as the newer inputs, old
 * defaults, and the versions we do not compute refused with the node named. */
#include <criterion/criterion.h>

#include "graph/graph.h"
#include "onnx/onnx.h"
#include "support/onnx_build.h"

#include <stdlib.h>
#include <string.h>

#define STR_BN "bn"

/* Import (and, when `infer`, infer) the model; the model is freed. */
static enum cp_status import_model(struct cp_t_onnx *m, bool infer, struct cp_graph **g,
                                   struct cp_diag *d)
{
    size_t len;
    uint8_t *bytes = cp_t_onnx_bytes(m, &len);
    cr_assert_not_null(bytes);
    cp_t_onnx_free(m);
    cp_diag_init(d);
    *g = NULL;
    enum cp_status st = cp_onnx_import_buffer(bytes, len, NULL, "m.onnx", NULL, 0, g, d);
    free(bytes);
    if (st == CP_OK && infer)
        st = cp_graph_infer(*g, d);
    return st;
}

static const struct cp_tensor *tensor_named(const struct cp_graph *g, const char *name)
{
    for (size_t i = 0; i < cp_graph_n_tensors(g); i++)
        if (strcmp(cp_graph_tensor(g, (int32_t)i)->name, name) == 0)
            return cp_graph_tensor(g, (int32_t)i);
    cr_assert_fail("no tensor '%s'", name);
    return NULL;
}

static void assert_shape(const struct cp_graph *g, const char *name, int rank, const int64_t *dims)
{
    const struct cp_tensor *t = tensor_named(g, name);
    cr_assert_eq(t->shape.rank, rank, "%s: rank %d", name, t->shape.rank);
    for (int k = 0; k < rank; k++)
        cr_assert_eq(t->shape.dims[k].value, dims[k], "%s: dim %d is %lld", name, k,
                     (long long)t->shape.dims[k].value);
}

static void expect_error(struct cp_t_onnx *m, bool infer, enum cp_status want, const char *a,
                         const char *b)
{
    struct cp_graph *g;
    struct cp_diag d;
    enum cp_status st = import_model(m, infer, &g, &d);
    cr_assert_eq(st, want, "status %d: %s", st, d.msg);
    cr_assert_not_null(strstr(d.msg, a), "%s", d.msg);
    if (b)
        cr_assert_not_null(strstr(d.msg, b), "%s", d.msg);
    cp_graph_free(g);
}

Test(onnx_legacy, reshape_shape_attribute_becomes_an_input_before_opset_5)
{
    struct cp_t_onnx *m = cp_t_onnx_new(4);
    cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){2, 3});
    int n = cp_t_onnx_node(m, "Reshape", "r", "x", "y");
    cp_t_onnx_attr_ints(m, n, "shape", (int64_t[]){3, -1}, 2);
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    struct cp_graph *g;
    struct cp_diag d;
    cr_assert_eq(import_model(m, true, &g, &d), CP_OK, "%s", d.msg);
    const struct cp_node *r = cp_graph_node(g, 0);
    cr_assert_eq(r->op, CP_OP_RESHAPE);
    cr_assert_eq(r->n_inputs, 2);
    const struct cp_tensor *s = cp_graph_tensor(g, r->inputs[1]);
    cr_assert_eq(s->kind, CP_TENSOR_INITIALIZER);
    cr_assert_eq(s->dtype, CP_DTYPE_I64);
    assert_shape(g, "y", 2, (int64_t[]){3, 2});
    cp_graph_free(g);
}

Test(onnx_legacy, reshape_needs_its_shape_in_the_form_of_its_opset)
{
    struct cp_t_onnx *m = cp_t_onnx_new(4);
    cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){2, 3});
    cp_t_onnx_node(m, "Reshape", "r", "x", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_INVALID, "node 'r' (Reshape)", "'shape' attribute");
    m = cp_t_onnx_new(13);
    cp_t_onnx_input(m, "x", CP_T_F32, 2, (int64_t[]){2, 3});
    cp_t_onnx_node(m, "Reshape", "r", "x", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_INVALID, "node 'r' (Reshape)", "exactly 2");
}

Test(onnx_legacy, concat_axis_defaults_to_1_before_opset_4)
{
    struct cp_t_onnx *m = cp_t_onnx_new(3);
    cp_t_onnx_input(m, "a", CP_T_F32, 2, (int64_t[]){2, 3});
    cp_t_onnx_input(m, "b", CP_T_F32, 2, (int64_t[]){2, 4});
    cp_t_onnx_node(m, "Concat", "c", "a,b", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    struct cp_graph *g;
    struct cp_diag d;
    cr_assert_eq(import_model(m, true, &g, &d), CP_OK, "%s", d.msg);
    assert_shape(g, "y", 2, (int64_t[]){2, 7});
    cp_graph_free(g);
    m = cp_t_onnx_new(4);
    cp_t_onnx_input(m, "a", CP_T_F32, 2, (int64_t[]){2, 3});
    cp_t_onnx_node(m, "Concat", "c", "a,a", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_INVALID, "node 'c' (Concat)", "'axis'");
}

Test(onnx_legacy, cast_to_is_a_type_name_before_opset_6)
{
    struct cp_t_onnx *m = cp_t_onnx_new(5);
    cp_t_onnx_input(m, "x", CP_T_F32, 1, (int64_t[]){4});
    int n = cp_t_onnx_node(m, "Cast", "c", "x", "y");
    cp_t_onnx_attr_string(m, n, "to", "INT64");
    cp_t_onnx_output(m, "y", CP_T_I64, -1, NULL);
    struct cp_graph *g;
    struct cp_diag d;
    cr_assert_eq(import_model(m, true, &g, &d), CP_OK, "%s", d.msg);
    cr_assert_eq(cp_node_attr_int(cp_graph_node(g, 0), "to", 0), CP_T_I64);
    cr_assert_eq(tensor_named(g, "y")->dtype, CP_DTYPE_I64);
    cp_graph_free(g);
    m = cp_t_onnx_new(5);
    cp_t_onnx_input(m, "x", CP_T_F32, 1, (int64_t[]){4});
    n = cp_t_onnx_node(m, "Cast", "c", "x", "y");
    cp_t_onnx_attr_string(m, n, "to", "STRING");
    cp_t_onnx_output(m, "y", CP_T_I64, -1, NULL);
    expect_error(m, false, CP_ERR_UNSUPPORTED, "node 'c' (Cast)", "'STRING'");
    /* from opset 6 the name form is wrong */
    m = cp_t_onnx_new(6);
    cp_t_onnx_input(m, "x", CP_T_F32, 1, (int64_t[]){4});
    n = cp_t_onnx_node(m, "Cast", "c", "x", "y");
    cp_t_onnx_attr_string(m, n, "to", "INT64");
    cp_t_onnx_output(m, "y", CP_T_I64, -1, NULL);
    expect_error(m, false, CP_ERR_INVALID, "node 'c' (Cast)", "an INT");
}

Test(onnx_legacy, upsample_imports_onto_resize_with_its_scales_as_input)
{
    struct cp_t_onnx *m = cp_t_onnx_new(7);
    cp_t_onnx_input(m, "x", CP_T_F32, 4, (int64_t[]){1, 1, 2, 3});
    int n = cp_t_onnx_node(m, "Upsample", "up", "x", "y");
    cp_t_onnx_attr_floats(m, n, "scales", (float[]){1, 1, 2, 3}, 4);
    cp_t_onnx_attr_string(m, n, "mode", "linear");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    struct cp_graph *g;
    struct cp_diag d;
    cr_assert_eq(import_model(m, true, &g, &d), CP_OK, "%s", d.msg);
    const struct cp_node *r = cp_graph_node(g, 0);
    cr_assert_eq(r->op, CP_OP_RESIZE);
    cr_assert_str_eq(r->origins[0], "up");
    cr_assert_str_eq(cp_node_attr_string(r, "mode", ""), "linear");
    cr_assert_null(cp_node_attr(r, "scales"));
    assert_shape(g, "y", 4, (int64_t[]){1, 1, 4, 9});
    cp_graph_free(g);
    /* opset 9: scales are input 1 */
    m = cp_t_onnx_new(9);
    cp_t_onnx_input(m, "x", CP_T_F32, 4, (int64_t[]){1, 1, 2, 3});
    cp_t_onnx_init_f32(m, "s", 1, (int64_t[]){4}, (float[]){1, 1, 2, 2}, 4);
    cp_t_onnx_node(m, "Upsample", "up", "x,s", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    cr_assert_eq(import_model(m, true, &g, &d), CP_OK, "%s", d.msg);
    assert_shape(g, "y", 4, (int64_t[]){1, 1, 4, 6});
    cp_graph_free(g);
}

Test(onnx_legacy, upsample_refuses_what_it_does_not_define)
{
    struct cp_t_onnx *m = cp_t_onnx_new(7);
    cp_t_onnx_input(m, "x", CP_T_F32, 4, (int64_t[]){1, 1, 2, 3});
    int n = cp_t_onnx_node(m, "Upsample", "up", "x", "y");
    cp_t_onnx_attr_floats(m, n, "scales", (float[]){1, 1, 2, 2}, 4);
    cp_t_onnx_attr_string(m, n, "mode", "cubic");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_INVALID, "node 'up' (Upsample)", "'nearest' or 'linear'");
    m = cp_t_onnx_new(8);
    cp_t_onnx_input(m, "x", CP_T_F32, 4, (int64_t[]){1, 1, 2, 3});
    n = cp_t_onnx_node(m, "Upsample", "up", "x", "y");
    cp_t_onnx_attr_floats(m, n, "scales", (float[]){1, 1, 0.5f, 2}, 4);
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_INVALID, "node 'up' (Upsample)", "below 1");
    /* deprecated from opset 10 on: Resize instead */
    m = cp_t_onnx_new(10);
    cp_t_onnx_input(m, "x", CP_T_F32, 4, (int64_t[]){1, 1, 2, 3});
    cp_t_onnx_init_f32(m, "s", 1, (int64_t[]){4}, (float[]){1, 1, 2, 2}, 4);
    cp_t_onnx_node(m, "Upsample", "up", "x,s", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_UNSUPPORTED, "Upsample (1 node; needs opset 7", NULL);
}

static struct cp_t_onnx *batch_norm_model(int64_t opset, const char *outs)
{
    struct cp_t_onnx *m = cp_t_onnx_new(opset);
    cp_t_onnx_input(m, "x", CP_T_F32, 4, (int64_t[]){1, 2, 3, 3});
    for (int i = 0; i < 4; i++) {
        static const char *const names[] = {"s", "b", "mean", "var"};
        cp_t_onnx_init_f32(m, names[i], 1, (int64_t[]){2}, (float[]){1, 1}, 2);
    }
    cp_t_onnx_node(m, "BatchNormalization", STR_BN, "x,s,b,mean,var", outs);
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    return m;
}

Test(onnx_legacy, batch_norm_training_forms_are_refused)
{
    /* opset 6: is_test 0 (the default) is training mode */
    expect_error(batch_norm_model(6, "y"), false, CP_ERR_UNSUPPORTED,
                 "node 'bn' (BatchNormalization)", "is_test=1");
    struct cp_t_onnx *m = batch_norm_model(6, "y");
    cp_t_onnx_attr_int(m, 0, "is_test", 1);
    struct cp_graph *g;
    struct cp_diag d;
    cr_assert_eq(import_model(m, true, &g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
    m = batch_norm_model(7, "y");
    cp_t_onnx_attr_int(m, 0, "spatial", 0);
    expect_error(m, false, CP_ERR_UNSUPPORTED, "node 'bn' (BatchNormalization)", "spatial=0");
    expect_error(batch_norm_model(9, "y,rm,rv,sm,sv"), false, CP_ERR_UNSUPPORTED,
                 "node 'bn' (BatchNormalization)", "training mode");
}

Test(onnx_legacy, dropout_training_forms_are_refused)
{
    struct cp_t_onnx *m = cp_t_onnx_new(6);
    cp_t_onnx_input(m, "x", CP_T_F32, 1, (int64_t[]){4});
    cp_t_onnx_node(m, "Dropout", "dr", "x", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_UNSUPPORTED, "node 'dr' (Dropout)", "is_test=1");
    m = cp_t_onnx_new(7);
    cp_t_onnx_input(m, "x", CP_T_F32, 1, (int64_t[]){4});
    cp_t_onnx_node(m, "Dropout", "dr", "x", "y,mask");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    cp_t_onnx_output(m, "mask", CP_T_F32, -1, NULL);
    expect_error(m, false, CP_ERR_UNSUPPORTED, "node 'dr' (Dropout)", "mask");
}

static struct cp_t_onnx *legacy_add(int64_t b_len, int64_t bcast, int64_t axis)
{
    struct cp_t_onnx *m = cp_t_onnx_new(6);
    cp_t_onnx_input(m, "a", CP_T_F32, 2, (int64_t[]){2, 3});
    cp_t_onnx_input(m, "b", CP_T_F32, 1, (int64_t[]){b_len});
    int n = cp_t_onnx_node(m, "Add", "add", "a,b", "y");
    if (bcast >= 0)
        cp_t_onnx_attr_int(m, n, "broadcast", bcast);
    if (axis >= 0)
        cp_t_onnx_attr_int(m, n, "axis", axis);
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    return m;
}

Test(onnx_legacy, legacy_broadcast_is_computed_only_where_numpy_agrees)
{
    struct cp_graph *g;
    struct cp_diag d;
    /* B on A's trailing dims: numpy's answer */
    cr_assert_eq(import_model(legacy_add(3, 1, 1), true, &g, &d), CP_OK, "%s", d.msg);
    assert_shape(g, "y", 2, (int64_t[]){2, 3});
    cp_graph_free(g);
    cr_assert_eq(import_model(legacy_add(3, 1, -1), true, &g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
    /* one element lines up anywhere */
    cr_assert_eq(import_model(legacy_add(1, 1, 0), true, &g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
    /* B on A's first dim: numpy would line it up with the last */
    expect_error(legacy_add(2, 1, 0), true, CP_ERR_UNSUPPORTED, "node 'add' (Add)",
                 "only trailing alignment");
    expect_error(legacy_add(3, 0, 1), true, CP_ERR_INVALID, "node 'add' (Add)",
                 "needs broadcast=1");
    expect_error(legacy_add(3, 2, -1), false, CP_ERR_INVALID, "node 'add' (Add)", "0 or 1");
    /* from opset 7 the attributes mean nothing: numpy broadcasting */
    struct cp_t_onnx *m = cp_t_onnx_new(7);
    cp_t_onnx_input(m, "a", CP_T_F32, 2, (int64_t[]){2, 3});
    cp_t_onnx_input(m, "b", CP_T_F32, 2, (int64_t[]){2, 1});
    cp_t_onnx_node(m, "Add", "add", "a,b", "y");
    cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
    cr_assert_eq(import_model(m, true, &g, &d), CP_OK, "%s", d.msg);
    cp_graph_free(g);
}

Test(onnx_legacy, rows_give_their_real_opset_ranges)
{
    static const struct {
        const char *op;
        int64_t opset;
        bool ok;
    } cases[] = {
        {"Relu", 1, true},   {"Relu", 21, true}, {"Erf", 8, false},    {"Erf", 9, true},
        {"Where", 8, false}, {"Where", 9, true}, {"Sigmoid", 6, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cp_t_onnx *m = cp_t_onnx_new(cases[i].opset);
        cp_t_onnx_input(m, "x", CP_T_F32, 1, (int64_t[]){4});
        bool where = strcmp(cases[i].op, "Where") == 0;
        if (where)
            cp_t_onnx_init(m, "c", 9, 1, (int64_t[]){4}, (uint8_t[]){1, 0, 1, 0}, 4);
        cp_t_onnx_node(m, cases[i].op, "n", where ? "c,x,x" : "x", "y");
        cp_t_onnx_output(m, "y", CP_T_F32, -1, NULL);
        struct cp_graph *g;
        struct cp_diag d;
        enum cp_status st = import_model(m, true, &g, &d);
        cr_assert_eq(st == CP_OK, cases[i].ok, "%s at opset %lld: %s", cases[i].op,
                     (long long)cases[i].opset, d.msg);
        cp_graph_free(g);
    }
}
