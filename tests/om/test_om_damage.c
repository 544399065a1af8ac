/* The CPU .om reader's refusal of damaged or foreign files: truncation,
 * trailing bytes, every single byte flip, checksum mismatch, newer format
 * versions and unknown required flags, bad section tables, non-.om files,
 * invalid graph contents, malformed protobuf and bad metadata (the last
 * ones with a valid checksum); and the writer's refusal of a graph it could
 * not read back. */
#include "om_test.h"
#include "proto/cpom.pb-c.h"

TestSuite(om_damage);

/* ---- header and checksum ------------------------------------------------- */

Test(om_damage, rejects_truncated_file)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    for (size_t n = 0; n < len; n++) {
        uint8_t *copy = malloc(n ? n : 1); /* exact size, so ASan sees overreads */
        memcpy(copy, buf, n);
        struct cp_diag d;
        cr_assert_eq(read_buf(copy, n, &d), CP_ERR_CORRUPT, "length %zu: %s", n, d.msg);
        cr_assert_not_null(strstr(d.msg, "truncated"), "length %zu: %s", n, d.msg);
        cr_assert_not_null(strstr(d.msg, "x.om"), "%s", d.msg);
        free(copy);
    }
    char want[128];
    snprintf(want, sizeof want, "x.om: truncated: header says %zu bytes, file has 1000", len);
    struct cp_diag d;
    read_buf(buf, 1000, &d);
    cr_assert_str_eq(d.msg, want);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_damage, rejects_trailing_bytes)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint8_t *longer = calloc(len + 64, 1);
    memcpy(longer, buf, len);
    struct cp_diag d;
    cr_assert_eq(read_buf(longer, len + 64, &d), CP_ERR_CORRUPT, "%s", d.msg);
    cp_graph_free(f.g);
    free(buf);
    free(longer);
}

Test(om_damage, rejects_every_single_byte_flip)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint8_t *copy = malloc(len);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    for (size_t m = 0; m < sizeof masks; m++)
        for (size_t i = 0; i < len; i++) {
            memcpy(copy, buf, len);
            copy[i] ^= masks[m];
            struct cp_diag d;
            enum cp_status st = read_buf(copy, len, &d);
            cr_assert(st == CP_ERR_CORRUPT || st == CP_ERR_VERSION,
                      "byte %zu ^ 0x%02x: status %d (%s)", i, masks[m], st, d.msg);
            if (st == CP_ERR_VERSION)
                cr_assert(i >= 4 && i < 8, "only the version field gives a version error");
        }
    cp_graph_free(f.g);
    free(copy);
    free(buf);
}

