/* ONNX import of initializers kept in external files: loaded from the
 * model's folder, and refused when they would read anything else. */
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
