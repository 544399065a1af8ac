/* ONNX import refuses, naming what and where: unsupported ops, opsets and
 * dtypes, and malformed models (truncated, garbage, wrong wire types, deep
 * nesting, missing fields, dangling names, cycles). */
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