Test(om_damage, checksum_mismatch_names_file_and_both_values)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t stored = rd64(buf + 8);
    buf[len - 1] ^= 0x10;
    uint64_t computed = cp_hash64(buf + 16, len - 16);
    char want[256];
    snprintf(want, sizeof want,
             "x.om: checksum mismatch (stored 0x%016llx, computed 0x%016llx): the file is "
             "corrupt",
             (unsigned long long)stored, (unsigned long long)computed);
    struct cp_diag d;
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_CORRUPT);
    cr_assert_str_eq(d.msg, want);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_damage, rejects_newer_format_version)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    wr32(buf + 4, 2);
    fix_checksum(buf, len);
    struct cp_diag d;
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_VERSION, "%s", d.msg);
    cr_assert_str_eq(d.msg, "x.om: format version 2 is newer than this cannprof supports (1); "
                            "upgrade cannprof");
    wr32(buf + 4, 0);
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_CORRUPT, "%s", d.msg);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_damage, unknown_required_flag_is_refused_and_compatible_flag_ignored)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    struct cp_diag d;
    wr32(buf + 20, 0x00010000);
    fix_checksum(buf, len);
    cr_assert_eq(read_buf(buf, len, &d), CP_ERR_VERSION, "%s", d.msg);
    cr_assert_not_null(strstr(d.msg, "0x00010000"), "%s", d.msg);
    wr32(buf + 20, 0x00000001);
    fix_checksum(buf, len);
    cr_assert_eq(read_buf(buf, len, &d), CP_OK, "%s", d.msg);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_damage, rejects_bad_section_table_even_with_valid_checksum)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint8_t *copy = malloc(len);
    struct {
        size_t at;
        int width;
        uint64_t value;
        const char *says;
    } cases[] = {
        {40 + 24 * 2 + 8, 8, UINT64_MAX - 63, "outside the file"}, /* weights offset */
        {40 + 24 * 2 + 16, 8, UINT64_MAX, "outside the file"},     /* weights length */
        {40 + 24 * 1 + 8, 8, 64, "overlaps the 128-byte header"},  /* graph offset */
        {40 + 24 * 1 + 8, 8, 129, "not a multiple of 64"},
        {40 + 24 * 1 + 8, 8, 128, "overlap"},         /* graph onto metadata */
        {40 + 24 * 2, 4, 1, "two metadata sections"}, /* weights kind -> META */
        {40 + 24 * 2, 4, 0, "malformed"},
        {40 + 24 * 0 + 4, 4, 7, "malformed"},
        {16, 4, 64, "header size"},
        {16, 4, 100, "header size"},
        {16, 4, 0xFFFFFFC0u, "header size"},
        {32, 4, 0, "sections"},
        {32, 4, 1000, "sections"},
        {32, 4, 2, "no weights section"},
        {36, 4, 1, "reserved"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(copy, buf, len);
        if (cases[i].width == 4)
            wr32(copy + cases[i].at, (uint32_t)cases[i].value);
        else
            wr64(copy + cases[i].at, cases[i].value);
        fix_checksum(copy, len);
        struct cp_diag d;
        cr_assert_eq(read_buf(copy, len, &d), CP_ERR_CORRUPT, "case %zu: %s", i, d.msg);
        cr_assert_not_null(strstr(d.msg, cases[i].says), "case %zu: %s", i, d.msg);
    }
    cp_graph_free(f.g);
    free(copy);
    free(buf);
}

Test(om_damage, rejects_non_om_file)
{
    static const uint8_t junk[] = "this is not a model at all, just some text";
    struct cp_diag d;
    cr_assert_eq(read_buf(junk, sizeof junk, &d), CP_ERR_CORRUPT);
    cr_assert_not_null(strstr(d.msg, "not a cannprof .om"), "%s", d.msg);
    cr_assert_eq(cp_om_sniff(junk, sizeof junk), CP_OM_KIND_UNKNOWN);
    cr_assert_eq(cp_om_sniff((const uint8_t *)"CPO", 3), CP_OM_KIND_UNKNOWN);
    cr_assert_eq(cp_om_sniff((const uint8_t *)"CPOM", 4), CP_OM_KIND_CPU);
}

/* ---- validation of section contents (checksum valid) --------------------- */

/* An unpack allocator that never frees piecemeal, so mutations may share or
 * drop pointers freely. */
struct arena {
    void *blocks[4096];
    size_t n;
};

static void *arena_alloc(void *ctx, size_t size)
{
    struct arena *a = ctx;
    cr_assert_lt(a->n, 4096);
    return a->blocks[a->n++] = calloc(1, size ? size : 1);
}

static void arena_free(void *ctx, void *p)
{
    (void)ctx;
    (void)p;
}

static void arena_release(struct arena *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->blocks[i]);
    a->n = 0;
}

typedef void (*mutator)(Cpom__Graph *g);

static void mut_none(Cpom__Graph *g)
{
    (void)g;
}
static void mut_dtype(Cpom__Graph *g)
{
    g->tensors[1]->dtype = CP_DTYPE_COUNT;
}
static void mut_layout(Cpom__Graph *g)
{
    g->tensors[1]->layout = 200;
}
static void mut_kind(Cpom__Graph *g)
{
    g->tensors[0]->kind = 3;
}
static void mut_rank_too_big(Cpom__Graph *g)
{
    g->tensors[0]->rank = CP_MAX_RANK + 1;
}
static void mut_rank_negative(Cpom__Graph *g)
{
    g->tensors[0]->rank = -2;
}
static void mut_rank_dims(Cpom__Graph *g)
{
    g->tensors[0]->rank = 3;
}
static void mut_no_rank(Cpom__Graph *g)
{
    g->tensors[0]->has_rank = false;
}
static void mut_no_name(Cpom__Graph *g)
{
    g->tensors[2]->name = NULL;
}
static void mut_dup_tensor(Cpom__Graph *g)
{
    g->tensors[2]->name = g->tensors[1]->name;
}
static void mut_dup_node(Cpom__Graph *g)
{
    g->nodes[1]->name = g->nodes[0]->name;
}
static void mut_op(Cpom__Graph *g)
{
    g->nodes[0]->op = CP_OP_COUNT;
}
static void mut_no_op_type(Cpom__Graph *g)
{
    g->nodes[0]->op_type = NULL;
}
static void mut_input_index(Cpom__Graph *g)
{
    g->nodes[0]->inputs[1] = (int32_t)g->n_tensors;
}
static void mut_input_negative(Cpom__Graph *g)
{
    g->nodes[0]->inputs[1] = -2;
}
static void mut_output_taken(Cpom__Graph *g)
{
    g->nodes[1]->outputs[0] = g->nodes[0]->outputs[0];
}
static void mut_output_is_initializer(Cpom__Graph *g)
{
    g->nodes[0]->outputs[0] = 1;
}
static void mut_graph_output(Cpom__Graph *g)
{
    g->outputs[0] = 1000;
}
static void mut_graph_input(Cpom__Graph *g)
{
    g->inputs[0] = -1;
}
static void mut_data_misaligned(Cpom__Graph *g)
{
    g->tensors[2]->data_offset += 4;
}
static void mut_data_outside(Cpom__Graph *g)
{
    g->tensors[2]->data_offset = 1u << 20;
}
static void mut_data_huge(Cpom__Graph *g)
{
    g->tensors[2]->data_offset = UINT64_MAX - 63;
}
static void mut_data_size(Cpom__Graph *g)
{
    g->tensors[2]->data_bytes += 4;
}
static void mut_data_no_size(Cpom__Graph *g)
{
    g->tensors[2]->has_data_bytes = false;
}
static void mut_data_dynamic(Cpom__Graph *g)
{
    g->tensors[2]->dims[0]->value = -1;
}
static void mut_attr_type(Cpom__Graph *g)
{
    g->nodes[0]->attrs[0]->type = 42;
}
static void mut_attr_tensor(Cpom__Graph *g)
{
    g->nodes[1]->attrs[0]->tensor = (int32_t)g->n_tensors;
}
static void mut_attr_missing_value(Cpom__Graph *g)
{
    g->nodes[0]->attrs[1]->has_i = false;
}
static void mut_attr_dup(Cpom__Graph *g)
{
    g->nodes[0]->attrs[1]->name = g->nodes[0]->attrs[0]->name;
}
static void mut_dim_no_value(Cpom__Graph *g)
{
    g->tensors[0]->dims[1]->has_value = false;
}

Test(om_damage, rejects_invalid_graph_contents_even_with_valid_checksum)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t mo, ml, go, gl, wo, wl;
    find_section(buf, 1, &mo, &ml);
    find_section(buf, 2, &go, &gl);
    find_section(buf, 3, &wo, &wl);
    /* The first values past the tables, which grow as ops and dtypes are
     * added. */
    char bad_dtype[32], bad_op[48];
    snprintf(bad_dtype, sizeof bad_dtype, "dtype %d", (int)CP_DTYPE_COUNT);
    snprintf(bad_op, sizeof bad_op, "op %d is out of range", (int)CP_OP_COUNT);
    struct {
        mutator fn;
        const char *says;
    } cases[] = {
        {mut_dtype, bad_dtype},
        {mut_layout, "layout 200"},
        {mut_kind, "kind 3"},
        {mut_rank_too_big, "rank 9 is out of range"},
        {mut_rank_negative, "rank -2"},
        {mut_rank_dims, "rank 3 but 4 dimensions"},
        {mut_no_rank, "no rank"},
        {mut_no_name, "tensor 2 has no name"},
        {mut_dup_tensor, "two tensors are named 'conv.weight'"},
        {mut_dup_node, "two nodes are named 'conv0'"},
        {mut_op, bad_op},
        {mut_no_op_type, "no op type"},
        {mut_input_index, "out of range"},
        {mut_input_negative, "out of range"},
        {mut_output_taken, "already produced"},
        {mut_output_is_initializer, "already produced"},
        {mut_graph_output, "graph output 0"},
        {mut_graph_input, "graph input 0"},
        {mut_data_misaligned, "not a multiple of 64"},
        {mut_data_outside, "outside the weights section"},
        {mut_data_huge, "outside the weights section"},
        {mut_data_size, "shape and dtype need"},
        {mut_data_no_size, "data offset or size missing"},
        {mut_data_dynamic, "no static shape"},
        {mut_attr_type, "unknown type 42"},
        {mut_attr_tensor, "'value'"},
        {mut_attr_missing_value, "'group'"},
        {mut_attr_dup, "appears twice"},
        {mut_dim_no_value, "dimension 1 has no value"},
    };
    for (size_t i = 0; i <= sizeof cases / sizeof cases[0]; i++) {
        bool baseline = i == sizeof cases / sizeof cases[0];
        struct arena *a = calloc(1, sizeof *a);
        ProtobufCAllocator alloc = {arena_alloc, arena_free, a};
        Cpom__Graph *gm = cpom__graph__unpack(&alloc, gl, buf + go);
        cr_assert_not_null(gm);
        (baseline ? mut_none : cases[i].fn)(gm);
        size_t n = cpom__graph__get_packed_size(gm);
        uint8_t *packed = malloc(n + 1);
        cpom__graph__pack(gm, packed);
        size_t flen;
        uint8_t *file = assemble(buf + mo, ml, packed, n, buf + wo, wl, &flen);
        struct cp_diag d;
        enum cp_status st = read_buf(file, flen, &d);
        if (baseline) {
            cr_assert_eq(st, CP_OK, "the spec-assembled file reads: %s", d.msg);
            cr_assert_eq(flen, len);
            cr_assert(memcmp(file, buf, len) == 0, "writer and spec agree byte for byte");
        } else {
            cr_assert_eq(st, CP_ERR_CORRUPT, "case %zu: %s", i, d.msg);
            cr_assert_not_null(strstr(d.msg, cases[i].says), "case %zu: %s", i, d.msg);
            cr_assert_not_null(strstr(d.msg, "x.om: graph section: "), "%s", d.msg);
        }
        free(file);
        free(packed);
        arena_release(a);
        free(a);
    }
    cp_graph_free(f.g);
    free(buf);
}

Test(om_damage, rejects_malformed_protobuf)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t mo, ml, go, gl, wo, wl;
    find_section(buf, 1, &mo, &ml);
    find_section(buf, 2, &go, &gl);
    find_section(buf, 3, &wo, &wl);
    static const uint8_t garbage[] = {0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
    size_t flen;
    uint8_t *file = assemble(buf + mo, ml, garbage, sizeof garbage, buf + wo, wl, &flen);
    struct cp_diag d;
    cr_assert_eq(read_buf(file, flen, &d), CP_ERR_CORRUPT);
    cr_assert_not_null(strstr(d.msg, "not a valid cpom.Graph"), "%s", d.msg);
    free(file);
    /* Every cut of the graph message, with a valid checksum. A cut at a
     * field boundary is a valid smaller graph (protobuf has no end marker;
     * the checksum is what catches real truncation), so only require that
     * nothing crashes and that no cut is misread silently as the whole. */
    size_t refused = 0;
    for (size_t n = 0; n < gl; n++) {
        file = assemble(buf + mo, ml, buf + go, n, buf + wo, wl, &flen);
        enum cp_status st = read_buf(file, flen, &d);
        cr_assert(st == CP_OK || st == CP_ERR_CORRUPT, "cut at %zu: %s", n, d.msg);
        refused += st != CP_OK;
        free(file);
    }
    cr_assert_gt(refused, gl / 2, "most cuts are refused (%zu of %llu)", refused,
                 (unsigned long long)gl);
    cp_graph_free(f.g);
    free(buf);
}

Test(om_damage, rejects_bad_metadata_even_with_valid_checksum)
{
    struct fixture f;
    size_t len;
    uint8_t *buf = write_fixture(&f, &len);
    uint64_t mo, ml, go, gl, wo, wl;
    find_section(buf, 1, &mo, &ml);
    find_section(buf, 2, &go, &gl);
    find_section(buf, 3, &wo, &wl);
    const char *cases[][2] = {
        {"", "not valid JSON"},
        {"{\"format_version\":1", "not valid JSON"},
        {"[1,2]", "not a JSON object"},
        {"{\"format_version\":2,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"\"},\"config\":{}}",
         "format_version"},
        {"{\"format_version\":1,\"target\":\"\",\"source\":{\"path\":\"\",\"hash\":\"\"},"
         "\"config\":{}}",
         "tool_version"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"xyz\"},\"config\":{}}",
         "source hash"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"\"}}",
         "'config'"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":{\"path\":"
         "\"\",\"hash\":\"\"},\"config\":{\"precision_mode\":\"fastest\"}}",
         "precision_mode"},
        {"{\"format_version\":1,\"format_version\":1}", "not valid JSON"},
        {"{\"format_version\":1,\"tool_version\":\"0\",\"target\":\"\",\"source\":\"x\","
         "\"config\":{}}",
         "'source'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t flen;
        uint8_t *file =
            assemble(cases[i][0], strlen(cases[i][0]), buf + go, gl, buf + wo, wl, &flen);
        struct cp_diag d;
        cr_assert_eq(read_buf(file, flen, &d), CP_ERR_CORRUPT, "case %zu: %s", i, d.msg);
        cr_assert_not_null(strstr(d.msg, cases[i][1]), "case %zu: %s", i, d.msg);
        cr_assert_not_null(strstr(d.msg, "x.om: metadata"), "case %zu: %s", i, d.msg);
        free(file);
    }
    /* Unknown keys are for newer writers: ignored. */
    const char *extra = "{\"format_version\":1,\"tool_version\":\"9\",\"target\":\"t\","
                        "\"source\":{\"path\":\"p\",\"hash\":\"\",\"size\":3},\"config\":{},"
                        "\"future\":[1,2,3]}";
    size_t flen;
    uint8_t *file = assemble(extra, strlen(extra), buf + go, gl, buf + wo, wl, &flen);
    struct cp_diag d;
    cr_assert_eq(read_buf(file, flen, &d), CP_OK, "%s", d.msg);
    free(file);
    cp_graph_free(f.g);
    free(buf);
}

/* ---- what the writer refuses -------------------------------------------- */

Test(om_damage, write_refuses_graph_it_could_not_read_back)
{
    struct fixture f;
    build(&f);
    struct cp_om_meta m;
    meta_init(&m);
    uint8_t *data = (uint8_t *)1;
    size_t len = 1;
    struct cp_diag d;
    cp_diag_init(&d);
    /* The graph API refuses a duplicate name, but a pass could still rename
     * a tensor into a clash; the writer must catch it. */
    int32_t extra = add_tensor(f.g, "y_extra", CP_DTYPE_F32, NULL, CP_TENSOR_INTERMEDIATE);
    cp_graph_tensor(f.g, extra)->name = "y";
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_null(data);
    cr_assert_eq(len, 0);
    cr_assert_not_null(strstr(d.msg, "two tensors are named 'y'"), "%s", d.msg);
    cp_graph_free(f.g);

    build(&f);
    cp_graph_node(f.g, f.reshape)->name = "conv0";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "two nodes are named 'conv0'"), "%s", d.msg);
    /* A dead node may share a name: it is not written. */
    cp_graph_node(f.g, f.reshape)->name = "reshape0";
    cp_graph_node(f.g, f.dead)->name = "conv0";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_OK, "%s", d.msg);
    free(data);

    m.source_hash = (char *)"not-a-hash";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "source hash"), "%s", d.msg);
    m.source_hash = NULL;
    m.target = (char *)"cpu \xff\xfe";
    cp_diag_init(&d);
    cr_assert_eq(cp_om_write_buffer(f.g, &m, &data, &len, &d), CP_ERR_INVALID);
    cr_assert_not_null(strstr(d.msg, "UTF-8"), "%s", d.msg);
    cp_graph_free(f.g);
}
